// layers/errors.h: how the program reports bad input (host only, no CUDA).
// fail() formats one line and throws InputError; main() catches it at the top, prints
// "maskprior: error: <the line>" on stderr and exits with code 2. Because nothing deep inside
// exits the process, the parsers (checkpoints, G files, data files) can be tested in-process
// and fed to a fuzzer. Bugs are not input: CUDA errors abort with file and line (gpu/cuda.cuh).
#pragma once
#include <cstdarg>
#include <cstdio>
#include <stdexcept>
#include <string>

struct InputError : std::runtime_error {
    using std::runtime_error::runtime_error;
};

[[noreturn]] inline void fail(const char* fmt, ...) {
    va_list args;
    va_start(args, fmt);
    char line[1024];
    vsnprintf(line, sizeof line, fmt, args);
    va_end(args);
    throw InputError(line);
}
