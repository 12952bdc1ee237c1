#!/bin/sh
# tests/test_ptxas_report.sh: dev/ptxas-report.txt names every kernel main.cu's build compiles, and
# no other (tests/check_ptxas_report.py), and the checker catches a stale report: a copy of the
# report without one kernel's line, and one with a name no kernel has, must each fail, naming
# it; and on a made-up tree it must ask for the kernels nvcc compiles and not for those only the
# emulation does, nor for one in a comment. No nvcc: make ptxas-report regenerates the report.
# Exit 0 when the real report passes and every plant is caught, 1 otherwise.
set -u
cd "$(dirname "$0")/.." || exit 1
python=${MASKPRIOR_PYTHON:-/usr/bin/python3}
[ -x "$python" ] || python=python3
work=$(mktemp -d "${TMPDIR:-/tmp}/maskprior-ptxas-XXXXXX")
trap 'rm -rf "$work"' EXIT
failed=0

if "$python" tests/check_ptxas_report.py > "$work/real.out" 2>&1; then
    echo "ptxas report check: the real report: $(cat "$work/real.out")"
else
    echo "ptxas report check: FAILED: the real report: $(cat "$work/real.out")"
    failed=1
fi

# caught NAME TOKEN [ARGS...]: the checker run with ARGS must exit 1, naming TOKEN and the command
caught() {
    name=$1 token=$2
    shift 2
    "$python" tests/check_ptxas_report.py "$@" > "$work/plant.out" 2>&1
    rc=$?
    if [ "$rc" = 1 ] && grep -q -F -- "$token" "$work/plant.out" && grep -q -F "make ptxas-report" "$work/plant.out"; then
        echo "ptxas report check: planted $name: caught"
    else
        echo "ptxas report check: FAILED: planted $name ($token) was not caught (exit $rc):"
        sed 's/^/    /' "$work/plant.out"
        failed=1
    fi
}
grep -v '^attention_forward_kernel3 ' dev/ptxas-report.txt > "$work/missing.txt"
caught "a kernel's line removed" "lacks attention_forward_kernel3 (attention/flash.cuh)" --report "$work/missing.txt"
{ cat dev/ptxas-report.txt; echo "attention_forward_kernel0    40      0         0         0      0"; } > "$work/extra.txt"
caught "a kernel that does not exist" "names attention_forward_kernel0, which no kernel has" --report "$work/extra.txt"

# a made-up tree: main.cu includes k.cuh, which holds one kernel for nvcc and one for the emulation
mkdir "$work/tree" "$work/tree/dev"
printf '#include "k.cuh"\n__global__ void plain_kernel1(float* x) {}\n' > "$work/tree/main.cu"
cat > "$work/tree/k.cuh" <<'EOF'
#ifdef MASKPRIOR_CUDA_EMULATION  // the emulation alone
__global__ void emulated_kernel1(float* x) {}
#else
__global__ void __launch_bounds__(128)
nvcc_kernel1(float* x) {}
#endif
// __global__ void commented_kernel1(float* x) {}
EOF
printf 'kernel regs stack st ld smem\nplain_kernel1 1 0 0 0 0\nnvcc_kernel1 1 0 0 0 0\n' > "$work/tree/dev/ptxas-report.txt"
if "$python" tests/check_ptxas_report.py --root "$work/tree" > "$work/tree.out" 2>&1; then
    echo "ptxas report check: a made-up tree: the kernels nvcc compiles, none but those"
else
    echo "ptxas report check: FAILED: on a made-up tree: $(cat "$work/tree.out")"
    failed=1
fi
grep -v '^nvcc_kernel1 ' "$work/tree/dev/ptxas-report.txt" > "$work/tree-missing.txt"
caught "a kernel after __launch_bounds__ removed" "lacks nvcc_kernel1 (k.cuh)" --root "$work/tree" \
    --report "$work/tree-missing.txt"
exit $failed
