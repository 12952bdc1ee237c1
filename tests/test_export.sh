#!/bin/sh
# tests/test_export.sh nanogpt | timm: tools/export.py's state dicts in the models they are for
# (tests/test_export.py says what it checks). nanogpt needs nothing beyond Debian's torch
# (/usr/bin/python3, or $MASKPRIOR_PYTHON); timm is installed from the Python registry into
# build/venv (tests/python_venv.sh), beside Debian's torch and torchvision. The binary is
# $MASKPRIOR_BINARY (default ./maskprior). Exit 0 passed, 1 failed, 77 skipped (no binary; timm:
# no python3-torchvision, or the registry cannot be reached).
cd "$(dirname "$0")/.." || exit 1
binary=${MASKPRIOR_BINARY:-./maskprior}
case ${1:-} in
    nanogpt) python=${MASKPRIOR_PYTHON:-/usr/bin/python3} ;;
    timm)
        if ! /usr/bin/python3 -c "import torchvision" 2>/dev/null; then
            echo "export test (timm): skipped (no torchvision for Debian's torch: apt-get install python3-torchvision)"
            exit 77
        fi
        python=$(sh tests/python_venv.sh timm==1.0.31 2>&1) || {
            status=$?
            echo "export test (timm): $python"
            exit "$status"
        } ;;
    *) echo "usage: sh tests/test_export.sh nanogpt|timm" >&2; exit 2 ;;
esac
if [ ! -x "$binary" ]; then
    echo "export test ($1): skipped (no binary $binary: make, or set MASKPRIOR_BINARY)"
    exit 77
fi
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
"$python" tests/test_export.py "$1" "$binary" "$tmp"
