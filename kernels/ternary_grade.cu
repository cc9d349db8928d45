// A chain of ternaries mapping a 0..100 score to a grade 0..4 (select chains, no branches).
extern "C" __global__ void ternary_grade(const int* score, int* grade, int n)
{
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i < n) {
        int s = score[i];
        grade[i] = s >= 90 ? 4 : s >= 80 ? 3 : s >= 70 ? 2 : s >= 60 ? 1 : 0;
    }
}
