// Count positive values per warp with a vote.
__global__ void count_positive(const int *in, int *count)
{
    int v = in[blockIdx.x * blockDim.x + threadIdx.x];
    unsigned int ballot = __ballot_sync(0xffffffff, v > 0);
    if ((threadIdx.x % 32) == 0) atomicAdd(count, __popc(ballot));
}
