// emu/device_memory.h: device memory as the emulation gives it (emu/cuda_emulation.h says what the
// emulation is): memory the host cannot read or write, as on a GPU, with guard bytes around
// every block.
//
// On a GPU, cudaMalloc's memory is on the card: a host line that reads or writes it through its
// pointer (`float loss = *device_loss;`) stops the program with SIGSEGV. Here it is host memory,
// so the emulation has to make the same line fail on purpose: every cudaMalloc block lives in one
// arena, a range of address space reserved at start-up and kept PROT_NONE (no access), opened
// (read and write) only while the emulation itself runs a kernel, a copy, a memset or a cuBLAS
// call, and closed again after it: one mprotect for each opening, however many blocks. A host
// access of a closed arena faults, and the fault handler here says so in one line, naming the
// address, the cudaMalloc block it falls in (its size, its number and the line that allocated
// it) and what the host should have done (a copy), then hands the fault on: to doctest's handler
// in a test (which names the test case), to AddressSanitizer's in a sanitized build (which prints
// the stack), else to the default (the program stops with SIGSEGV).
//
// The arena's layout: each block starts on a page of its own, after a gap page, and fills whole
// pages. The 64 bytes before a block's start and after its end are guard words (signalling NaNs
// in a pattern of their block's own), which a write past either end changes and which every
// launch checks after it runs; fresh blocks hold 0xFF bytes (NaN as a float). The rest of the
// gaps and the padding hold the same NaN bytes, and in an AddressSanitizer build they are
// poisoned, so that an access further out than the guard words is reported at once with its
// stack (what the redzones of a malloc'd block gave before the arena). While the arena is open
// the gaps are open too (one mprotect covers everything): a kernel that reads a gap reads NaN.
//
// The fault handler has to cope with three other things: the fibers' stacks (emu/threads.h) sit
// on inaccessible guard pages, so a CUDA thread that overflows its stack faults there, and says
// so; a fault on an overflowed stack needs another stack to run on, so the handler runs on an
// alternate signal stack (sigaltstack); and doctest installs its own handler for each test case
// and puts the old one back at its end, so the emulation puts its handler back (chaining to
// whatever it replaced) each time it opens or closes the arena.
#pragma once
#include <signal.h>
#include <sys/mman.h>
#include <unistd.h>
#include <cstdint>
#include <cstdio>
#include <cstring>
#include <iterator>
#include <map>
#include <string>
#include <vector>
#include "emu/runtime.h"  // emu::report, emu::hex
#if defined(__SANITIZE_ADDRESS__)
#include <sanitizer/asan_interface.h>
// AddressSanitizer keeps its own SIGSEGV handler unless told to let the program install one
extern "C" __attribute__((weak)) const char* __asan_default_options() { return "allow_user_segv_handler=1"; }
#endif

