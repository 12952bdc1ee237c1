// emu/schedule.h: the schedule of the emulation's CUDA threads (emu/threads.h runs them).
#pragma once
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <string>

namespace emu {

// The order in which each pass resumes a block's ready threads. A pass runs every
// thread that may go on until it waits (at a barrier or in a warp function) or returns; the
// next pass begins when the barriers and warp functions have let go whom they can. Two threads
// of one pass run in one order under index and in the other under reverse, so a read of what
// another thread writes with no barrier between them sees the write under one of the two and
// not under the other; a shuffle mixes both.

enum class Order { index, reverse, shuffle };

struct Schedule {
    Order order = Order::index;
    uint64_t seed = 0;  // the shuffle's
};

// "index", "reverse" or "shuffle:SEED" (SEED decimal digits) into *schedule; false for anything else
inline bool parse_schedule(const std::string& text, Schedule* schedule) {
    if (text == "index" || text == "reverse") {
        *schedule = {text == "index" ? Order::index : Order::reverse, 0};
        return true;
    }
    const std::string digits = text.rfind("shuffle:", 0) == 0 ? text.substr(8) : "";
    if (digits.empty() || digits.size() > 19 || digits.find_first_not_of("0123456789") != std::string::npos)
        return false;
    *schedule = {Order::shuffle, std::stoull(digits)};
    return true;
}

// The schedule of every launch: MASKPRIOR_EMU_SCHEDULE, read once, index order when unset; a bad
// value stops the program with one line on stderr. The emulation's own tests set it in turn.
inline Schedule& schedule() {
    static Schedule chosen = [] {
        Schedule s;
        const char* text = getenv("MASKPRIOR_EMU_SCHEDULE");
        if (text && !parse_schedule(text, &s)) {
            fprintf(stderr, "CUDA emulation: MASKPRIOR_EMU_SCHEDULE=%s: expected index, reverse or shuffle:SEED\n",
                    text);
            exit(2);
        }
        return s;
    }();
    return chosen;
}

// splitmix64: the shuffle's generator, one per block, seeded by the seed and the block's index,
// so that a launch's orders do not depend on what ran before it
struct ShuffleRng {
    uint64_t state;
    uint64_t next() {
        uint64_t z = (state += 0x9E3779B97F4A7C15ull);
        z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
        z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
        return z ^ (z >> 31);
    }
};

}  // namespace emu
