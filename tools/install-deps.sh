#!/bin/sh
# tools/install-deps.sh SET [SET...]: installs the Debian packages that the sets need, when they are
# missing; the Makefile's targets call it first, each with the smallest set it needs (and, in a build
# without CUDA, with without-cuda beside it). --list SET...: prints the sets' packages, one line,
# installing nothing (tests/check_packages.py reads them so).
#   run    the build and make run (the JSON and image-writing headers, zlib, the plots' matplotlib)
#   without-cuda  what a build without nvcc (make CUDA=0, the default where there is none) adds to
#          the build: Boost.Context, whose fibers run the CUDA threads of the emulation (emu/) that
#          such a build compiles in
#   test   run's, and the tests': doctest, Boost.Context (the CUDA emulation's fibers), PyTorch (the
#          gradient cross-check), sentencepiece (data/prepare_text.py), Fashion-MNIST (a real data set)
#   check  test's, and clang with its sanitizer runtimes (the fuzzers), python3-venv
#          (build/venv, where tests/python_venv.sh installs the official safetensors and timm from
#          the Python registry) and torchvision (timm needs it beside Debian's torch)
#   tables run's, and Fashion-MNIST (the vision table) and sentencepiece (the language table's data)
#   bench  run's, and PyTorch with OpenBLAS, and Fashion-MNIST (the ViT's benchmark)
#   clang  clang, its OpenMP (libomp-14-dev) and its sanitizers' runtimes (libclang-rt-14-dev, for
#          make test-sanitize): added to the set when the host compiler is clang++ (make CXX=clang++)
#   arm64  test's, and what make check-arm64 needs: Debian's cross compiler for ARM64, qemu-user to
#          run its programs, and the ARM64 builds of Boost.Context and zlib (multiarch: the arm64
#          architecture is added to dpkg first)
# As root it runs apt-get; otherwise sudo; where neither works it says what to install and stops.
set -e
run="nlohmann-json3-dev libstb-dev zlib1g-dev python3-numpy python3-matplotlib"
test="$run doctest-dev libboost-context-dev python3-torch libopenblas0-pthread python3-sentencepiece dataset-fashion-mnist"
arm64="g++-aarch64-linux-gnu qemu-user libboost-context-dev:arm64 zlib1g-dev:arm64"
list=false
[ "${1:-}" = --list ] && list=true && shift
[ $# = 0 ] && set -- ""
needed=""
for set in "$@"; do
    case $set in
        run) needed="$needed $run" ;;
        without-cuda) needed="$needed libboost-context-dev" ;;
        test) needed="$needed $test" ;;
        check) needed="$needed $test clang libclang-rt-14-dev python3-venv python3-torchvision" ;;
        tables) needed="$needed $run dataset-fashion-mnist python3-sentencepiece" ;;
        bench) needed="$needed $run python3-torch libopenblas0-pthread dataset-fashion-mnist" ;;
        clang) needed="$needed clang libomp-14-dev libclang-rt-14-dev" ;;
        arm64) needed="$needed $test $arm64" ;;
        *) echo "usage: sh tools/install-deps.sh [--list] run|test|check|tables|bench|clang|arm64|without-cuda ..." >&2
           exit 2 ;;
    esac
done
if $list; then
    # shellcheck disable=SC2086  # the packages are words: one line of them
    echo $needed
    exit 0
fi
missing=""
for pkg in $needed; do
    case " $missing " in *" $pkg "*) continue ;; esac  # sets share packages: each is asked for once
    dpkg-query -W -f='${Status}' "$pkg" 2>/dev/null | grep -q "install ok installed" || missing="$missing $pkg"
done
[ -z "$missing" ] && exit 0
if ! command -v apt-get >/dev/null 2>&1; then
    echo "maskprior: error: missing packages:$missing, and no apt-get to install them (a Debian machine" \
        "is expected)" >&2
    exit 1
fi
echo "maskprior: installing Debian packages:$missing"
if [ "$(id -u)" = 0 ]; then
    SUDO=""
elif command -v sudo >/dev/null 2>&1 && sudo -n true 2>/dev/null; then
    SUDO="sudo -n"
else
    echo "maskprior: error: need root or passwordless sudo to install:$missing (apt-get install$missing)" >&2
    exit 1
fi
export DEBIAN_FRONTEND=noninteractive
case $missing in
    *:arm64*)  # packages of another architecture: dpkg must know it before apt-get can list them
        if ! dpkg --print-foreign-architectures | grep -qx arm64; then
            echo "maskprior: adding the arm64 architecture to dpkg (multiarch), for the ARM64 libraries"
            $SUDO dpkg --add-architecture arm64
        fi ;;
esac
$SUDO apt-get update -qq >/dev/null
$SUDO apt-get install -y -qq --no-install-recommends $missing >/dev/null
echo "maskprior: installed$missing"
