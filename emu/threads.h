// emu/threads.h: how the emulation runs a kernel (emu/cuda_emulation.h says what the emulation
// is): the blocks of a launch one after another, the threads of a block as fibers that stop at
// __syncthreads and in the warp functions until every thread they wait for is there, in the
// order the schedule gives (MASKPRIOR_EMU_SCHEDULE), and the launch's checks.
#pragma once
#include <sys/mman.h>
#include <unistd.h>
#include <boost/context/detail/fcontext.hpp>
#include <algorithm>
#include <cstdint>
#include <numeric>
#include <string>
#include <tuple>
#include <type_traits>
#include <vector>
#include "emu/device_memory.h"  // is_device_memory, guards_intact, ArenaOpen, fiber_stacks, POISON
#include "emu/runtime.h"        // dim3, uint3, threadIdx ... gridDim, emu::report
#include "emu/schedule.h"       // schedule, Order, ShuffleRng: the order of a block's threads
#include "emu/streams.h"        // stream_work, run_queue: a launch is queued on its stream
#if defined(__SANITIZE_THREAD__)
#include <pthread.h>  // pthread_atfork: the child forgets the parent's contexts
#include <sanitizer/tsan_interface.h>
#endif

namespace emu {

// ----------------------------------------------------------------------------
// CUDA threads as fibers: stacks, the block being run, and waiting

constexpr size_t STACK_BYTES = 256 * 1024;

// Stacks for the fibers, each with an inaccessible page below it (an overflow faults instead of
// corrupting a neighbour, and the fault handler of emu/device_memory.h names it), kept for reuse:
// a block needs at most one per thread.
struct StackPool {
    std::vector<char*> free;  // each: the guard page, then STACK_BYTES
    static size_t page() {
        static const size_t bytes = (size_t)sysconf(_SC_PAGESIZE);  // asked once: every block's threads take stacks
        return bytes;
    }
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
        fiber_stacks().bases.push_back((char*)base);
        fiber_stacks().stack_bytes = STACK_BYTES;
        return (char*)base;
    }
    // a stack given back to the system (its thread never returned)
    static void unmap(char* base) {
        std::vector<char*>& bases = fiber_stacks().bases;
        bases.erase(std::remove(bases.begin(), bases.end(), base), bases.end());
        munmap(base, page() + STACK_BYTES);
    }
};

inline StackPool& stack_pool() {
    static StackPool pool;
    return pool;
}

// ----------------------------------------------------------------------------
// the block's threads

enum class Waiting { no, at_barrier, in_warp_function, exited };

namespace fc = boost::context::detail;  // Boost.Context's fcontext: make_fcontext, jump_fcontext

struct CudaThread {
    uint3 index;
    Waiting waiting = Waiting::no;
    unsigned warp_mask = 0;             // the lanes a warp function waits for (existing lanes only)
    unsigned char offer[2][16] = {};    // the values this lane hands to warp functions, in turn
    int offer_slot = 0;                 // the slot of its latest offer
    int met_slot = 0;                   // the slot of its offer at its last meet that let it go
    char* stack = nullptr;              // from the pool, once started
    fc::fcontext_t context = nullptr;   // where it stopped: it goes on from there
#if defined(__SANITIZE_THREAD__)
    void* tsan_fiber = nullptr;         // ThreadSanitizer's context for this thread
    int meets = 0;                      // the warp functions' meets it has reached
    int arrived_into = 0, met_in = 0;   // meet_sync's slot at its last arrival; at its last meet
    char meet_sync[2];                  // addresses it releases into as it reaches a meet, in turn
#endif
};

