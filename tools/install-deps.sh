#!/bin/sh
# tools/install-deps.sh SET: installs the Debian packages that SET needs, when they are missing;
# the Makefile's targets call it first, each with the smallest set it needs:
#   run    the build and make run (the JSON and image-writing headers, zlib, the plots' matplotlib)
#   test   run's, and the tests': doctest, Boost.Context (the CUDA emulation's fibers), PyTorch (the
#          gradient cross-check), sentencepiece (data/prepare_text.py), Fashion-MNIST (a real data set)
#   check  test's, and clang with its sanitizer runtimes (the fuzzers), python3-venv
#          (build/venv, where tests/python_venv.sh installs the official safetensors and timm from
#          the Python registry) and torchvision (timm needs it beside Debian's torch)
#   tables run's, and Fashion-MNIST (the vision table) and sentencepiece (the language table's data)
#   bench  run's, and PyTorch with OpenBLAS, and Fashion-MNIST (the ViT's benchmark)
# As root it runs apt-get; otherwise sudo; where neither works it says what to install and stops.
set -e
run="nlohmann-json3-dev libstb-dev zlib1g-dev python3-numpy python3-matplotlib"
test="$run doctest-dev libboost-context-dev python3-torch libopenblas0-pthread python3-sentencepiece dataset-fashion-mnist"
case "${1:-}" in
    run) needed=$run ;;
    test) needed=$test ;;
    check) needed="$test clang libclang-rt-14-dev python3-venv python3-torchvision" ;;
    tables) needed="$run dataset-fashion-mnist python3-sentencepiece" ;;
    bench) needed="$run python3-torch libopenblas0-pthread dataset-fashion-mnist" ;;
    *) echo "usage: sh tools/install-deps.sh run|test|check|tables|bench" >&2; exit 2 ;;
esac
missing=""
for pkg in $needed; do
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
$SUDO apt-get update -qq >/dev/null
$SUDO apt-get install -y -qq --no-install-recommends $missing >/dev/null
echo "maskprior: installed$missing"
