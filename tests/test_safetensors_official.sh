#!/bin/sh
# tests/test_safetensors_official.sh: the official safetensors reader, installed from the Python
# registry into build/venv (tests/python_venv.sh), on a checkpoint and a --dump-state file of each
# task family, against the program's own reader (tests/safetensors_echo.cpp, built here with g++);
# tests/test_safetensors_official.py says what it checks. The binary is $MASKPRIOR_BINARY (default
# ./maskprior). Exit 0 passed, 1 failed, 77 skipped (no binary, or the registry cannot be reached).
cd "$(dirname "$0")/.." || exit 1
binary=${MASKPRIOR_BINARY:-./maskprior}
if [ ! -x "$binary" ]; then
    echo "official safetensors test: skipped (no binary $binary: make, or set MASKPRIOR_BINARY)"
    exit 77
fi
python=$(sh tests/python_venv.sh safetensors==0.8.0 2>&1) || {
    status=$?
    echo "official safetensors test: $python"
    exit "$status"
}
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
if ! g++ -std=c++17 -O1 -Wall -I. -o "$tmp/safetensors_echo" tests/safetensors_echo.cpp 2>"$tmp/build.log"; then
    echo "official safetensors test: FAILED: tests/safetensors_echo.cpp does not build: $(head -3 "$tmp/build.log")"
    exit 1
fi
mkdir "$tmp/files"
"$python" tests/test_safetensors_official.py "$binary" "$tmp/safetensors_echo" "$tmp/files"