struct Block {
    std::vector<CudaThread> threads;  // in the order of their linear index
    std::vector<int> order;           // the pass's order: indices into threads
    size_t place = 0;                 // the running thread's place in it
    uint64_t linear_index = 0;        // the block's, in the grid
    int running = -1;
    int left = -1;                    // the thread a jump left (-1: the scheduler), for the one it lands in
    fc::fcontext_t scheduler = nullptr;     // where the scheduler stopped: the pass's last thread goes there
    void (*thread_start)(fc::transfer_t) = nullptr;  // a fiber's first function: the kernel's thread_main
    const void* call = nullptr;       // the kernel and its arguments
    std::vector<unsigned char> dynamic_shared;
#if defined(__SANITIZE_THREAD__)
    void* tsan_scheduler = nullptr;   // ThreadSanitizer's context of the launching thread
    int barriers = 0;                 // the __syncthreads the block has passed
    char barrier_sync[2], end_sync;   // addresses: of the barriers in turn; of the block's end
#endif
};

// ----------------------------------------------------------------------------
// ThreadSanitizer (a build with -fsanitize=thread): each CUDA thread is a fiber of its own, named
// after its index. Going from the scheduler to a thread synchronises (the launch's setup and the
// built-in variables happen before the thread's work); going back does not, so nothing orders two
// threads of a block but a barrier or a warp function: a thread releases as it reaches one and
// acquires, as it leaves, what every thread it met released. The scheduler's own code
// (EMU_SCHEDULER) is not instrumented: it reads what the threads write about their waiting without
// taking in their work. A thread also releases at every stop into what the scheduler acquires
// when the block ends: blocks are ordered one after another (races between blocks are not seen).
#if defined(__SANITIZE_THREAD__)
#define EMU_SCHEDULER __attribute__((no_sanitize("thread")))
#else
#define EMU_SCHEDULER
#endif

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

// What a thread tells ThreadSanitizer as it stops (at a barrier, in a warp function, at its end)
// and as it goes on. Stopping, it releases into what the barrier (or its own slot of the meet)
// and the block's end acquire: the latter after its last access to memory before the switch.
inline void tell_stop([[maybe_unused]] Block& b, [[maybe_unused]] CudaThread& t, [[maybe_unused]] Waiting why,
                      [[maybe_unused]] int barrier_slot) {
#if defined(__SANITIZE_THREAD__)
    if (why == Waiting::at_barrier) __tsan_release(&b.barrier_sync[barrier_slot]);
    if (why == Waiting::in_warp_function) {
        t.arrived_into = t.meets++ % 2;
        __tsan_release(&t.meet_sync[t.arrived_into]);
    }
    __tsan_release(&b.end_sync);
#endif
}

inline void tell_going_on([[maybe_unused]] Block& b, [[maybe_unused]] CudaThread& t, [[maybe_unused]] Waiting why,
                          [[maybe_unused]] int barrier_slot) {
#if defined(__SANITIZE_THREAD__)
    if (why == Waiting::at_barrier) __tsan_acquire(&b.barrier_sync[barrier_slot]);
    if (why == Waiting::in_warp_function) {
        CudaThread* lanes = &b.threads[(size_t)b.running / warpSize * warpSize];
        for (int k = 0; k < warpSize; k++)
            if (t.warp_mask >> k & 1) __tsan_acquire(&lanes[k].meet_sync[lanes[k].met_in]);
    }
#endif
}

#if defined(__SANITIZE_THREAD__)
// ThreadSanitizer contexts of threads that returned, for the next blocks' threads (creating one
// costs more than running most threads): a context's history is then program order, which
// blocks have anyway. A forked child starts with none: ThreadSanitizer (gcc 12) does not carry
// the parent's ordering of a context into the child, and reported a child's kernel writing
// memory the parent's kernels had written as a race (tests/test_emulation_strict.cu's children)
inline std::vector<void*>& tsan_fibers() {
    static std::vector<void*> fibers;
    static const int forget_in_child = pthread_atfork(nullptr, nullptr, [] { fibers.clear(); });
    (void)forget_in_child;
    return fibers;
}
#endif

