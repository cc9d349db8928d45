// a CUDA file with no kernel in it
