// 5-point Laplacian on a width x height grid; boundary cells copied through.
__global__ void laplace(const int *u, int *v, int width, int height)
{
    int x = blockIdx.x * blockDim.x + threadIdx.x;
    int y = blockIdx.y * blockDim.y + threadIdx.y;
    if (x >= width || y >= height) return;

    int idx = y * width + x;
    if (x == 0 || y == 0 || x == width - 1 || y == height - 1) {
        v[idx] = u[idx];
        return;
    }
    v[idx] = u[idx - 1] + u[idx + 1] + u[idx - width] + u[idx + width] - 4 * u[idx];
}