// a fresh CUDA thread's ThreadSanitizer context, named after its index (nothing without it)
inline void start_tsan_fiber([[maybe_unused]] CudaThread& t) {
#if defined(__SANITIZE_THREAD__)
    t.tsan_fiber = tsan_fibers().empty() ? __tsan_create_fiber(0) : tsan_fibers().back();
    if (!tsan_fibers().empty()) tsan_fibers().pop_back();
    const std::string name = "CUDA thread (" + std::to_string(t.index.x) + "," + std::to_string(t.index.y) + "," +
                             std::to_string(t.index.z) + ") of block (" + std::to_string(blockIdx.x) + "," +
                             std::to_string(blockIdx.y) + "," + std::to_string(blockIdx.z) + ")";
    __tsan_set_fiber_name(t.tsan_fiber, name.c_str());
#endif
}

// A pass runs every thread that does not wait, in the pass's order, each until it waits or returns.
// A thread that stops jumps straight into the next one (a jump, where going through the scheduler
// was two; the jumps were half of the emulated GPU tests' time), the pass's last one back to the
// scheduler, which then lets go what it may.
// Boost.Context hands the context a jump left to the code it lands in, which stores it (store_left).
EMU_SCHEDULER inline void store_left(Block& b, fc::fcontext_t left) {
    if (b.left < 0) b.scheduler = left;
    else b.threads[b.left].context = left;
}

// the next thread of the pass that does not wait, after the running one (-1: the pass is over)
EMU_SCHEDULER inline int next_in_pass(Block& b) {
    while (++b.place < b.order.size())
        if (b.threads[b.order[b.place]].waiting == Waiting::no) return b.order[b.place];
    return -1;
}

// A thread's stack and its context at the start of thread_main. Not inlined: a thread that returns
// jumps into the next from enter_thread, whose frame, never left, stays on the stack the next block
// reuses, and must hold no AddressSanitizer marks (this function's would be).
[[gnu::noinline]] inline void start_fiber(Block& b, CudaThread& t) {
    t.stack = stack_pool().take();
    t.context = fc::make_fcontext(t.stack + StackPool::page() + STACK_BYTES, STACK_BYTES,
                                  b.thread_start);  // stacks grow down
    start_tsan_fiber(t);
}

// Jumps from the scheduler (from -1) or a thread into thread i, where it stopped or at its start;
// returns when a jump comes back.
EMU_SCHEDULER inline void enter_thread(Block& b, int i, int from) {
    CudaThread& t = b.threads[i];
    b.running = i;
    threadIdx = t.index;
    if (!t.stack) start_fiber(b, t);
#if defined(__SANITIZE_THREAD__)
    __tsan_switch_to_fiber(t.tsan_fiber, 0);
#endif
    b.left = from;
    store_left(b, fc::jump_fcontext(t.context, nullptr).fctx);
}

// Jumps from the running thread back to the scheduler; returns when a jump comes back.
EMU_SCHEDULER inline void back_to_scheduler(Block& b) {
    b.left = b.running;
    store_left(b, fc::jump_fcontext(b.scheduler, nullptr).fctx);
}

// The calling CUDA thread stops here until the scheduler lets it go on (at its end, for good).
// Under ThreadSanitizer it goes back to the scheduler, whose jump into a thread synchronises
// (above), where one thread's into the next would have to not; what it reads for the jump it reads
// before telling ThreadSanitizer, and the switch to the scheduler's context comes right before the
// jump, in this function: after it, an access, or a return, would count as the scheduler's.
inline void wait(Waiting why, unsigned warp_mask = 0) {
    Block& b = *running_block();
    CudaThread& t = this_thread();
    t.waiting = why;
    t.warp_mask = warp_mask;
#if defined(__SANITIZE_THREAD__)
    void* const scheduler = b.tsan_scheduler;
    const int barrier_slot = b.barriers % 2;
    const int next = -1;
#else
    const int barrier_slot = 0;
    const int next = next_in_pass(b);
#endif
    const int running = b.running;
    tell_stop(b, t, why, barrier_slot);
    if (next >= 0) {
        enter_thread(b, next, running);
    } else {
#if defined(__SANITIZE_THREAD__)
        __tsan_switch_to_fiber(scheduler, __tsan_switch_to_fiber_no_sync);
#endif
        back_to_scheduler(b);
    }
    tell_going_on(b, t, why, barrier_slot);
}

