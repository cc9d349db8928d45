// Checksum over 24 words read in order and folded in reverse (volatile: loads stay in order).
__global__ void checksum24(volatile const int *in, int *out)
{
    int v0 = in[0], v1 = in[1], v2 = in[2], v3 = in[3], v4 = in[4], v5 = in[5], v6 = in[6],
        v7 = in[7], v8 = in[8], v9 = in[9], v10 = in[10], v11 = in[11], v12 = in[12],
        v13 = in[13], v14 = in[14], v15 = in[15], v16 = in[16], v17 = in[17], v18 = in[18],
        v19 = in[19], v20 = in[20], v21 = in[21], v22 = in[22], v23 = in[23];
    int h = (int)threadIdx.x;
    h = h * 31 ^ v23; h = h * 31 ^ v22; h = h * 31 ^ v21; h = h * 31 ^ v20; h = h * 31 ^ v19;
    h = h * 31 ^ v18; h = h * 31 ^ v17; h = h * 31 ^ v16; h = h * 31 ^ v15; h = h * 31 ^ v14;
    h = h * 31 ^ v13; h = h * 31 ^ v12; h = h * 31 ^ v11; h = h * 31 ^ v10; h = h * 31 ^ v9;
    h = h * 31 ^ v8; h = h * 31 ^ v7; h = h * 31 ^ v6; h = h * 31 ^ v5; h = h * 31 ^ v4;
    h = h * 31 ^ v3; h = h * 31 ^ v2; h = h * 31 ^ v1; h = h * 31 ^ v0;
    out[threadIdx.x] = h;
}
