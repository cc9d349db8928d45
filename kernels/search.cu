// Library "search": lower_bound of each query in a sorted array (first index with
// sorted[idx] >= q), a binary search with a data-dependent trip count.
extern "C" __global__ void search(const int* sorted, int m, const int* q, int* out, int n)
{
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i < n) {
        int v = q[i];
        int lo = 0;
        int hi = m;
        #pragma unroll 1
        while (lo < hi) {
            int mid = (lo + hi) >> 1;
            if (sorted[mid] < v) {
                lo = mid + 1;
            } else {
                hi = mid;
            }
        }
        out[i] = lo;
    }
}
