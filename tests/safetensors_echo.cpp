// tests/safetensors_echo.cpp: reads a safetensors file with the program's own reader
// (run/safetensors.h, safetensors_read) and writes what it read with the program's writer, so that
// tests/test_safetensors_official.py can hold the official reader's view of the first file against
// the program's (the second file's tensors and metadata, read back by the official reader too).
//   g++ -std=c++17 -I. -o ECHO tests/safetensors_echo.cpp && ECHO IN OUT [IN OUT ...]
// Exit 0; 2 with the reader's one line when it refuses a file.
#include <cstdio>
#include "run/safetensors.h"

int main(int argc, char** argv) {
    if (argc < 3 || argc % 2 == 0) {
        fprintf(stderr, "usage: %s IN OUT [IN OUT ...]\n", argv[0]);
        return 2;
    }
    try {
        for (int i = 1; i + 1 < argc; i += 2) safetensors_write(argv[i + 1], safetensors_read(argv[i]));
    } catch (const InputError& e) {
        fprintf(stderr, "safetensors_echo: %s\n", e.what());
        return 2;
    }
    return 0;
}