// A CUDA thread's fiber: the block's call is the kernel and its arguments. At its end it waits for
// good; the scheduler takes back its stack.
template <typename Kernel, typename Args>
void thread_main(fc::transfer_t from) {
    Block& b = *running_block();
    store_left(b, from.fctx);
    const auto* call = static_cast<const std::pair<Kernel, const Args*>*>(b.call);
    std::apply(call->first, *call->second);
    wait(Waiting::exited);
    __builtin_unreachable();
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
EMU_SCHEDULER inline bool release_warps(Block& b, std::string* error) {
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
                if (mask >> k & 1) {
                    lanes[k].waiting = Waiting::no;
                    lanes[k].met_slot = lanes[k].offer_slot;
#if defined(__SANITIZE_THREAD__)
                    lanes[k].met_in = lanes[k].arrived_into;
#endif
                }
            released = true;
        }
    }
    return released;
}

// The stacks (and ThreadSanitizer contexts) of block b's threads back to their pools; a thread
// that never returned (a launch that failed) is left where it stopped and its stack unmapped
// (ThreadSanitizer forgets what it saw there). Contexts are never ended: ending one whose thread
// never returned crashed ThreadSanitizer (gcc 12) later, in another context's release.
EMU_SCHEDULER inline void end_block(Block& b) {
#if defined(__SANITIZE_THREAD__)
    __tsan_acquire(&b.end_sync);
#endif
    for (CudaThread& t : b.threads) {
        if (!t.stack) continue;
        const bool returned = t.waiting == Waiting::exited;
        if (returned) stack_pool().free.push_back(t.stack);
        else StackPool::unmap(t.stack);
#if defined(__SANITIZE_THREAD__)
        tsan_fibers().push_back(t.tsan_fiber);
#endif
    }
    b.threads.clear();
    running_block() = nullptr;
}

// Runs every CUDA thread of block b to its end. Returns "" or what went wrong.
template <typename Kernel, typename Args>
EMU_SCHEDULER inline std::string run_block(Block& b, Kernel kernel, const Args& args) {
    running_block() = &b;
#if defined(__SANITIZE_THREAD__)
    b.tsan_scheduler = __tsan_get_current_fiber();
    b.barriers = 0;
#endif
    const std::pair<Kernel, const Args*> call{kernel, &args};
    b.call = &call;
    b.thread_start = &thread_main<Kernel, Args>;
    const Schedule plan = schedule();
    b.order.resize(b.threads.size());
    std::iota(b.order.begin(), b.order.end(), 0);
    if (plan.order == Order::reverse) std::reverse(b.order.begin(), b.order.end());
    ShuffleRng rng{plan.seed ^ (b.linear_index * 0xD1B54A32D192ED03ull)};
    for (;;) {
        if (plan.order == Order::shuffle)  // a fresh order every pass (Fisher-Yates)
            for (size_t k = b.order.size(); k > 1; k--) std::swap(b.order[k - 1], b.order[rng.next() % k]);
        // the pass: the jump into its first thread comes back when its last one stops (under
        // ThreadSanitizer, when each one does)
        b.place = (size_t)-1;
        for (int i; (i = next_in_pass(b)) >= 0;) enter_thread(b, i, -1);
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
#if defined(__SANITIZE_THREAD__)
            b.barriers++;
#endif
            continue;
        }
        return "threads wait at __syncthreads while lanes of their warps wait in a warp function: a deadlock";
    }
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

