// tests/fuzz/fuzz.h: what every libFuzzer harness of tests/fuzz/ shares. Built by clang++ with
// -fsanitize=fuzzer,address,undefined (make fuzz, make fuzz-smoke); run through
// tests/fuzz/run_fuzz.sh, from the repository root.
//
// A harness #defines FUZZ_NAME (its corpus folder, tests/fuzz/corpus/FUZZ_NAME/), includes this
// header and defines one function:
//   void parse(const std::string& seed, const uint8_t* data, size_t size)
// which writes the bytes to a file (write_input), hands it to the parser and checks what comes
// back (check). seed is "" for a fuzz input: then every way the harness reads a file is tried,
// each inside try_parse. For a valid seed it is the seed's file name, and parse reads the file
// the way that name says it must be read, letting a rejection throw.
//
// Before fuzzing, every file of tests/fuzz/corpus/FUZZ_NAME/valid/ must parse: a harness whose
// parser rejects real files stops there with exit code 3 and "VALID SEED REJECTED".
// Outcomes of a fuzz input:
//   - a std::exception: a clean rejection (maskprior prints its one line and exits with 2),
//     unless it is a std::logic_error, which main.cu reports as an internal error (a bug), or
//     std::bad_alloc (a small file must not ask for that much), or its message is not one line;
//   - a broken invariant of the parsed result (check): a finding;
//   - a crash, a sanitizer report, a leak, a timeout, too much memory: a finding (libFuzzer).
// A finding aborts with "FINDING: <what>", and libFuzzer saves the input as crash-<sha1>.
#pragma once
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <new>
#include <stdexcept>
#include <string>
#include <vector>
#include "tests/temp_dir.h"  // TempDir

#ifndef FUZZ_NAME
#error "a harness defines FUZZ_NAME, its corpus folder's name, before including tests/fuzz/fuzz.h"
#endif

void parse(const std::string& seed, const uint8_t* data, size_t size);  // the harness's

[[noreturn]] inline void finding(const std::string& what) {
    fprintf(stderr, "fuzz_%s: FINDING: %s\n", FUZZ_NAME, what.c_str());
    abort();
}

// An invariant of what a parser accepted.
inline void check(bool holds, const std::string& what) {
    if (!holds) finding(what);
}

// The one folder of this process where the inputs are written ($TMPDIR or /tmp); removed at exit.
inline const std::string& work_dir() {
    static TempDir dir;
    return dir.path;
}

// Writes the bytes to work_dir()/name (folders made as needed); returns the path.
inline std::string write_input(const std::string& name, const uint8_t* data, size_t size) {
    const std::string path = work_dir() + "/" + name;
    std::filesystem::create_directories(std::filesystem::path(path).parent_path());
    FILE* f = fopen(path.c_str(), "wb");
    if (!f || fwrite(data, 1, size, f) != size || fclose(f) != 0) {
        fprintf(stderr, "fuzz_%s: cannot write %s\n", FUZZ_NAME, path.c_str());
        exit(1);
    }
    return path;
}

// Runs one reading of a fuzz input; true when the parser accepted it, false on a clean rejection.
template <class Read>
bool try_parse(Read&& read) {
    try {
        read();
        return true;
    } catch (const std::logic_error& e) {
        finding(std::string("std::logic_error escaped the parser (main.cu: an internal error): ") + e.what());
    } catch (const std::bad_alloc&) {
        finding("std::bad_alloc: the parser asked for more memory than a small file justifies");
    } catch (const std::exception& e) {
        const std::string message = e.what();
        if (message.find('\n') != std::string::npos) finding("a rejection of more than one line: " + message);
        return false;
    }
}

// Every file of the valid seed folder must parse, else the harness stops with exit code 3.
extern "C" int LLVMFuzzerInitialize(int*, char***) {
    const std::string folder = std::string("tests/fuzz/corpus/") + FUZZ_NAME + "/valid";
    if (!std::filesystem::is_directory(folder)) {
        fprintf(stderr, "fuzz_%s: no folder %s (run from the repository root)\n", FUZZ_NAME, folder.c_str());
        exit(3);
    }
    int seeds = 0;
    for (const auto& entry : std::filesystem::directory_iterator(folder)) {
        std::ifstream in(entry.path(), std::ios::binary);
        const std::string bytes((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
        try {
            parse(entry.path().filename().string(), (const uint8_t*)bytes.data(), bytes.size());
        } catch (const std::exception& e) {
            fprintf(stderr, "fuzz_%s: VALID SEED REJECTED: %s: %s\n", FUZZ_NAME, entry.path().c_str(), e.what());
            exit(3);
        }
        seeds++;
    }
    if (seeds == 0) {
        fprintf(stderr, "fuzz_%s: VALID SEED REJECTED: %s holds no seeds\n", FUZZ_NAME, folder.c_str());
        exit(3);
    }
    fprintf(stderr, "fuzz_%s: the %d valid seeds of %s parse\n", FUZZ_NAME, seeds, folder.c_str());
    return 0;
}

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
    parse("", data, size);
    return 0;
}
