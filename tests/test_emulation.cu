// The CUDA emulation itself (emu/): that it runs what a GPU runs, with CUDA's meaning
// (barriers, shared memory per block, warp functions, cuBLAS's column-major products), that its
// schedules change what a racy kernel sees and no bit of a correct one, and that it reports the
// bugs of CUDA written without a GPU. The last cases plant four such bugs
// and check that each is caught; tests/planted_bugs.sh plants them in the program's own
// kernels and checks that the GPU tests fail.
#include <numeric>
#include "test_util.h"
#include "gpu_test_util.h"  // GpuBuffer, expect_close, REDUCTION
#include "layers/matmul.cuh"  // matmul_forward_cpu: the reference of a planted transposed operand

#ifndef MASKPRIOR_CUDA_EMULATION
#error "test_emulation.cu tests the CUDA emulation: build it through tests/emulated_tests.cu"
#endif

// ----------------------------------------------------------------------------
// kernels written for these tests

// Each block sums its blockDim.x entries of x (zeros past n) into sums[blockIdx.x], by a tree
// in shared memory: half the threads add the other half's partial sums, then half of those...
// with_first_barrier = false plants a bug: the tree starts before every thread has written its
// entry.
template <bool with_first_barrier>
__global__ void block_sum_kernel(float* sums, const float* x, int n) {
    __shared__ float partial[256];
    const int i = blockIdx.x * blockDim.x + threadIdx.x;
    partial[threadIdx.x] = i < n ? x[i] : 0.0f;
    if (with_first_barrier) __syncthreads();
    for (int stride = blockDim.x / 2; stride > 0; stride /= 2) {
        if ((int)threadIdx.x < stride) partial[threadIdx.x] += partial[threadIdx.x + stride];
        __syncthreads();
    }
    if (threadIdx.x == 0) sums[blockIdx.x] = partial[0];
}

// Each warp sums its 32 values with shuffles, lane 0 writing the warp's sum.
__global__ void warp_sum_kernel(float* sums, const float* x) {
    const int i = blockIdx.x * blockDim.x + threadIdx.x;
    float v = x[i];
    for (int offset = warpSize / 2; offset > 0; offset /= 2) v += __shfl_down_sync(0xFFFFFFFFu, v, offset);
    if (threadIdx.x % warpSize == 0) sums[i / warpSize] = v;
}

// Every lane gets the sum of its warp by a butterfly of xor shuffles.
__global__ void butterfly_kernel(float* out, const float* x) {
    float v = x[threadIdx.x];
    for (int mask = warpSize / 2; mask > 0; mask /= 2) v += __shfl_xor_sync(0xFFFFFFFFu, v, mask);
    out[threadIdx.x] = v;
}

// votes[w]: the ballot of warp w on "my value is positive"; any and all alike
__global__ void vote_kernel(unsigned* votes, int* any, int* all, const float* x) {
    const int lane = threadIdx.x % warpSize, warp = threadIdx.x / warpSize;
    unsigned ballot = __ballot_sync(0xFFFFFFFFu, x[threadIdx.x] > 0);
    int some = __any_sync(0xFFFFFFFFu, x[threadIdx.x] > 0), every = __all_sync(0xFFFFFFFFu, x[threadIdx.x] > 0);
    if (lane == 0) {
        votes[warp] = ballot;
        any[warp] = some;
        all[warp] = every;
    }
}

// Each block writes its index into its dynamic shared memory, waits, and reads it back.
__global__ void dynamic_shared_kernel(float* out) {
    DYNAMIC_SHARED(float, scratch);
    scratch[threadIdx.x] = (float)blockIdx.x;
    __syncthreads();
    out[blockIdx.x * blockDim.x + threadIdx.x] = scratch[blockDim.x - 1 - threadIdx.x];
}

