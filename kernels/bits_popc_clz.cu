// Bit-counting builtins: out[3i..3i+2] = __popc(x), __clz(x), __ffs(x) (1-based, 0 for x == 0).
extern "C" __global__ void bits_popc_clz(const unsigned* x, int* out, int n)
{
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i < n) {
        unsigned v = x[i];
        out[3 * i] = __popc(v);
        out[3 * i + 1] = __clz((int)v);
        out[3 * i + 2] = __ffs((int)v);
    }
}
