#!/bin/sh
# tests/test_packages.sh: each package set of tools/install-deps.sh covers the builds of the make
# targets that install it (tests/check_packages.py: the headers and libraries each compiler reads,
# resolved to Debian packages), and the check catches a package taken out of a set: zlib1g-dev out
# of run (every build's zlib.h and -lz), libboost-context-dev out of without-cuda (the build without
# CUDA's Boost.Context), doctest-dev out of test (the unit tests' header) and, where there is
# clang++, libclang-rt-14-dev out of check (the fuzzers' runtimes) and libomp-14-dev out of clang
# (clang's OpenMP). Exit 0 when every set covers its builds and every plant is caught, 1 otherwise,
# 77 (skip) without dpkg.
set -u
cd "$(dirname "$0")/.." || exit 1
python=${MASKPRIOR_PYTHON:-/usr/bin/python3}
[ -x "$python" ] || python=python3
set -- --plant run=zlib1g-dev --plant without-cuda=libboost-context-dev --plant test=doctest-dev
if command -v clang++ > /dev/null 2>&1; then
    set -- "$@" --plant check=libclang-rt-14-dev --plant clang=libomp-14-dev
fi
exec "$python" tests/check_packages.py "$@"