// out[i] = x[i] for i < n; with_off_by_one plants the bug `i <= n`
template <bool with_off_by_one>
__global__ void copy_kernel(float* out, const float* x, int n) {
    const int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (with_off_by_one ? i <= n : i < n) out[i] = i < n ? x[i] : 0.0f;
}

// Threads past n return before a barrier the others wait at: a deadlock on a GPU.
__global__ void divergent_barrier_kernel(float* out, int n) {
    const int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i >= n) return;
    out[i] = 1.0f;
    __syncthreads();
}

__global__ void read_kernel(float* out, const float* x) { out[threadIdx.x] = x[threadIdx.x]; }

// A race: each thread writes its index into its slot of dynamic shared memory (NaN before) and
// reads its left (or right) neighbour's slot with no barrier between; the first (last) thread
// reads its own.
template <bool left>
__global__ void neighbour_read_kernel(float* out) {
    DYNAMIC_SHARED(float, slots);
    const int t = threadIdx.x, last = blockDim.x - 1;
    slots[t] = (float)t;
    out[t] = slots[left ? std::max(t - 1, 0) : std::min(t + 1, last)];
}

// ----------------------------------------------------------------------------

static std::vector<float> host_block_sums(const std::vector<float>& x, int block) {
    std::vector<float> sums((x.size() + block - 1) / block, 0.0f);
    for (size_t i = 0; i < x.size(); i++) sums[i / block] += x[i];
    return sums;
}

// |got - want| <= 1e-4 + 1e-3 |want|, as expect_close checks reductions (NaN is not within)
static bool within_reduction_tolerance(float got, float want) {
    return std::fabs(got - want) <= REDUCTION + 1e-3 * std::fabs(want);
}

// the schedule in force while it lives; the one before it after
struct ScheduleScope {
    emu::Schedule saved = emu::schedule();
    explicit ScheduleScope(emu::Schedule s) { emu::schedule() = s; }
    ~ScheduleScope() { emu::schedule() = saved; }
};

static const emu::Schedule INDEX{emu::Order::index, 0}, REVERSE{emu::Order::reverse, 0};
static const emu::Schedule SHUFFLE_1{emu::Order::shuffle, 1}, SHUFFLE_2{emu::Order::shuffle, 2};

// what cudaGetLastError says after `launch`, from a clean start
static cudaError_t error_after(const std::function<void()>& launch) {
    cudaGetLastError();  // start clean
    launch();
    return cudaGetLastError();
}

TEST_CASE("emulation: __syncthreads is a barrier, and each block has its own shared memory") {
    for (int n : {1000, 256, 37}) {
        CAPTURE(n);
        Rng rng(n);
        std::vector<float> x = random_vector<float>(n, rng);
        const int blocks = ceil_div(n, 256);
        std::vector<float> sums(blocks);
        GpuBuffer g_x(x), g_sums(sums);
        launch_kernel<block_sum_kernel<true>>(blocks, 256, 0, g_sums.ptr, g_x.ptr, n);
        expect_close("block sums", g_sums.get(), host_block_sums(x, 256), REDUCTION);
    }
    std::vector<float> out(4 * 64);
    GpuBuffer g_out(out);
    launch_kernel<dynamic_shared_kernel>(4, 64, 64 * sizeof(float), g_out.ptr);
    std::vector<float> got = g_out.get();
    for (size_t i = 0; i < got.size(); i++) CHECK(got[i] == (float)(i / 64));
}

