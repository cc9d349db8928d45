// Pre-CUDA-9 shuffle without the _sync suffix.
__global__ void legacy_shfl(int *data)
{
    int v = data[threadIdx.x];
    v += __shfl_down(v, 1);
    data[threadIdx.x] = v;
}
