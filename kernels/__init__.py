"""CUDA sources of the kernel suite and their manifest (launch shapes, inputs, intents)."""