TEST_CASE("emulation: warp shuffles, ballots and votes exchange values among a warp's lanes") {
    Rng rng(7);
    std::vector<float> x = random_vector<float>(128, rng);
    std::vector<float> sums(4), butterfly(64);
    GpuBuffer g_x(x), g_sums(sums), g_butterfly(butterfly);
    launch_kernel<warp_sum_kernel>(2, 64, 0, g_sums.ptr, g_x.ptr);
    expect_close("warp sums", g_sums.get(), host_block_sums(x, 32), REDUCTION);
    launch_kernel<butterfly_kernel>(1, 64, 0, g_butterfly.ptr, g_x.ptr);
    std::vector<float> lanes = g_butterfly.get();
    std::vector<float> warp_sums = host_block_sums(std::vector<float>(x.begin(), x.begin() + 64), 32);
    for (int i = 0; i < 64; i++) CHECK(lanes[i] == doctest::Approx(warp_sums[i / 32]).epsilon(1e-5));

    std::vector<float> signs(64, -1.0f);
    signs[3] = signs[40] = 1.0f;
    for (int i = 32; i < 64; i++) signs[i] = i == 40 ? 1.0f : -1.0f;
    unsigned* g_votes = nullptr;
    int *g_any = nullptr, *g_all = nullptr;
    cudaCheck(cudaMalloc(&g_votes, 2 * sizeof(unsigned)));
    cudaCheck(cudaMalloc(&g_any, 2 * sizeof(int)));
    cudaCheck(cudaMalloc(&g_all, 2 * sizeof(int)));
    GpuBuffer g_signs(signs);
    launch_kernel<vote_kernel>(1, 64, 0, g_votes, g_any, g_all, g_signs.ptr);
    unsigned votes[2];
    int any[2], all[2];
    cudaCheck(cudaMemcpy(votes, g_votes, sizeof votes, cudaMemcpyDeviceToHost));
    cudaCheck(cudaMemcpy(any, g_any, sizeof any, cudaMemcpyDeviceToHost));
    cudaCheck(cudaMemcpy(all, g_all, sizeof all, cudaMemcpyDeviceToHost));
    CHECK(votes[0] == 1u << 3);
    CHECK(votes[1] == 1u << 8);
    CHECK(any[0] == 1);
    CHECK(all[0] == 0);
    for (void* p : {(void*)g_votes, (void*)g_any, (void*)g_all}) cudaCheck(cudaFree(p));
}

TEST_CASE("emulation: cuBLAS's column-major products, checked against row-major loops written here") {
    // C (m,n) = alpha op(A) op(B) + beta C, column-major with padded leading dimensions
    const int m = 5, n = 7, k = 3, pad = 2;
    Rng rng(11);
    for (cublasOperation_t ta : {CUBLAS_OP_N, CUBLAS_OP_T})
        for (cublasOperation_t tb : {CUBLAS_OP_N, CUBLAS_OP_T}) {
            CAPTURE(ta); CAPTURE(tb);
            const int a_rows = ta == CUBLAS_OP_N ? m : k, a_cols = ta == CUBLAS_OP_N ? k : m;
            const int b_rows = tb == CUBLAS_OP_N ? k : n, b_cols = tb == CUBLAS_OP_N ? n : k;
            const int lda = a_rows + pad, ldb = b_rows + pad, ldc = m + pad;
            std::vector<float> A = random_vector<float>((size_t)lda * a_cols, rng);
            std::vector<float> B = random_vector<float>((size_t)ldb * b_cols, rng);
            std::vector<float> C = random_vector<float>((size_t)ldc * n, rng);
            GpuBuffer g_A(A), g_B(B), g_C(C);
            const float alpha = 0.5f, beta = -2.0f;
            cublasCheck(cublasSgemm(cublas_handle(false), ta, tb, m, n, k, &alpha, g_A.ptr, lda, g_B.ptr, ldb, &beta,
                                    g_C.ptr, ldc));
            std::vector<float> want = C, got = g_C.get();
            for (int i = 0; i < m; i++)
                for (int j = 0; j < n; j++) {
                    double sum = 0;
                    for (int p = 0; p < k; p++) {
                        double a = ta == CUBLAS_OP_N ? A[i + p * lda] : A[p + i * lda];
                        double b = tb == CUBLAS_OP_N ? B[p + j * ldb] : B[j + p * ldb];
                        sum += a * b;
                    }
                    want[i + j * ldc] = (float)(alpha * sum + beta * C[i + j * ldc]);
                }
            expect_close("gemm", got, want, REDUCTION);  // the padding rows stay as they were
        }
    // a leading dimension below the rows it holds is refused, and a host operand too
    std::vector<float> small(16, 1.0f);
    GpuBuffer g_small(small);
    const float one = 1.0f, zero = 0.0f;
    CHECK(cublasSgemm(cublas_handle(false), CUBLAS_OP_N, CUBLAS_OP_N, 4, 4, 4, &one, g_small.ptr, 3, g_small.ptr, 4,
                      &zero, g_small.ptr, 4) == CUBLAS_STATUS_INVALID_VALUE);
    CHECK(cublasSgemm(cublas_handle(false), CUBLAS_OP_N, CUBLAS_OP_N, 4, 4, 4, &one, small.data(), 4, g_small.ptr, 4,
                      &zero, g_small.ptr, 4) == CUBLAS_STATUS_EXECUTION_FAILED);
}

