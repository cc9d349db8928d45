// Block-wide predicate counting with __syncthreads_count / __syncthreads_or.
__global__ void count_block(const int *in, int *out)
{
    int c = __syncthreads_count(in[threadIdx.x] > 0);
    int o = __syncthreads_or(in[threadIdx.x] > 100);
    if (threadIdx.x == 0) {
        out[0] = c;
        out[1] = o;
    }
}