// The checks a GPU makes as it launches kernel<<<grid, block, shared_bytes>>>(args...), and the
// emulation's own (every pointer argument null or device memory), each failure one line and the
// pending error. Returns whether the launch may run.
template <auto kernel, typename... Args>
inline bool launch_allowed(dim3 grid, dim3 block, size_t shared_bytes, Args... args) {
    const std::string name = kernel_name<kernel>();
    const size_t threads = (size_t)block.x * block.y * block.z;
    if (block.x == 0 || block.y == 0 || block.z == 0 || grid.x == 0 || grid.y == 0 || grid.z == 0 ||
        block.x > 1024 || block.y > 1024 || block.z > 64 || threads > 1024 || grid.y > 65535 || grid.z > 65535) {
        report(cudaErrorInvalidConfiguration,
               name + ": grid (" + std::to_string(grid.x) + ", " + std::to_string(grid.y) + ", " +
                   std::to_string(grid.z) + "), block (" + std::to_string(block.x) + ", " + std::to_string(block.y) +
                   ", " + std::to_string(block.z) + "): every dim at least 1, at most 1024 threads a block");
        return false;
    }
    if (shared_bytes > MAX_SHARED_BYTES) {
        report(cudaErrorInvalidValue, name + ": " + std::to_string(shared_bytes) +
                                          " bytes of dynamic shared memory, more than the 48 KB a launch may ask");
        return false;
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
    return pointers_ok;
}

// Runs a launch that launch_allowed let through, the arena open: every block in turn, then the
// guards of every cudaMalloc block checked.
template <auto kernel, typename... Args>
inline void run_launch(dim3 grid, dim3 block, size_t shared_bytes, Args... args) {
    ArenaOpen open;
    const size_t threads = (size_t)block.x * block.y * block.z;
    gridDim = grid;
    blockDim = block;
    const auto call_args = std::make_tuple(args...);
    Block b;
    for (unsigned bz = 0; bz < grid.z; bz++)
        for (unsigned by = 0; by < grid.y; by++)
            for (unsigned bx = 0; bx < grid.x; bx++) {
                blockIdx = {bx, by, bz};
                b.linear_index = ((uint64_t)bz * grid.y + by) * grid.x + bx;
                b.threads.resize(threads);  // fresh: end_block cleared the last block's
                for (size_t i = 0; i < threads; i++)
                    b.threads[i].index = {(unsigned)(i % block.x), (unsigned)(i / block.x % block.y),
                                          (unsigned)(i / ((size_t)block.x * block.y))};
                b.dynamic_shared.assign(shared_bytes, POISON);
                std::string error = run_block(b, kernel, call_args);
                end_block(b);
                if (!error.empty()) {
                    report(cudaErrorLaunchFailure, kernel_name<kernel>() + ", block (" + std::to_string(bx) + ", " +
                                                       std::to_string(by) + ", " + std::to_string(bz) + "): " + error);
                    return;
                }
            }
    guards_intact(kernel_name<kernel>());
}

// kernel<<<grid, block, shared_bytes, stream>>>(args...): checked now, run when the queue runs
// (or recorded while the stream captures; emu/streams.h). With CUDA_LAUNCH_BLOCKING=1, as on a GPU,
// the launch waits for its kernel: the queue runs at once, and a fault is pending when the launch returns.
template <auto kernel, typename... Args>
inline void launch_on(cudaStream_t stream, dim3 grid, dim3 block, size_t shared_bytes, Args... args) {
    if (!launch_allowed<kernel>(grid, block, shared_bytes, args...)) return;
    stream_work(stream, [=] { run_launch<kernel>(grid, block, shared_bytes, args...); }, kernel_name<kernel>().c_str());
    const char* blocking = getenv("CUDA_LAUNCH_BLOCKING");
    if (blocking && std::string(blocking) == "1" && !(stream && stream->capturing)) run_queue();
}

// The same checks and the run at once, on the calling thread: for the emulation's own tests,
// which look at a launch's errors right after it.
template <auto kernel, typename... Args>
inline void launch(dim3 grid, dim3 block, size_t shared_bytes, Args... args) {
    if (launch_allowed<kernel>(grid, block, shared_bytes, args...)) run_launch<kernel>(grid, block, shared_bytes, args...);
}

inline void* dynamic_shared_memory() {
    if (!running_block()) return nullptr;
    return running_block()->dynamic_shared.data();
}

}  // namespace emu
