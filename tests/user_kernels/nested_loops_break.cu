// Nested loops with break / continue: first pair (j, k) with in[j] + in[k] == target.
__global__ void two_sum(const int *in, int n, const int *targets, int *found)
{
    int t = threadIdx.x;
    int target = targets[t];
    int result = -1;
    for (int j = 0; j < n; ++j) {
        if (in[j] > target + 100) continue;
        int k;
        for (k = j + 1; k < n; ++k)
            if (in[j] + in[k] == target) break;
        if (k < n) {
            result = j * 100 + k;
            break;
        }
    }
    found[t] = result;
}
