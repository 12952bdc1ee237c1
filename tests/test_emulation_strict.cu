// The CUDA emulation refuses what a GPU refuses (emu/device_memory.h, emu/streams.h,
// emu/memory_calls.h): the host cannot touch device memory, queued work runs only when the host
// waits, a pinned buffer refilled before its copy ran is reported, errors of queued work surface
// at the wait, and a capture keeps its records apart from the queue and refuses the legacy
// stream. And the program's lines where the GPU stops it: a kernel's fault (CUDA_LAUNCH_BLOCKING),
// an exception inside a captured pass (gpu/graph.cuh's CaptureScope). A host access and a CUDA
// error stop the program, so those cases run in a child process.
#include <signal.h>
#include <unistd.h>
#include <sstream>
#include "gpu/graph.cuh"     // GraphCache: a pass captured at its second use
#include "layers/errors.h"   // fail, InputError: the exception a captured pass throws
#include "test_util.h"

#ifndef MASKPRIOR_CUDA_EMULATION
#error "test_emulation_strict.cu tests the CUDA emulation: build it through tests/emulated_tests.cu"
#endif

namespace {

__global__ void fill_kernel(float* out, float value, int n) {
    const int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i < n) out[i] = value;
}

// out[i] = x[i] for i < n, and one float past the end (a planted off-by-one)
__global__ void overrun_kernel(float* out, const float* x, int n) {
    const int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i <= n) out[i] = i < n ? x[i] : 0.0f;
}

// a thread whose local array is twice its fiber's stack, written from its top down (as a stack
// grows), one float a KB, so that the writes reach the guard page below the stack
__global__ void deep_stack_kernel(float* out) {
    volatile float big[128 * 1024];
    for (int i = 128 * 1024 - 1; i >= 0; i -= 256) big[i] = (float)i;
    out[threadIdx.x] = big[0];
}

// What a child process that ran `body` left: how it ended and what it wrote to stderr
struct ChildEnd {
    int signal = 0;      // the signal that ended it, or 0
    int exit_code = -1;  // its exit code when no signal ended it
    std::string err;
};

ChildEnd in_child(const std::function<void()>& body) {
    fflush(stdout);
    fflush(stderr);
    int fds[2];
    REQUIRE(pipe(fds) == 0);
    const pid_t pid = fork();
    REQUIRE(pid >= 0);
    if (pid == 0) {
        dup2(fds[1], STDERR_FILENO);
        close(fds[0]);
        close(fds[1]);
        signal(SIGSEGV, SIG_DFL);  // doctest's handler reports the parent's test case: not the child's
        body();
        _exit(0);
    }
    close(fds[1]);
    ChildEnd end;
    char buf[4096];
    for (ssize_t n; (n = read(fds[0], buf, sizeof buf)) > 0;) end.err.append(buf, n);
    close(fds[0]);
    int status = 0;
    waitpid(pid, &status, 0);
    if (WIFSIGNALED(status)) end.signal = WTERMSIG(status);
    else end.exit_code = WEXITSTATUS(status);
    return end;
}

float* device_floats(size_t n) {
    float* p = nullptr;
    cudaCheck(cudaMalloc(&p, n * sizeof(float)));
    return p;
}

}  // namespace

TEST_CASE("emulation: the host cannot read or write device memory, and the line names the block") {
    const ChildEnd read = in_child([] {
        float* loss = device_floats(1);
        volatile float seen = *loss;  // the old model_read_loss
        (void)seen;
    });
    CHECK(read.signal == SIGSEGV);
    CHECK(read.err.find("CUDA emulation: the host read device memory at ") != std::string::npos);
    CHECK(read.err.find("byte 0 of the cudaMalloc block of 4 bytes") != std::string::npos);
    CHECK(read.err.find("test_emulation_strict.cu:") != std::string::npos);  // where it was allocated
    const ChildEnd write = in_child([] {
        float* weights = device_floats(16);
        weights[3] = 1.0f;  // a parameter set through its pointer
    });
    CHECK(write.signal == SIGSEGV);
    CHECK(write.err.find("the host wrote device memory") != std::string::npos);
    CHECK(write.err.find("byte 12 of the cudaMalloc block of 64 bytes") != std::string::npos);
    const ChildEnd stack = in_child([] {
        float* out = device_floats(1);
        emu::launch<deep_stack_kernel>(1, 1, 0, out);
    });
    CHECK(stack.signal == SIGSEGV);
    CHECK(stack.err.find("a CUDA thread overflowed its 256 KB stack") != std::string::npos);

    // what may touch it: a copy, a kernel, a memset, and the copy back
    std::vector<float> x = {1, 2, 3, 4}, back(4);
    float* p = device_floats(4);
    cudaCheck(cudaMemcpy(p, x.data(), 4 * sizeof(float), cudaMemcpyHostToDevice));
    launch_kernel<fill_kernel>(1, 32, 0, p, 5.0f, 2);
    cudaCheck(cudaMemsetAsync(p + 3, 0, sizeof(float), gpu_stream()));
    cudaCheck(cudaMemcpy(back.data(), p, 4 * sizeof(float), cudaMemcpyDeviceToHost));
    CHECK(back == std::vector<float>{5, 5, 3, 0});
    cudaCheck(cudaFree(p));
}

