// RGBA to grayscale with integer weights (77 R + 150 G + 29 B) >> 8, pixels as uchar4.
__global__ void rgba_to_gray(const uchar4 *rgba, unsigned char *gray, int width, int height)
{
    int x = blockIdx.x * blockDim.x + threadIdx.x;
    int y = blockIdx.y * blockDim.y + threadIdx.y;
    if (x < width && y < height) {
        uchar4 p = rgba[y * width + x];
        gray[y * width + x] = (unsigned char)((77 * p.x + 150 * p.y + 29 * p.z) >> 8);
    }
}
