// char / short / unsigned char arithmetic on int data (registers only).
__global__ void narrow(const int *in, int *out, int key)
{
    int i = threadIdx.x;
    unsigned char c = (unsigned char)in[i];
    unsigned char rot = (unsigned char)((c - 'a' + key) % 26 + 'a');
    short s = (short)in[i];
    s = (short)(s * 3 - 7);
    signed char sc = (signed char)(in[i] >> 3);
    out[i] = rot + 1000 * (int)s + (int)sc * 7;
}