TEST_CASE("emulation: queued work runs when the host waits for it, and an event says when") {
    float* p = device_floats(1);
    float* pinned = nullptr;
    cudaCheck(cudaMallocHost((void**)&pinned, sizeof(float)));
    *pinned = 1.0f;
    cudaEvent_t done;
    cudaCheck(cudaEventCreate(&done));
    launch_kernel<fill_kernel>(1, 1, 0, p, 7.0f, 1);
    cudaCheck(cudaMemcpyAsync(pinned, p, sizeof(float), cudaMemcpyDeviceToHost, gpu_stream()));
    cudaCheck(cudaEventRecord(done, gpu_stream()));
    CHECK(std::isnan(*pinned));  // not written yet: the copy has not run
    CHECK(cudaEventQuery(done) == cudaErrorNotReady);  // once...
    CHECK(cudaEventQuery(done) == cudaSuccess);        // ...then the queue runs: a polling loop ends
    CHECK(*pinned == 7.0f);
    cudaCheck(cudaEventSynchronize(done));  // done already
    float elapsed = -1;
    cudaCheck(cudaEventRecord(done, gpu_stream()));
    CHECK(cudaEventElapsedTime(&elapsed, done, done) == cudaErrorNotReady);
    cudaCheck(cudaStreamSynchronize(gpu_stream()));
    cudaCheck(cudaEventElapsedTime(&elapsed, done, done));
    CHECK(elapsed == 0.0f);
    cudaCheck(cudaEventDestroy(done));
    cudaCheck(cudaFreeHost(pinned));
    cudaCheck(cudaFree(p));
}

TEST_CASE("emulation: a pinned source refilled before its copy ran is reported; a pageable one is read at the call") {
    std::vector<float> back(4);
    float* p = device_floats(4);
    float* pinned = nullptr;
    cudaCheck(cudaMallocHost((void**)&pinned, 4 * sizeof(float)));
    cudaGetLastError();
    // refilled at once: the copy sends the new bytes, and the wait says so
    std::fill(pinned, pinned + 4, 1.0f);
    cudaCheck(cudaMemcpyAsync(p, pinned, 4 * sizeof(float), cudaMemcpyHostToDevice, gpu_stream()));
    std::fill(pinned, pinned + 4, 2.0f);
    CHECK(cudaStreamSynchronize(gpu_stream()) == cudaErrorIllegalState);
    CHECK(cudaGetLastError() == cudaErrorIllegalState);
    cudaCheck(cudaMemcpy(back.data(), p, 4 * sizeof(float), cudaMemcpyDeviceToHost));
    CHECK(back == std::vector<float>(4, 2.0f));
    // refilled after waiting for the copy's event: nothing to say
    cudaEvent_t copied;
    cudaCheck(cudaEventCreate(&copied));
    cudaCheck(cudaMemcpyAsync(p, pinned, 4 * sizeof(float), cudaMemcpyHostToDevice, gpu_stream()));
    cudaCheck(cudaEventRecord(copied, gpu_stream()));
    cudaCheck(cudaEventSynchronize(copied));
    std::fill(pinned, pinned + 4, 3.0f);
    cudaCheck(cudaStreamSynchronize(gpu_stream()));
    // a pageable source is staged at the call: a later write changes nothing
    std::vector<float> pageable(4, 4.0f);
    cudaCheck(cudaMemcpyAsync(p, pageable.data(), 4 * sizeof(float), cudaMemcpyHostToDevice, gpu_stream()));
    pageable.assign(4, 5.0f);
    cudaCheck(cudaMemcpy(back.data(), p, 4 * sizeof(float), cudaMemcpyDeviceToHost));
    CHECK(back == std::vector<float>(4, 4.0f));
    cudaCheck(cudaEventDestroy(copied));
    cudaCheck(cudaFreeHost(pinned));
    cudaCheck(cudaFree(p));
}

TEST_CASE("emulation: an error found while queued work runs surfaces at the next wait") {
    std::vector<float> x(100, 1.0f);
    float* in = device_floats(100);
    float* out = device_floats(100);
    cudaCheck(cudaMemcpy(in, x.data(), 100 * sizeof(float), cudaMemcpyHostToDevice));
    cudaGetLastError();
    launch_kernel<overrun_kernel>(1, 128, 0, out, in, 100);  // the launch's own checks pass
    CHECK(cudaStreamSynchronize(gpu_stream()) == cudaErrorIllegalAddress);
    CHECK(cudaGetLastError() == cudaErrorIllegalAddress);
    cudaCheck(cudaStreamSynchronize(gpu_stream()));  // read: the next wait is clean
    cudaCheck(cudaFree(in));
    cudaCheck(cudaFree(out));
}