TEST_CASE("emulation: launches, copies and frees that a GPU would refuse are refused") {
    std::vector<float> x(64, 1.0f);
    GpuBuffer g_x(x), g_out(x);
    CHECK(error_after([&] { emu::launch<read_kernel>(1, 2048, 0, g_out.ptr, g_x.ptr); }) ==
          cudaErrorInvalidConfiguration);
    CHECK(error_after([&] { emu::launch<read_kernel>(0, 64, 0, g_out.ptr, g_x.ptr); }) ==
          cudaErrorInvalidConfiguration);
    CHECK(error_after([&] { emu::launch<dynamic_shared_kernel>(1, 64, 64 * 1024, g_out.ptr); }) ==
          cudaErrorInvalidValue);
    std::vector<float> host(64);
    CHECK(cudaMemcpy(g_out.ptr, host.data(), 64 * sizeof(float), cudaMemcpyDeviceToHost) == cudaErrorInvalidValue);
    CHECK(cudaMemcpy(host.data(), g_x.ptr, 65 * sizeof(float), cudaMemcpyDeviceToHost) == cudaErrorInvalidValue);
    CHECK(cudaMemcpy(host.data(), g_x.ptr, 64 * sizeof(float), cudaMemcpyDeviceToHost) == cudaSuccess);
    CHECK(cudaMemset(host.data(), 0, 16) == cudaErrorInvalidValue);
    CHECK(cudaFree(host.data()) == cudaErrorInvalidDevicePointer);
    float* fresh = nullptr;
    cudaCheck(cudaMalloc(&fresh, 4 * sizeof(float)));
    float never_written[4];
    cudaCheck(cudaMemcpy(never_written, fresh, sizeof never_written, cudaMemcpyDeviceToHost));
    for (float v : never_written) CHECK(std::isnan(v));  // fresh device memory reads as NaN
    cudaCheck(cudaFree(fresh));
    // a barrier that the threads past n never reach
    CHECK(error_after([&] { emu::launch<divergent_barrier_kernel>(1, 64, 0, g_out.ptr, 40); }) ==
          cudaErrorLaunchFailure);
    cudaGetLastError();
}

TEST_CASE("emulation: MASKPRIOR_EMU_SCHEDULE is index, reverse or shuffle:SEED, and nothing else") {
    emu::Schedule s;
    CHECK((emu::parse_schedule("index", &s) && s.order == emu::Order::index));
    CHECK((emu::parse_schedule("reverse", &s) && s.order == emu::Order::reverse));
    CHECK((emu::parse_schedule("shuffle:42", &s) && s.order == emu::Order::shuffle && s.seed == 42));
    for (const char* bad : {"", "Index", "random", "shuffle", "shuffle:", "shuffle:-1", "shuffle:1x", "shuffle: 1",
                            "shuffle:99999999999999999999"}) {
        CAPTURE(bad);
        CHECK_FALSE(emu::parse_schedule(bad, &s));
    }
}

