// Every 32-bit atomic; old values are returned in the machine's deterministic lane order.
extern "C" __global__ void atoms(int* g, unsigned* u, int* out) {
    int t = threadIdx.x;
    out[t] = atomicAdd(&g[0], t);
    atomicSub(&g[1], t);
    atomicMin(&g[2], -t); atomicMax(&g[3], t);
    atomicMin(&u[0], (unsigned)t); atomicMax(&u[1], (unsigned)t);
    out[16 + t] = atomicExch(&g[4], t);
    out[32 + t] = atomicCAS(&g[5], t, t + 100);
    atomicAnd(&g[6], ~t); atomicOr(&g[7], t); atomicXor(&g[8], t);
    out[48 + t] = atomicInc(&u[2], 5u);
    out[64 + t] = atomicDec(&u[3], 5u);
}
extern "C" __global__ void ticket(int* counter, int* out) {
    int t = threadIdx.x + blockDim.x * blockIdx.x;
    out[t] = atomicAdd(counter, 1);
}
extern "C" __global__ void schedule(int* counter, int* out) {
    int t = threadIdx.x;
    out[3*t] = atomicAdd(counter, 1);
    out[3*t+1] = atomicAdd(counter, 1);
    __syncthreads();
    out[3*t+2] = atomicAdd(counter, 1);
}