TEST_CASE("emulation: a kernel's fault stops the program at the next check with a line that names CUDA_LAUNCH_BLOCKING, "
          "and with CUDA_LAUNCH_BLOCKING=1 after the kernel's own launch, naming the kernel") {
    auto fault = [] {
        float* in = device_floats(100);
        float* out = device_floats(100);
        launch_kernel<overrun_kernel>(1, 128, 0, out, in, 100);  // the launch's own checks pass
        cudaCheck(cudaStreamSynchronize(gpu_stream()));           // the next check: this file's line
    };
    auto last_line = [](const std::string& err) {  // the program's, after the emulation's report of the write
        std::istringstream text(err);
        std::string line, last;
        while (std::getline(text, line)) last = line.empty() ? last : line;
        return last;
    };
    const ChildEnd later = in_child([&] {
        unsetenv("CUDA_LAUNCH_BLOCKING");
        fault();
    });
    CHECK(later.exit_code == 1);
    const std::string at_check = last_line(later.err);
    CHECK(at_check.rfind(std::string("maskprior: CUDA error at ") + __FILE__ + ":", 0) == 0);
    CHECK(at_check.find(": an illegal memory access was encountered (a kernel's fault is reported at the next check, "
                        "which may be a later call's: CUDA_LAUNCH_BLOCKING=1 runs it again with the fault reported at "
                        "its launch)") != std::string::npos);
    const ChildEnd at_launch = in_child([&] {
        setenv("CUDA_LAUNCH_BLOCKING", "1", 1);
        fault();
    });
    CHECK(at_launch.exit_code == 1);
    const std::string line = last_line(at_launch.err);
    CHECK(line.rfind("maskprior: CUDA error after the launch of ", 0) == 0);
    CHECK(line.find("overrun_kernel: an illegal memory access was encountered (CUDA_LAUNCH_BLOCKING=1: each launch "
                    "waited for its kernel, so a kernel's fault is reported after its own launch)") != std::string::npos);
}

TEST_CASE("emulation: an exception thrown inside a captured pass ends the capture, so the frees that run as it unwinds "
          "succeed and the program prints the exception's own line") {
    const ChildEnd end = in_child([] {
        try {
            float* buffer = device_floats(4);
            struct FreedOnUnwind {  // as ModelOwner frees the model while an exception unwinds
                float* p;
                ~FreedOnUnwind() { cudaCheck(cudaFree(p)); }
            } freed{buffer};
            GraphCache graphs;
            for (int use = 0; use < 2; use++)  // the first use runs call by call, the second is captured
                graphs.run("pass", [&] {
                    launch_kernel<fill_kernel>(1, 4, 0, buffer, 1.0f, 4);
                    if (use == 1) fail("the real error, thrown inside the capture");
                });
        } catch (const InputError& e) {  // as main() reports it
            fprintf(stderr, "maskprior: error: %s\n", e.what());
            _exit(2);
        }
    });
    CHECK(end.exit_code == 2);
    CHECK(end.err == "maskprior: error: the real error, thrown inside the capture\n");
}

TEST_CASE("emulation: a capture keeps its records apart from the queue, and work on the legacy stream invalidates it") {
    float* p = device_floats(2);
    std::vector<float> back(2);
    cudaGetLastError();
    launch_kernel<fill_kernel>(1, 2, 0, p, 1.0f, 2);  // queued before the capture: still runs
    cudaCheck(cudaStreamBeginCapture(gpu_stream(), cudaStreamCaptureModeGlobal));
    launch_kernel<fill_kernel>(1, 1, 0, p, 2.0f, 1);  // recorded, not queued
    cudaGraph_t graph;
    cudaCheck(cudaStreamEndCapture(gpu_stream(), &graph));
    cudaCheck(cudaMemcpy(back.data(), p, 2 * sizeof(float), cudaMemcpyDeviceToHost));
    CHECK(back == std::vector<float>{1, 1});
    cudaGraphExec_t exec;
    cudaCheck(cudaGraphInstantiate(&exec, graph, 0));
    cudaCheck(cudaGraphLaunch(exec, gpu_stream()));
    cudaCheck(cudaMemcpy(back.data(), p, 2 * sizeof(float), cudaMemcpyDeviceToHost));
    CHECK(back == std::vector<float>{2, 1});
    cudaCheck(cudaGraphExecDestroy(exec));
    cudaCheck(cudaGraphDestroy(graph));

    // a memset on the legacy default stream would wait for the capturing stream
    cudaCheck(cudaStreamBeginCapture(gpu_stream(), cudaStreamCaptureModeGlobal));
    CHECK(cudaMemsetAsync(p, 0, sizeof(float), nullptr) == cudaErrorStreamCaptureImplicit);
    CHECK(cudaStreamEndCapture(gpu_stream(), &graph) == cudaErrorStreamCaptureInvalidated);
    cudaCheck(cudaStreamBeginCapture(gpu_stream(), cudaStreamCaptureModeGlobal));
    CHECK(cudaMemset(p, 0, sizeof(float)) == cudaErrorStreamCaptureUnsupported);
    CHECK(cudaStreamEndCapture(gpu_stream(), &graph) == cudaErrorStreamCaptureInvalidated);
    cudaGetLastError();
    cudaCheck(cudaFree(p));
}
