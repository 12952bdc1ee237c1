// emu/threads.h: how the emulation runs a kernel (emu/cuda_emulation.h says what the emulation
// is): the blocks of a launch one after another, the threads of a block as fibers that stop at
// __syncthreads and in the warp functions until every thread they wait for is there, and the
// launch's checks.
#pragma once
#include <sys/mman.h>
#include <unistd.h>
#include <boost/context/fiber.hpp>
#include <cmath>
#include <cstring>
#include <string>
#include <tuple>
#include <type_traits>
#include <vector>
#include "emu/runtime.h"  // dim3, uint3, threadIdx ... gridDim, emu::report, emu::is_device_memory, emu::guards_intact

namespace emu {

// ----------------------------------------------------------------------------
// CUDA threads as fibers: stacks, the block being run, and waiting

constexpr size_t STACK_BYTES = 256 * 1024;

// Stacks for the fibers, each with an inaccessible page below it (an overflow faults instead of
// corrupting a neighbour), kept for reuse: a block needs at most one per thread.
struct StackPool {
    std::vector<char*> free;  // each: the guard page, then STACK_BYTES
    static size_t page() { return (size_t)sysconf(_SC_PAGESIZE); }
    char* take() {
        if (!free.empty()) {
            char* base = free.back();
            free.pop_back();
            return base;
        }
        void* base = mmap(nullptr, page() + STACK_BYTES, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
        if (base == MAP_FAILED) {
            perror("CUDA emulation: mmap of a fiber stack");
            abort();
        }
        mprotect(base, page(), PROT_NONE);
        return (char*)base;
    }
};

inline StackPool& stack_pool() {
    static StackPool pool;
    return pool;
}

// Boost.Context's StackAllocator over the pool
struct PooledStack {
    boost::context::stack_context allocate() {
        boost::context::stack_context sc;
        sc.size = STACK_BYTES;
        sc.sp = stack_pool().take() + StackPool::page() + STACK_BYTES;  // stacks grow down
        return sc;
    }
    void deallocate(boost::context::stack_context& sc) {
        stack_pool().free.push_back((char*)sc.sp - STACK_BYTES - StackPool::page());
    }
};

enum class Waiting { no, at_barrier, in_warp_function, exited };

struct CudaThread {
    uint3 index;
    Waiting waiting = Waiting::no;
    unsigned warp_mask = 0;         // the lanes a warp function waits for (existing lanes only)
    unsigned char offer[16] = {};   // the value this lane hands to a warp function
    bool started = false;
    boost::context::fiber fiber;    // the suspended thread
};

struct Block {
    std::vector<CudaThread> threads;  // in the order of their linear index
    int running = -1;
    boost::context::fiber scheduler;  // where the running thread goes when it waits or ends
    std::vector<unsigned char> dynamic_shared;
};

inline Block*& running_block() {
    static Block* block = nullptr;
    return block;
}

inline CudaThread& this_thread() {
    Block* b = running_block();
    if (!b) {
        fprintf(stderr, "CUDA emulation: a device function was called outside a kernel\n");
        abort();
    }
    return b->threads[b->running];
}

// The calling CUDA thread stops here until the scheduler lets it go on.
inline void wait(Waiting why, unsigned warp_mask = 0) {
    Block* b = running_block();
    CudaThread& t = this_thread();
    t.waiting = why;
    t.warp_mask = warp_mask;
    b->scheduler = std::move(b->scheduler).resume();
}

// The lanes of warp w that exist in block b (a last warp may be partial)
inline unsigned existing_lanes(const Block& b, size_t w) {
    size_t n = std::min<size_t>(warpSize, b.threads.size() - w * warpSize);
    return n == 32 ? 0xFFFFFFFFu : (1u << n) - 1;
}

// the warp of the running thread, and the lanes of it that a warp function's mask names and
// that exist: the lanes the function waits for
inline size_t this_warp() { return (size_t)running_block()->running / warpSize; }
inline unsigned lanes_waited_for(unsigned mask) { return mask & existing_lanes(*running_block(), this_warp()); }

// Lets go the lanes of every warp whose warp function every lane of its mask has reached.
// Returns whether any went on; sets *error for a warp function some lane of the mask can
// never reach.
inline bool release_warps(Block& b, std::string* error) {
    bool released = false;
    for (size_t w = 0; w * warpSize < b.threads.size(); w++) {
        CudaThread* lanes = &b.threads[w * warpSize];
        for (int l = 0; l < warpSize && w * warpSize + l < b.threads.size(); l++) {
            if (lanes[l].waiting != Waiting::in_warp_function) continue;
            const unsigned mask = lanes[l].warp_mask;
            if (!(mask >> l & 1)) {
                *error = "lane " + std::to_string(l) + " calls a warp function with a mask that leaves it out";
                return false;
            }
            bool all_there = true;
            for (int k = 0; k < warpSize; k++) {
                if (!(mask >> k & 1)) continue;
                if (lanes[k].waiting == Waiting::exited) {
                    *error = "lane " + std::to_string(k) + " of warp " + std::to_string(w) +
                             " has returned, but its warp function waits for it";
                    return false;
                }
                if (lanes[k].waiting == Waiting::in_warp_function && lanes[k].warp_mask != mask) {
                    *error = "the lanes of warp " + std::to_string(w) + " call a warp function with different masks";
                    return false;
                }
                all_there = all_there && lanes[k].waiting == Waiting::in_warp_function;
            }
            if (!all_there) continue;
            for (int k = 0; k < warpSize; k++)
                if (mask >> k & 1) lanes[k].waiting = Waiting::no;
            released = true;
        }
    }
    return released;
}

// Runs every CUDA thread of block b to its end. Returns "" or what went wrong.
template <typename Kernel, typename Args>
inline std::string run_block(Block& b, Kernel kernel, const Args& args) {
    running_block() = &b;
    for (;;) {
        for (size_t i = 0; i < b.threads.size(); i++) {
            CudaThread& t = b.threads[i];
            if (t.waiting != Waiting::no) continue;
            b.running = (int)i;
            threadIdx = t.index;
            if (!t.started) {
                t.started = true;
                t.fiber = boost::context::fiber(std::allocator_arg, PooledStack(),
                                                [&b, kernel, &args](boost::context::fiber&& scheduler) {
                                                    b.scheduler = std::move(scheduler);
                                                    std::apply(kernel, args);
                                                    b.threads[b.running].waiting = Waiting::exited;
                                                    return std::move(b.scheduler);
                                                });
            }
            t.fiber = std::move(t.fiber).resume();  // runs until it waits or returns
        }
        // every thread waits or has returned
        size_t exited = 0, at_barrier = 0;
        for (const CudaThread& t : b.threads) {
            exited += t.waiting == Waiting::exited;
            at_barrier += t.waiting == Waiting::at_barrier;
        }
        if (exited == b.threads.size()) break;
        std::string error;
        if (release_warps(b, &error)) continue;
        if (!error.empty()) return error;
        if (at_barrier + exited == b.threads.size()) {
            if (exited > 0)
                return std::to_string(exited) + " of its " + std::to_string(b.threads.size()) +
                       " threads returned while the others wait at __syncthreads (a barrier in divergent code)";
            for (CudaThread& t : b.threads) t.waiting = Waiting::no;
            continue;
        }
        return "threads wait at __syncthreads while lanes of their warps wait in a warp function: a deadlock";
    }
    running_block() = nullptr;
    return "";
}

// ----------------------------------------------------------------------------
// the launch

// the kernel's name, read off this function's signature ("... [with auto kernel = name]")
template <auto kernel>
inline std::string kernel_name() {
    std::string signature = __PRETTY_FUNCTION__;
    size_t start = signature.find("kernel = ");
    if (start == std::string::npos) return "a kernel";
    start += 9;
    return signature.substr(start, signature.find_first_of(";]", start) - start);
}

// Checks a launch and runs it: what a GPU would do with kernel<<<grid, block, shared_bytes>>>.
template <auto kernel, typename... Args>
inline void launch(dim3 grid, dim3 block, size_t shared_bytes, Args... args) {
    const std::string name = kernel_name<kernel>();
    const size_t threads = (size_t)block.x * block.y * block.z;
    if (block.x == 0 || block.y == 0 || block.z == 0 || grid.x == 0 || grid.y == 0 || grid.z == 0 ||
        block.x > 1024 || block.y > 1024 || block.z > 64 || threads > 1024 || grid.y > 65535 || grid.z > 65535) {
        report(cudaErrorInvalidConfiguration,
               name + ": grid (" + std::to_string(grid.x) + ", " + std::to_string(grid.y) + ", " +
                   std::to_string(grid.z) + "), block (" + std::to_string(block.x) + ", " + std::to_string(block.y) +
                   ", " + std::to_string(block.z) + "): every dim at least 1, at most 1024 threads a block");
        return;
    }
    if (shared_bytes > MAX_SHARED_BYTES) {
        report(cudaErrorInvalidValue, name + ": " + std::to_string(shared_bytes) +
                                          " bytes of dynamic shared memory, more than the 48 KB a launch may ask");
        return;
    }
    int position = 0;
    bool pointers_ok = true;
    auto check_pointer = [&](auto arg) {
        position++;
        if constexpr (std::is_pointer_v<decltype(arg)>) {
            if (arg != nullptr && !is_device_memory((const void*)arg)) {
                report(cudaErrorInvalidDevicePointer,
                       name + ": argument " + std::to_string(position) + " (" + hex((const void*)arg) +
                           ") is not device memory: a host pointer, or one past what cudaMalloc gave");
                pointers_ok = false;
            }
        }
    };
    (check_pointer(args), ...);
    if (!pointers_ok) return;

    gridDim = grid;
    blockDim = block;
    const auto call_args = std::make_tuple(args...);
    Block b;
    for (unsigned bz = 0; bz < grid.z; bz++)
        for (unsigned by = 0; by < grid.y; by++)
            for (unsigned bx = 0; bx < grid.x; bx++) {
                blockIdx = {bx, by, bz};
                b.threads.clear();
                b.threads.resize(threads);
                for (size_t i = 0; i < threads; i++)
                    b.threads[i].index = {(unsigned)(i % block.x), (unsigned)(i / block.x % block.y),
                                          (unsigned)(i / ((size_t)block.x * block.y))};
                b.dynamic_shared.assign(shared_bytes, POISON);
                std::string error = run_block(b, kernel, call_args);
                if (!error.empty()) {
                    b.threads.clear();  // unwinds the stacks of the threads still waiting
                    running_block() = nullptr;
                    report(cudaErrorLaunchFailure, name + ", block (" + std::to_string(bx) + ", " +
                                                       std::to_string(by) + ", " + std::to_string(bz) + "): " + error);
                    return;
                }
            }
    guards_intact(name);
}

inline void* dynamic_shared_memory() {
    if (!running_block()) return nullptr;
    return running_block()->dynamic_shared.data();
}

// The warp functions meet twice: every lane of the mask offers its value and waits for the
// others (meet); then each reads the offers it wants, and all meet again before any lane may
// offer anew.
inline void meet(unsigned mask) { wait(Waiting::in_warp_function, lanes_waited_for(mask)); }

template <typename T>
inline void offer(unsigned mask, T value) {
    static_assert(std::is_trivially_copyable_v<T> && sizeof(T) <= 16, "warp functions move values of 16 bytes or less");
    memcpy(this_thread().offer, &value, sizeof(T));
    meet(mask);
}

// lane l's offer, l within the calling thread's warp
template <typename T>
inline T offer_of(int lane) {
    T value;
    memcpy(&value, running_block()->threads[this_warp() * warpSize + lane].offer, sizeof(T));
    return value;
}

inline int this_lane() { return running_block()->running % warpSize; }

// a shuffle: offer, read the source lane's offer, meet again
template <typename T>
inline T shuffle(unsigned mask, T value, int source_lane) {
    offer(mask, value);
    T result = offer_of<T>(source_lane);
    meet(mask);
    return result;
}

}  // namespace emu

// ----------------------------------------------------------------------------
// what kernels call

inline void __syncthreads() { emu::wait(emu::Waiting::at_barrier); }

inline void __syncwarp(unsigned mask = 0xFFFFFFFFu) { emu::meet(mask); }

// width: the lanes form segments of `width` (a power of two up to 32); a source outside the
// caller's segment gives the caller its own value, as on a GPU
template <typename T>
inline T __shfl_sync(unsigned mask, T value, int src_lane, int width = warpSize) {
    const int lane = emu::this_lane(), start = lane / width * width;
    return emu::shuffle(mask, value, start + (src_lane % width + width) % width);
}

template <typename T>
inline T __shfl_down_sync(unsigned mask, T value, unsigned delta, int width = warpSize) {
    const int lane = emu::this_lane();
    return emu::shuffle(mask, value, lane % width + (int)delta < width ? lane + (int)delta : lane);
}

template <typename T>
inline T __shfl_up_sync(unsigned mask, T value, unsigned delta, int width = warpSize) {
    const int lane = emu::this_lane();
    return emu::shuffle(mask, value, lane % width >= (int)delta ? lane - (int)delta : lane);
}

template <typename T>
inline T __shfl_xor_sync(unsigned mask, T value, int lane_mask, int width = warpSize) {
    const int lane = emu::this_lane(), start = lane / width * width, source = lane ^ lane_mask;
    return emu::shuffle(mask, value, source >= start && source < start + width ? source : lane);
}

// bit k of the result: lane k's predicate, for the lanes of the mask (that exist)
inline unsigned __ballot_sync(unsigned mask, int predicate) {
    const unsigned lanes = emu::lanes_waited_for(mask);
    emu::offer(mask, predicate != 0);
    unsigned votes = 0;
    for (int k = 0; k < warpSize; k++)
        if ((lanes >> k & 1) && emu::offer_of<bool>(k)) votes |= 1u << k;
    emu::meet(mask);
    return votes;
}

inline int __any_sync(unsigned mask, int predicate) { return __ballot_sync(mask, predicate) != 0; }

inline int __all_sync(unsigned mask, int predicate) {
    return __ballot_sync(mask, predicate) == emu::lanes_waited_for(mask);
}

// CUDA declares float overloads of the math functions in the global namespace, so an
// unqualified exp(x) on a float is expf; libstdc++ keeps those overloads in std, where, without
// these, exp(x) would round through the double function and give other bits than the GPU build
using std::exp;
using std::fabs;
using std::log;
using std::log1p;
using std::pow;
using std::sqrt;
using std::tanh;

// the math intrinsics: the fast approximations are the exact functions here
inline float rsqrtf(float x) { return 1.0f / sqrtf(x); }
inline float __expf(float x) { return expf(x); }
inline float __logf(float x) { return logf(x); }
inline float __fdividef(float x, float y) { return x / y; }