TEST_CASE("emulation: the schedule changes what a racy kernel sees, and no bit of what correct kernels compute") {
    const int n = 64;
    // how many threads read their neighbour's index (the others read NaN: the slot unwritten)
    auto neighbours_seen = [&](bool left, emu::Schedule schedule, std::vector<float>* seen = nullptr) {
        ScheduleScope scope(schedule);
        std::vector<float> out(n);
        GpuBuffer g_out(out);
        if (left) launch_kernel<neighbour_read_kernel<true>>(1, n, n * sizeof(float), g_out.ptr);
        else launch_kernel<neighbour_read_kernel<false>>(1, n, n * sizeof(float), g_out.ptr);
        out = g_out.get();
        if (seen) *seen = out;
        int count = 0;
        for (int t = 0; t < n; t++) count += out[t] == (float)(left ? std::max(t - 1, 0) : std::min(t + 1, n - 1));
        return count;
    };
    CHECK(neighbours_seen(true, INDEX) == n);  // index order hides a read of a lower thread's write
    CHECK(neighbours_seen(true, REVERSE) == 1);
    CHECK(neighbours_seen(false, INDEX) == 1);
    CHECK(neighbours_seen(false, REVERSE) == n);  // and reverse a read of a higher one's
    for (bool left : {true, false}) {
        CAPTURE(left);
        const int shuffled = neighbours_seen(left, SHUFFLE_1);
        CHECK(shuffled > 1);
        CHECK(shuffled < n);
        std::vector<float> first, again, other;
        neighbours_seen(left, SHUFFLE_1, &first);
        neighbours_seen(left, SHUFFLE_1, &again);
        neighbours_seen(left, SHUFFLE_2, &other);
        CHECK(memcmp(first.data(), again.data(), n * sizeof(float)) == 0);  // a seed gives one order
        CHECK(memcmp(first.data(), other.data(), n * sizeof(float)) != 0);
    }

    // the correct kernels of the cases above: every output's bits, under each schedule
    Rng rng(5);
    std::vector<float> x = random_vector<float>(1000, rng);
    for (int i = 0; i < 64; i++) x[i] = i % 3 == 0 ? -x[i] : x[i];  // both signs for the votes
    GpuBuffer g_x(x);
    auto outputs = [&](emu::Schedule schedule) {
        ScheduleScope scope(schedule);
        std::vector<float> sums(4), warp_sums(4), lanes(64), scratch(4 * 64), votes(3 * 2);
        GpuBuffer g_sums(sums), g_warp_sums(warp_sums), g_lanes(lanes), g_scratch(scratch), g_votes(votes);
        launch_kernel<block_sum_kernel<true>>(4, 256, 0, g_sums.ptr, g_x.ptr, 1000);
        launch_kernel<warp_sum_kernel>(2, 64, 0, g_warp_sums.ptr, g_x.ptr);
        launch_kernel<butterfly_kernel>(1, 64, 0, g_lanes.ptr, g_x.ptr);
        launch_kernel<dynamic_shared_kernel>(4, 64, 64 * sizeof(float), g_scratch.ptr);
        launch_kernel<vote_kernel>(1, 64, 0, (unsigned*)g_votes.ptr, (int*)g_votes.ptr + 2, (int*)g_votes.ptr + 4,
                                   g_x.ptr);
        std::vector<float> all;
        for (GpuBuffer* g : {&g_sums, &g_warp_sums, &g_lanes, &g_scratch, &g_votes}) {
            std::vector<float> part = g->get();
            all.insert(all.end(), part.begin(), part.end());
        }
        return all;
    };
    const std::vector<float> want = outputs(INDEX);
    for (emu::Schedule schedule : {REVERSE, SHUFFLE_1, SHUFFLE_2}) {
        std::vector<float> got = outputs(schedule);
        CHECK(memcmp(got.data(), want.data(), want.size() * sizeof(float)) == 0);
    }
}