namespace emu {

constexpr size_t GUARD_BYTES = 64, GUARD_WORDS = GUARD_BYTES / 4;
constexpr unsigned char POISON = 0xFF;  // fresh memory: 0xFFFFFFFF is a NaN as a float

// the address space the arena reserves (no memory is committed until a block is written)
constexpr size_t ARENA_RESERVE_BYTES = size_t(64) << 30;
// The arena asks for transparent huge pages of this size: an mprotect changes one entry per
// page, and with 4 KB pages opening and closing tens of MB cost milliseconds each time (measured
// on a 2-core VM: 3.6 ms per open and close of 64 MB, 16 µs with huge pages), thousands of
// times a test. Its openings cover whole huge pages, so that none is split.
constexpr size_t HUGE_PAGE_BYTES = size_t(2) << 20;

inline size_t page_bytes() {
    static const size_t page = (size_t)sysconf(_SC_PAGESIZE);
    return page;
}

// what the arena knows of a live block
struct DeviceBlock {
    size_t bytes;        // as cudaMalloc was asked
    size_t first_page;   // the region's first page (its gap page), counted from the arena's base
    size_t pages;        // the region's pages: the gap page, then the block's
    uint64_t number;     // the how-manyth cudaMalloc it was (1, 2, ...)
    const char* file;    // the call of cudaMalloc that made it
    int line;
};

struct Arena {
    char* base = nullptr;
    size_t reserved_pages = 0;
    size_t used_pages = 0;                     // pages handed out so far, from the base: what an opening opens
    std::map<uintptr_t, DeviceBlock> blocks;   // live blocks, by address
    std::map<size_t, size_t> free_regions;     // first page -> pages, of regions freed
    uint64_t allocated = 0;                    // cudaMalloc calls so far
    int openings = 0;                          // nested openings now; open while > 0
};

inline Arena& arena() {
    static Arena a;
    return a;
}

// ----------------------------------------------------------------------------
// the guard words, the poison, and AddressSanitizer's view of them

// word k of the guards of the block at `base`: a signalling NaN (exponent all ones, quiet bit
// 0, payload not 0) whose payload depends on the block. Arithmetic on it gives a quiet NaN,
// which differs; a copy from another block's guard differs too.
inline uint32_t guard_word(uintptr_t base, size_t k) {
    return 0x7F800000u | (uint32_t)(((base >> 4) * 2654435761u + k) % 0x3FFFFFu + 1);
}

// [p, p + bytes) reported to AddressSanitizer as not to be touched (poisoned), or as usable again
inline void asan_poison([[maybe_unused]] const void* p, [[maybe_unused]] size_t bytes) {
#if defined(__SANITIZE_ADDRESS__)
    ASAN_POISON_MEMORY_REGION(p, bytes);
#endif
}
inline void asan_unpoison([[maybe_unused]] const void* p, [[maybe_unused]] size_t bytes) {
#if defined(__SANITIZE_ADDRESS__)
    ASAN_UNPOISON_MEMORY_REGION(p, bytes);
#endif
}

inline void write_guards(uintptr_t base, size_t size) {
    uint32_t* before = (uint32_t*)(base - GUARD_BYTES);
    unsigned char* past = (unsigned char*)base + size;  // may not be 4-byte aligned
    for (size_t k = 0; k < GUARD_WORDS; k++) {
        uint32_t word = guard_word(base, k);
        before[k] = word;
        memcpy(past + 4 * k, &word, 4);
    }
}

// the first address of block `b`'s region (its gap page) and one past its last page
inline unsigned char* region_start(const DeviceBlock& b) { return (unsigned char*)arena().base + b.first_page * page_bytes(); }
inline unsigned char* region_end(const DeviceBlock& b) { return region_start(b) + b.pages * page_bytes(); }

// A fresh block's region: NaN bytes everywhere, the guard words around the block; for
// AddressSanitizer, the gap and padding beyond the guard words poisoned. (The arena is open.)
inline void prepare_region(uintptr_t address, const DeviceBlock& b) {
    unsigned char *start = region_start(b), *end = region_end(b);
    asan_unpoison(start, end - start);
    memset(start, POISON, end - start);
    write_guards(address, b.bytes);
    asan_poison(start, (unsigned char*)address - GUARD_BYTES - start);
    unsigned char* after_guards = (unsigned char*)address + b.bytes + GUARD_BYTES;
    asan_poison(after_guards, end - after_guards);
}

// ----------------------------------------------------------------------------
// the fault handler (the arena's openings put it in place: see the header)

inline struct sigaction& replaced_handler() {  // what the emulation's handler hands other faults to
    static struct sigaction previous = {};
    return previous;
}

// the fibers' stacks, each a guard page and then its stack (emu/threads.h registers them)
struct FiberStacks {
    std::vector<char*> bases;
    size_t stack_bytes = 0;
};
inline FiberStacks& fiber_stacks() {
    static FiberStacks stacks;
    return stacks;
}

// the live block whose region holds address a, or nullptr
inline const std::pair<const uintptr_t, DeviceBlock>* region_holding(uintptr_t a) {
    for (const auto& entry : arena().blocks)
        if (a >= (uintptr_t)region_start(entry.second) && a < (uintptr_t)region_end(entry.second)) return &entry;
    return nullptr;
}

// What a fault at `a` was, in one line, when it is the emulation's to explain: a host access of
// a closed arena, an access of the arena outside its blocks, or a fiber's stack overflow. "" for
// any other fault (not the emulation's).
inline std::string explain_fault(uintptr_t a, const char* access) {
    char line[512];
    Arena& ar = arena();
    if (ar.base && a >= (uintptr_t)ar.base && a < (uintptr_t)ar.base + ar.reserved_pages * page_bytes()) {
        const auto* held = region_holding(a);
        if (!held) {
            snprintf(line, sizeof line, "%s %s the arena of device memory at %p, outside every cudaMalloc block",
                     ar.openings > 0 ? "a kernel, a copy or a library call" : "the host", access, (void*)a);
            return line;
        }
        const uintptr_t start = held->first;
        const DeviceBlock& b = held->second;
        char where[160];
        if (a >= start && a < start + b.bytes) snprintf(where, sizeof where, "byte %zu of", (size_t)(a - start));
        else if (a < start) snprintf(where, sizeof where, "%zu bytes before", (size_t)(start - a));
        else snprintf(where, sizeof where, "%zu bytes past the end of", (size_t)(a - start - b.bytes));
        snprintf(line, sizeof line,
                 "the host %s device memory at %p, %s the cudaMalloc block of %zu bytes at %p (cudaMalloc number %llu, "
                 "%s:%d): only a kernel, a copy, a memset or a cuBLAS call may touch device memory; the host copies "
                 "it (cudaMemcpy)",
                 access, (void*)a, where, b.bytes, (void*)start, (unsigned long long)b.number, b.file, b.line);
        return line;
    }
    const FiberStacks& fs = fiber_stacks();
    for (char* base : fs.bases)
        if (a >= (uintptr_t)base && a < (uintptr_t)base + page_bytes()) {
            snprintf(line, sizeof line, "a CUDA thread overflowed its %zu KB stack (large local arrays in a kernel?)",
                     fs.stack_bytes / 1024);
            return line;
        }
    return "";
}

inline void on_fault(int sig, siginfo_t* info, void* context) {
    static bool handling = false;  // a fault inside the handler itself: let the default have it
    const char* access = "read or wrote";
#if defined(__x86_64__)
    // the page-fault error code's bit 1: a write
    if (context) access = (((ucontext_t*)context)->uc_mcontext.gregs[REG_ERR] & 2) ? "wrote" : "read";
#else
    (void)context;
#endif
    const bool fault = info && info->si_code > 0;  // a real fault, not a raise() or kill()
    if (!handling && fault) {
        handling = true;
        const std::string line = explain_fault((uintptr_t)info->si_addr, access);
        if (!line.empty()) {
            const std::string text = "CUDA emulation: " + line + "\n";
            if (write(STDERR_FILENO, text.data(), text.size()) < 0) {}
        }
        handling = false;
    }
    // hand it on: the handler this one replaced takes the fault when it recurs (the faulting
    // instruction runs again on return), or, for a raised signal, the signal raised again
    sigaction(sig, &replaced_handler(), nullptr);
    if (!fault) raise(sig);
}

// The emulation's handler in place (with an alternate stack), replacing, and keeping, whatever
// another installed since (doctest does, for each test case).
inline void ensure_fault_handler() {
    struct sigaction current;
    if (sigaction(SIGSEGV, nullptr, &current) != 0) return;
    if ((current.sa_flags & SA_SIGINFO) && current.sa_sigaction == on_fault) return;
    stack_t alternate;
    if (sigaltstack(nullptr, &alternate) == 0 && (alternate.ss_flags & SS_DISABLE)) {
        static std::vector<char> memory(64 * 1024);
        alternate.ss_sp = memory.data();
        alternate.ss_size = memory.size();
        alternate.ss_flags = 0;
        sigaltstack(&alternate, nullptr);
    }
    replaced_handler() = current;
    struct sigaction mine = {};
    mine.sa_sigaction = on_fault;
    mine.sa_flags = SA_SIGINFO | SA_ONSTACK;
    sigemptyset(&mine.sa_mask);
    sigaction(SIGSEGV, &mine, nullptr);
}

// ----------------------------------------------------------------------------
// opening and closing

inline void arena_protect(int protection) {
    Arena& ar = arena();
    const size_t bytes = (ar.used_pages * page_bytes() + HUGE_PAGE_BYTES - 1) / HUGE_PAGE_BYTES * HUGE_PAGE_BYTES;
    if (bytes > 0 && mprotect(ar.base, bytes, protection) != 0) {
        perror("CUDA emulation: mprotect of the device memory arena");
        abort();
    }
}

// While one lives, the arena is open to the emulation's own code (kernels, copies, memsets,
// cuBLAS); nested ones cost nothing.
struct ArenaOpen {
    ArenaOpen() {
        if (arena().openings++ == 0) arena_protect(PROT_READ | PROT_WRITE);
    }
    ~ArenaOpen() {
        if (--arena().openings == 0) arena_protect(PROT_NONE);
        ensure_fault_handler();
    }
    ArenaOpen(const ArenaOpen&) = delete;
    ArenaOpen& operator=(const ArenaOpen&) = delete;
};

// ----------------------------------------------------------------------------
// blocks

// The live block that holds [p, p + bytes), or end(): an address one past a block's end belongs
// to it when bytes is 0 (an empty slice).
inline std::map<uintptr_t, DeviceBlock>::const_iterator block_holding(const void* p, size_t bytes) {
    const auto& blocks = arena().blocks;
    const uintptr_t a = (uintptr_t)p;
    auto it = blocks.upper_bound(a);
    if (it == blocks.begin()) return blocks.end();
    --it;
    return a + bytes <= it->first + it->second.bytes ? it : blocks.end();
}

inline bool is_device_memory(const void* p, size_t bytes = 0) { return block_holding(p, bytes) != arena().blocks.end(); }

// Writes outside a block change its guards: each damaged guard is reported (and rewritten).
// Returns whether all were intact. (The arena is open: a launch checks them after it runs.)
inline bool guards_intact(const std::string& after) {
    bool intact = true;
    for (const auto& [base, block] : arena().blocks) {
        const size_t size = block.bytes;
        const unsigned char* before = (unsigned char*)base - GUARD_BYTES;
        const unsigned char* past = (unsigned char*)base + size;
        for (size_t k = 0; k < GUARD_WORDS; k++) {
            uint32_t word = guard_word(base, k), seen_before, seen_past;
            memcpy(&seen_before, before + 4 * k, 4);
            memcpy(&seen_past, past + 4 * k, 4);
            if (seen_before == word && seen_past == word) continue;
            std::string where = seen_past != word ? std::to_string(4 * k) + " bytes past the end"
                                                  : std::to_string(GUARD_BYTES - 4 * k) + " bytes before the start";
            report(cudaErrorIllegalAddress, after + " wrote " + where + " of a cudaMalloc block of " +
                                                std::to_string(size) + " bytes at " + hex((void*)base));
            write_guards(base, size);
            intact = false;
            break;  // one line per block
        }
    }
    return intact;
}

// A new block of `bytes` in the arena (nullptr when the arena is full), prepared as the header
// says: first fit among freed regions, else after the last one.
inline void* arena_allocate(size_t bytes, const char* file, int line) {
    Arena& ar = arena();
    if (!ar.base) {  // reserved on first use, aligned to a huge page, and asked for huge pages
        for (size_t reserve = ARENA_RESERVE_BYTES; reserve >= (size_t(1) << 30) && !ar.base; reserve /= 4) {
            void* p = mmap(nullptr, reserve + HUGE_PAGE_BYTES, PROT_NONE, MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE,
                           -1, 0);
            if (p == MAP_FAILED) continue;
            ar.base = (char*)(((uintptr_t)p + HUGE_PAGE_BYTES - 1) / HUGE_PAGE_BYTES * HUGE_PAGE_BYTES);
            ar.reserved_pages = reserve / page_bytes();
            madvise(ar.base, reserve, MADV_HUGEPAGE);
        }
        if (!ar.base) return nullptr;
    }
    const size_t pages = 1 + (bytes + GUARD_BYTES + page_bytes() - 1) / page_bytes();
    size_t first = ar.used_pages;
    auto fit = ar.free_regions.begin();
    while (fit != ar.free_regions.end() && fit->second < pages) ++fit;
    if (fit != ar.free_regions.end()) {
        first = fit->first;
        if (fit->second > pages) ar.free_regions[fit->first + pages] = fit->second - pages;
        ar.free_regions.erase(fit);
    } else {
        if (ar.used_pages + pages > ar.reserved_pages) return nullptr;
        ar.used_pages += pages;
    }
    const DeviceBlock b{bytes, first, pages, ++ar.allocated, file, line};
    const uintptr_t address = (uintptr_t)ar.base + (first + 1) * page_bytes();
    ar.blocks[address] = b;
    ArenaOpen open;
    prepare_region(address, b);
    return (void*)address;
}

// Gives block `it`'s region back for a later block (poisoned for AddressSanitizer), merged with
// free neighbours. Its memory stays the arena's: releasing part of a huge page would split it.
inline void arena_free(std::map<uintptr_t, DeviceBlock>::const_iterator it) {
    Arena& ar = arena();
    const DeviceBlock b = it->second;
    ar.blocks.erase(it);
    asan_poison(region_start(b), b.pages * page_bytes());
    size_t first = b.first_page, pages = b.pages;
    auto next = ar.free_regions.find(first + pages);
    if (next != ar.free_regions.end()) pages += next->second, ar.free_regions.erase(next);
    auto before = ar.free_regions.lower_bound(first);
    if (before != ar.free_regions.begin() && std::prev(before)->first + std::prev(before)->second == first) {
        --before;
        before->second += pages;
    } else {
        ar.free_regions[first] = pages;
    }
}

}  // namespace emu
