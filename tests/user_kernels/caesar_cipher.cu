// Caesar cipher over a text buffer: one thread per character, letters rotated by `shift`.
__global__ void caesar(const char *in, char *out, int n, int shift)
{
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i < n) {
        char c = in[i];
        if (c >= 'a' && c <= 'z') c = 'a' + (c - 'a' + shift) % 26;
        else if (c >= 'A' && c <= 'Z') c = 'A' + (c - 'A' + shift) % 26;
        out[i] = c;
    }
}
