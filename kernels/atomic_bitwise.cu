// atomicOr / atomicAnd / atomicXor (all commutative): out[0] gets bit x%32 set, out[1] gets
// bit (x/32)%32 cleared, out[2] accumulates the xor of all x. Caller seeds [0, ~0, 0].
extern "C" __global__ void atomic_bitwise(const unsigned* x, unsigned* out, int n)
{
    int stride = gridDim.x * blockDim.x;
    #pragma unroll 1
    for (int i = blockIdx.x * blockDim.x + threadIdx.x; i < n; i += stride) {
        unsigned v = x[i];
        atomicOr(&out[0], 1u << (v & 31u));
        atomicAnd(&out[1], ~(1u << ((v >> 5) & 31u)));
        atomicXor(&out[2], v);
    }
}