// ----------------------------------------------------------------------------
// four planted bugs, each of which the emulation must catch

// Without its first barrier thread t reads the partial of thread t + 128 before that one has
// written it when t runs first: in index order and in a shuffle; reverse order hides it.
TEST_CASE("planted bug: a missing __syncthreads in a block reduction gives wrong sums") {
    Rng rng(3);
    std::vector<float> x = random_vector<float>(1024, rng);
    GpuBuffer g_x(x);
    for (emu::Schedule schedule : {INDEX, SHUFFLE_1}) {
        CAPTURE(schedule.order);
        ScheduleScope scope(schedule);
        std::vector<float> sums(4);
        GpuBuffer g_sums(sums);
        launch_kernel<block_sum_kernel<false>>(4, 256, 0, g_sums.ptr, g_x.ptr, 1024);
        std::vector<float> got = g_sums.get(), want = host_block_sums(x, 256);
        bool all_right = true;
        for (int b = 0; b < 4; b++) all_right = all_right && within_reduction_tolerance(got[b], want[b]);
        CHECK_MESSAGE(!all_right, "the reduction without its first barrier gave the right sums: the race went unseen");
    }
}

TEST_CASE("planted bug: an off-by-one index writes past the buffer, and the launch fails") {
    std::vector<float> x(100, 1.0f), out(100);
    GpuBuffer g_x(x), g_out(out);
    CHECK(error_after([&] { emu::launch<copy_kernel<false>>(1, 128, 0, g_out.ptr, g_x.ptr, 100); }) == cudaSuccess);
    CHECK(error_after([&] { emu::launch<copy_kernel<true>>(1, 128, 0, g_out.ptr, g_x.ptr, 100); }) ==
          cudaErrorIllegalAddress);
}

TEST_CASE("planted bug: a host pointer handed to a kernel fails the launch, which does not run") {
    std::vector<float> host(64, 2.0f), out(64, 0.0f);
    GpuBuffer g_out(out);
    CHECK(error_after([&] { emu::launch<read_kernel>(1, 64, 0, g_out.ptr, host.data()); }) ==
          cudaErrorInvalidDevicePointer);
    for (float v : g_out.get()) CHECK(v == 0.0f);
    // a pointer into the middle of a cudaMalloc block is device memory, and null is allowed
    CHECK(error_after([&] { emu::launch<read_kernel>(1, 32, 0, g_out.ptr, g_out.ptr + 32); }) == cudaSuccess);
    CHECK(error_after([&] { emu::launch<copy_kernel<false>>(1, 32, 0, g_out.ptr, (const float*)nullptr, 0); }) ==
          cudaSuccess);
}

TEST_CASE("planted bug: a transposed cuBLAS operand gives a wrong matmul") {
    // the forward matmul of layers/matmul.cuh with the weight passed as it is (OP_N) instead
    // of transposed: it must not match the CPU loop
    const int N = 6, C = 4, OC = 5;
    Rng rng(9);
    std::vector<float> inp = random_vector<float>(N * C, rng), weight = random_vector<float>(OC * C, rng);
    std::vector<float> want(N * OC), got(N * OC);
    matmul_forward_cpu(want.data(), inp.data(), weight.data(), (const float*)nullptr, N, C, OC);
    GpuBuffer g_inp(inp), g_weight(weight), g_out(got);
    const float one = 1.0f, zero = 0.0f;
    cublasStatus_t status = cublasSgemm(cublas_handle(false), CUBLAS_OP_N, CUBLAS_OP_N, OC, N, C, &one, g_weight.ptr, C,
                                        g_inp.ptr, C, &zero, g_out.ptr, OC);
    got = g_out.get();
    bool matches = status == CUBLAS_STATUS_SUCCESS;
    for (int i = 0; i < N * OC && matches; i++) matches = within_reduction_tolerance(got[i], want[i]);
    CHECK_MESSAGE(!matches, "a transposed operand went unnoticed");
}
