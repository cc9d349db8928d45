// Library "dot": one warp of 4 lanes strides over the vectors; every product goes straight
// into out[0] with atomicAdd (a commutative total, so lane order does not matter).
extern "C" __global__ void dot(const int* a, const int* b, int* out, int n)
{
    #pragma unroll 1
    for (int i = threadIdx.x; i < n; i += blockDim.x) {
        atomicAdd(out, a[i] * b[i]);
    }
}
