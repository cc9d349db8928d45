// 16-bit audio-style samples: gain with saturation to the short range.
__global__ void gain_saturate(const short *in, short *out, int n, int gain)
{
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i < n) {
        int v = in[i] * gain;
        out[i] = (short)max(-32768, min(32767, v));
    }
}
