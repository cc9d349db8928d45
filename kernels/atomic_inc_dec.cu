// atomicInc / atomicDec with a wrap limit: n identical increments leave n mod (limit + 1),
// n decrements from 0 leave (-n) mod (limit + 1), whatever the order.
extern "C" __global__ void atomic_inc_dec(unsigned* ctr, unsigned limit, int n)
{
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i < n) {
        atomicInc(&ctr[0], limit);
        atomicDec(&ctr[1], limit);
    }
}
