// Calculator cumsum(): y[i] = x[0] + ... + x[i], exact or flagged, by one thread in order:
// every prefix is a result, so flag[0] = 1 where one leaves int32 (both addends' signs differ
// from the wrapped sum's).
extern "C" __global__ void calc_cumsum(const int* x, int* y, int* flag, int n)
{
    int s = 0;
    int bad = 0;
    #pragma unroll 1
    for (int i = 0; i < n; ++i) {
        int v = x[i];
        int t = (int)((unsigned)s + (unsigned)v);
        bad |= (s ^ t) & (v ^ t);
        y[i] = t;
        s = t;
    }
    if (bad < 0) {
        flag[0] = 1;
    }
}
