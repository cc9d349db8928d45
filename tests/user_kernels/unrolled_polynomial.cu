// Heavily unrolled fixed-point polynomial: far more code than the ROM holds.
__global__ void big_unroll(const int *in, int *out)
{
    int x = in[threadIdx.x];
    int acc = 0;
#pragma unroll
    for (int k = 0; k < 96; ++k) {
        acc = acc * 3 + (x ^ (k * 2654435761u));
        acc ^= acc >> 7;
    }
    out[threadIdx.x] = acc;
}
