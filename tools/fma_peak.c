// tools/fma_peak.c: this CPU's peak float rates, two figures, from loops whose every instruction in
// the timed part is an arithmetic one on registers:
//   fma      CHAINS independent vectors, each updated c = c * m + a: fused multiply-adds, 2 flops each.
//            No float program can go faster on this core at this vector width.
//   mul_add  CHAINS / 2 vectors multiplied (p = p * m) and CHAINS / 2 added to (s = s + a): 1 flop an
//            instruction. ./maskprior multiplies and adds separately (-ffp-contract=off, for the same
//            bits on every CPU), so this is its ceiling as built: half the FMA peak on a core whose
//            FMA units also do its multiplies and adds (Intel's), up to as much on one with adders
//            of their own beside them.
// make bench builds it for the same -march as ./maskprior, prints every rate as a share of these
// peaks, and checks the loops in its disassembly (tools/bench.py, fma_peak_checked): fma_loop's
// loop holds CHAINS vfmadd, mul_add_loop's CHAINS / 2 vmulps and as many vaddps, all on registers.
//   tools/fma_peak THREADS   two lines: "fma_peak threads T vector_bits W kind fma gflops G", then mul_add's
//
// Why each chain is a variable of its own: the first version kept its accumulators in an array,
// which the compiler left in memory, so every FMA waited for a store and a load; it reported a
// third of the peak on a Xeon of family 6 model 207 (52 GFLOP/s at one thread, where this loop
// measures 147-166) and programs ran at 128-161% of it on a Zen 4. Named variables stay in
// registers. CHAINS, more than latency x units of any current core (an FMA's latency 4-5 cycles,
// 2 units: 8-10 in flight), leaves room for the two constants: 24 of AVX-512's 32 registers, 12
// of AVX2's 16.
#include <immintrin.h>
#include <omp.h>
#include <stdio.h>
#include <stdlib.h>

#define ITERATIONS 20000000L

#if defined(__AVX512F__)
typedef __m512 vec;
#define LANES 16
#define CHAINS 24
#define set1 _mm512_set1_ps
#define fmadd _mm512_fmadd_ps
#define mul _mm512_mul_ps
#define add _mm512_add_ps
#define reduce_sum _mm512_reduce_add_ps
// EACH(F): F(0) ... F(CHAINS - 1); HALF(F): F(0) ... F(CHAINS / 2 - 1)
#define HALF(F) F(0) F(1) F(2) F(3) F(4) F(5) F(6) F(7) F(8) F(9) F(10) F(11)
#define EACH(F) HALF(F) F(12) F(13) F(14) F(15) F(16) F(17) F(18) F(19) F(20) F(21) F(22) F(23)
#elif defined(__FMA__)
typedef __m256 vec;
#define LANES 8
#define CHAINS 12
#define set1 _mm256_set1_ps
#define fmadd _mm256_fmadd_ps
#define mul _mm256_mul_ps
#define add _mm256_add_ps
static float reduce_sum(vec v) {
    float lanes[8], sum = 0;
    _mm256_storeu_ps(lanes, v);
    for (int i = 0; i < 8; i++) sum += lanes[i];
    return sum;
}
#define HALF(F) F(0) F(1) F(2) F(3) F(4) F(5)
#define EACH(F) HALF(F) F(6) F(7) F(8) F(9) F(10) F(11)
#endif

#ifdef LANES
// m and a keep every chain near where it starts for 2*10^7 steps: no overflow, no denormal. They and
// the chains' start are read from volatile variables, so the compiler cannot work the loops out:
// with constants it did, proving 1.0 + j + 1e-7 == 1.0 + j for j >= 1 (less than half an ulp) and
// dropping 11 of the 12 add chains, which then counted as done.
static volatile float opaque_m = 0.99999994f, opaque_a = 1e-7f, opaque_start = 1.0f;
#define START(j) vec c##j = set1(start + j);
#define FMA_STEP(j) c##j = fmadd(c##j, m, a);
#define MUL_STEP(j) c##j = mul(c##j, m);
#define ADD_STEP(j) d##j = add(d##j, a);
#define START_ADD(j) vec d##j = set1(start + j);
#define SUM(j) sum += reduce_sum(c##j);
#define SUM_ADD(j) sum += reduce_sum(d##j);

// CHAINS fused multiply-adds an iteration; their sum, so that the compiler keeps the loop
__attribute__((noinline)) static float fma_loop(long iterations) {
    const float start = opaque_start;
    const vec m = set1(opaque_m), a = set1(opaque_a);
    EACH(START)
    for (long i = 0; i < iterations; i++) {
        EACH(FMA_STEP)
    }
    float sum = 0;
    EACH(SUM)
    return sum;
}

// CHAINS / 2 multiplies and CHAINS / 2 adds an iteration
__attribute__((noinline)) static float mul_add_loop(long iterations) {
    const float start = opaque_start;
    const vec m = set1(opaque_m), a = set1(opaque_a);
    HALF(START)
    HALF(START_ADD)
    for (long i = 0; i < iterations; i++) {
        HALF(MUL_STEP)
        HALF(ADD_STEP)
    }
    float sum = 0;
    HALF(SUM)
    HALF(SUM_ADD)
    return sum;
}

// GFLOP/s of loop on `threads` threads at once, flops_per_iteration counted per thread: the best of
// TRIES timings (about 0.1 s each), since a peak is what the core can do, and a slower try only
// measures a neighbour on the machine
#define TRIES 3
static double rate(float (*loop)(long), int threads, double flops_per_iteration, float* checksum) {
    double best = 0;
    for (int try = 0; try < TRIES; try++) {
        float sum = 0;
        const double start = omp_get_wtime();
        #pragma omp parallel num_threads(threads) reduction(+ : sum)
        sum += loop(ITERATIONS);
        const double seconds = omp_get_wtime() - start;
        *checksum += sum;
        const double gflops = flops_per_iteration * ITERATIONS * threads / seconds / 1e9;
        if (gflops > best) best = gflops;
    }
    return best;
}
#endif

int main(int argc, char** argv) {
#ifndef LANES
    (void)argc;
    (void)argv;
    printf("fma_peak threads 0 vector_bits 0 kind fma gflops 0 (this build's -march has no FMA)\n");
    printf("fma_peak threads 0 vector_bits 0 kind mul_add gflops 0 (this build's -march has no FMA)\n");
    return 0;
#else
    const int threads = argc > 1 ? atoi(argv[1]) : 1;
    if (argc != 2 || threads < 1) {
        fprintf(stderr, "usage: fma_peak THREADS\n");
        return 2;
    }
    float checksum = 0;
    const double fma = rate(fma_loop, threads, 2.0 * LANES * CHAINS, &checksum);
    const double mul_add = rate(mul_add_loop, threads, 1.0 * LANES * CHAINS, &checksum);
    printf("fma_peak threads %d vector_bits %d kind fma gflops %.1f\n", threads, LANES * 32, fma);
    printf("fma_peak threads %d vector_bits %d kind mul_add gflops %.1f (checksum %g)\n", threads, LANES * 32, mul_add,
           checksum);
    return 0;
#endif
}
