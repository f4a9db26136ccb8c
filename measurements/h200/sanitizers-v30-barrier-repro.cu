/* sanitizers-v30-barrier-repro.cu: does compute-sanitizer's racecheck follow a named barrier
 * that two warpgroups reach from two code addresses (kernels/NOTES.md, "Version 13's racecheck
 * report, explained", "Versions 23-25: outcome", "Version 26: outcome")? 256 threads; every
 * thread writes its own shared word, then all 256 pass `bar.sync 1, 256`, then each reads the
 * word of the thread 128 away (the other warpgroup's). In program order every read follows every
 * write through the barrier, so there is no hazard. Mode 0: one bar.sync, at one address, for
 * all; mode 1: warpgroup 0 and warpgroup 1 each reach it from their own branch (two BAR.SYNC
 * instructions in the SASS, as in the warp-specialised attention kernels); mode 2: mode 1 with
 * the barrier left out (a real hazard: racecheck must report it); mode 3: mode 1 after four rounds
 * of version 18's producer-consumer barriers between the warpgroups (kernels/lib/attn18.cuh:
 * warpgroup 0 waits on barrier 3 from the second round, writes a shared word per thread, arrives
 * on barrier 2; warpgroup 1 waits on barrier 2, reads warpgroup 0's word, arrives on barrier 3
 * but in the last round); mode 4: mode 3 with the final barrier at one address. The outputs are
 * checked.
 *   nvcc -O3 -gencode=arch=compute_90a,code=sm_90a -o repro measurements/h200/sanitizers-v30-barrier-repro.cu
 *   compute-sanitizer --tool racecheck ./repro 0; ... ./repro 1; ... ./repro 4 */
#include <cstdio>
#include <cstdlib>

__global__ void repro(int *out, int mode)
{
    __shared__ int buf[256], pbuf[128];
    const int t = threadIdx.x;
    int acc = 0;
    if (mode >= 3) {
        for (int r = 0; r < 4; r++) {
            if (t < 128) {
                if (r >= 1) asm volatile("bar.sync 3, 256;" ::: "memory");
                pbuf[t] = r * 1000 + t;
                asm volatile("bar.arrive 2, 256;" ::: "memory");
            } else {
                asm volatile("bar.sync 2, 256;" ::: "memory");
                acc += pbuf[t - 128] - r * 1000;
                if (r + 1 < 4) asm volatile("bar.arrive 3, 256;" ::: "memory");
            }
        }
    }
    buf[t] = 3 * t + 1;
    int v;
    if (mode == 0 || mode == 4) {
        asm volatile("bar.sync 1, 256;" ::: "memory");
        v = buf[t ^ 128];
    } else if (t < 128) {
        if (mode != 2) asm volatile("bar.sync 1, 256;" ::: "memory");
        v = buf[t + 128] * 2;
    } else {
        if (mode != 2) asm volatile("bar.sync 1, 256;" ::: "memory");
        v = buf[t - 128] * 5;
    }
    out[t] = v;
    out[256 + t] = acc;
}

int main(int argc, char **argv)
{
    const int mode = argc > 1 ? atoi(argv[1]) : 1;
    int *d, h[512];
    cudaMalloc(&d, sizeof h);
    repro<<<1, 256>>>(d, mode);
    cudaMemcpy(h, d, sizeof h, cudaMemcpyDeviceToHost);
    int bad = 0;
    for (int t = 0; t < 256; t++) {
        const int want = mode == 0 || mode == 4 ? 3 * (t ^ 128) + 1 : t < 128 ? 2 * (3 * (t + 128) + 1) : 5 * (3 * (t - 128) + 1);
        bad += h[t] != want;
        bad += h[256 + t] != (mode >= 3 && t >= 128 ? 4 * (t - 128) : 0);
    }
    printf("mode %d: %d of 512 outputs wrong\n", mode, bad);
    return bad != 0;
}
