// emu/warp_functions.h: what a kernel calls to wait for others, on the emulation's fibers
// (emu/threads.h): __syncthreads, and the warp functions, which exchange values among the lanes of
// a warp; and the math functions and intrinsics as the host has them.
#pragma once
#include <cmath>
#include <cstring>
#include <type_traits>
#include "emu/threads.h"  // wait, Waiting, running_block, this_thread, this_warp, lanes_waited_for

namespace emu {

// The warp functions meet once: every lane of the mask offers its value and waits for the
// others (meet); then each reads the offers it wants. A lane offers into its two slots in turn, and
// the others read the slot of the meet that let them go (release_warps keeps it): one that goes on
// and offers again, before a lane it met has read, leaves the offer being read as it is. It cannot
// offer a third time first: it waits at its next meet until the pass ends at least, and every lane
// let go with it runs, and reads, in this pass.
inline void meet(unsigned mask) { wait(Waiting::in_warp_function, lanes_waited_for(mask)); }

// The slots are the emulation's own memory, which ThreadSanitizer does not see (EMU_SCHEDULER): the
// passes order their writes and reads, and no barrier or warp function a kernel could miss.
template <typename T>
EMU_SCHEDULER inline void store_offer(CudaThread& t, T value) {
    t.offer_slot ^= 1;
    memcpy(t.offer[t.offer_slot], &value, sizeof(T));
}

template <typename T>
inline void offer(unsigned mask, T value) {
    static_assert(std::is_trivially_copyable_v<T> && sizeof(T) <= 16, "warp functions move values of 16 bytes or less");
    store_offer(this_thread(), value);
    meet(mask);
}

// lane l's offer at the meet that let the calling thread go, l within its warp
template <typename T>
EMU_SCHEDULER inline T offer_of(int lane) {
    const CudaThread& source = running_block()->threads[this_warp() * warpSize + lane];
    T value;
    memcpy(&value, source.offer[source.met_slot], sizeof(T));
    return value;
}

inline int this_lane() { return running_block()->running % warpSize; }

// a shuffle: offer, then read the source lane's offer
template <typename T>
inline T shuffle(unsigned mask, T value, int source_lane) {
    offer(mask, value);
    return offer_of<T>(source_lane);
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
