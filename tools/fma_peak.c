// tools/fma_peak.c: this CPU's peak float rate, from a loop that only does fused multiply-adds
// on registers: ACCUMULATORS independent vectors, each updated acc = acc * m + a, so that the
// FMA units never wait for a result or for memory. make bench builds it for the same -march as
// ./maskprior and prints every rate it measures as a share of this peak.
//   tools/fma_peak THREADS   one line: "fma_peak threads T vector_bits W gflops G"
// The peak counts an FMA as 2 flops. ./maskprior multiplies and adds separately (-ffp-contract=off,
// for the same bits on every CPU), so on a core whose FMA units also do the plain multiplies and
// adds it can reach at most half of this.
#include <immintrin.h>
#include <omp.h>
#include <stdio.h>
#include <stdlib.h>

#define ACCUMULATORS 12  // more than latency x units (4 x 2) of current cores
#define ITERATIONS 20000000L

#if defined(__AVX512F__)
typedef __m512 vec;
#define LANES 16
#define set1 _mm512_set1_ps
#define fmadd _mm512_fmadd_ps
#define reduce_sum _mm512_reduce_add_ps
#elif defined(__FMA__)
typedef __m256 vec;
#define LANES 8
#define set1 _mm256_set1_ps
#define fmadd _mm256_fmadd_ps
static float reduce_sum(vec v) {
    float lanes[8], sum = 0;
    _mm256_storeu_ps(lanes, v);
    for (int i = 0; i < 8; i++) sum += lanes[i];
    return sum;
}
#endif

int main(int argc, char** argv) {
#ifndef LANES
    (void)argc;
    (void)argv;
    printf("fma_peak threads 0 vector_bits 0 gflops 0 (this build's -march has no FMA)\n");
    return 0;
#else
    const int threads = argc > 1 ? atoi(argv[1]) : 1;
    if (threads < 1) {
        fprintf(stderr, "usage: fma_peak THREADS\n");
        return 2;
    }
    float checksum = 0;
    double start = omp_get_wtime();
    #pragma omp parallel num_threads(threads) reduction(+ : checksum)
    {
        vec acc[ACCUMULATORS];
        const vec m = set1(0.999999f), a = set1(1e-6f);  // acc stays near 1: no overflow, no denormals
        for (int j = 0; j < ACCUMULATORS; j++) acc[j] = set1(1.0f + j);
        for (long i = 0; i < ITERATIONS; i++)
            for (int j = 0; j < ACCUMULATORS; j++) acc[j] = fmadd(acc[j], m, a);
        for (int j = 0; j < ACCUMULATORS; j++) checksum += reduce_sum(acc[j]);  // keeps the loop alive
    }
    double seconds = omp_get_wtime() - start;
    double flops = 2.0 * LANES * ACCUMULATORS * ITERATIONS * threads;
    printf("fma_peak threads %d vector_bits %d gflops %.1f (checksum %g)\n", threads, LANES * 32, flops / seconds / 1e9,
           checksum);
    return 0;
#endif
}
