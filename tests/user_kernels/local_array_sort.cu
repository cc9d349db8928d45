// Each thread sorts its own 8 values in a local array (data-dependent indexing).
__global__ void sort8_per_thread(const int *in, int *out, int n_groups)
{
    int g = blockIdx.x * blockDim.x + threadIdx.x;
    if (g >= n_groups) return;
    int buf[8];
    for (int k = 0; k < 8; ++k) buf[k] = in[g * 8 + k];
    for (int k = 1; k < 8; ++k) {
        int key = buf[k];
        int j = k - 1;
        while (j >= 0 && buf[j] > key) {
            buf[j + 1] = buf[j];
            --j;
        }
        buf[j + 1] = key;
    }
    for (int k = 0; k < 8; ++k) out[g * 8 + k] = buf[k];
}
