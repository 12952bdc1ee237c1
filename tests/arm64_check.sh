#!/bin/sh
# tests/arm64_check.sh (make check-arm64): the program on ARM64, on a machine without one. Debian's
# cross compiler builds a copy of the tree without CUDA in build/arm64/tree (make CUDA=0
# CXX=aarch64-linux-gnu-g++: ./maskprior and tests/unit_tests, the CUDA code on the emulation,
# armv8-a's 128-bit NEON vectors); qemu-aarch64 runs its unit tests (their command-line cases run
# the ARM64 ./maskprior through qemu as well; the GPU cases skip, as in every build without CUDA)
# and a short run of each task family, Boolean, arithmetic, images (Fashion-MNIST) and language
# (the tests' text as bytes, with the window mask and with the ALiBi-shaped one), whose log.jsonl
# and checkpoint tensors must be byte for byte those of the same runs of this machine's
# ./maskprior; but for the ALiBi-shaped mask's, which glibc's log1pf makes differ in the last bits
# (docs/speed.md, "Across architectures"): its log.jsonl must agree to 1e-5, relatively, and the
# check prints by how much it differs. qemu runs the ARM64 code at about a hundredth of this CPU's
# speed, so the unit tests leave out their command-line cases and run in two halves at once; they
# also leave out the cases that set two or three threads, and everything runs at one thread.
# ARM64_CXX, QEMU: another cross compiler, another qemu command.
# Exit 0 when the build, the unit tests and every run pass and every run's bytes match; 1 otherwise.
set -u
cd "$(dirname "$0")/.." || exit 1
start=$(date +%s)
cross=${ARM64_CXX:-aarch64-linux-gnu-g++}
qemu=${QEMU:-qemu-aarch64 -L /usr/aarch64-linux-gnu}
python=${MASKPRIOR_PYTHON:-/usr/bin/python3}
work=build/arm64
for tool in "$cross" "${qemu%% *}"; do
    command -v "$tool" > /dev/null || { echo "arm64 check: FAILED: no $tool (sh tools/install-deps.sh arm64)"; exit 1; }
done
[ -x ./maskprior ] || { echo "arm64 check: FAILED: no ./maskprior to compare with (make maskprior)"; exit 1; }
# one thread: under this machine's qemu-user no program with two OpenMP threads finishes (not even
# a ten-line one with one parallel loop), and the results are the same bits at any count
export OMP_NUM_THREADS=1 OMP_WAIT_POLICY=passive
failed=0

# the working tree's sources, committed or not, without what git ignores; -p keeps their times,
# so that a second check rebuilds only what changed
mkdir -p "$work/tree"
git ls-files -z --cached --others --exclude-standard | xargs -0 cp -p --parents -t "$work/tree"
echo "arm64 check: building ./maskprior and tests/unit_tests with $cross (make CUDA=0), in $work/tree"
if ! make -s -C "$work/tree" -j2 CUDA=0 CXX="$cross" maskprior tests/unit_tests > "$work/build.log" 2>&1; then
    echo "arm64 check: FAILED: the ARM64 build:"; tail -5 "$work/build.log"; exit 1
fi
echo "arm64 check: built in $(($(date +%s) - start)) s: $($qemu "$work/tree/maskprior" --version | tail -1)"

# The unit tests under qemu, but for the command-line cases: each of them runs ./maskprior, which
# under qemu takes half a minute where it takes a tenth of a second here (a Boolean run evaluates
# the whole cube), an hour or more in all. They are the files of command-line cases and the
# command-line cases of the other files; the short runs below are this check's command line. The
# rest run in two halves at once, one a core: the cases in one seeded random order (so that each
# half gets slow and quick ones), the first half in one process and the second in another.
CLI_FILES="*test_cli*.cu,*test_torch.cu"
CLI_CASES="--ema*,--drop-path and --ema*,mixing flags*,mixing: a short CPU run*,mixing: --resume*"
CLI_CASES="$CLI_CASES,image tasks: --randaugment*"
CLI_CASES="$CLI_CASES,the wrong-prior and mask-speed flags*,a wrong prior and a faster mask*"
# and the cases that set two or three threads (the thread-count checks, which make test runs here)
THREAD_CASES="fast CPU matmul*,fast CPU attention*,fast CPU layernorm*,gradient norm on the CPU*"
THREAD_CASES="$THREAD_CASES,a model wide enough to use the threads*"
tests_start=$(date +%s)
unit_tests() {
    (cd "$work/tree" && MASKPRIOR_BINARY="$qemu ./maskprior" $qemu ./tests/unit_tests \
        --no-intro=true -sfe="$CLI_FILES" -tce="$CLI_CASES,$THREAD_CASES" --order-by=rand --rand-seed=1 "$@")
}
cases=$(unit_tests --count | sed -n 's/.*passing the current filters: *\([0-9]*\).*/\1/p')
half=$(((${cases:-0} + 1) / 2))
unit_tests --first=1 --last=$half --duration=true > "$work/unit_tests.1.log" 2>&1 &
first_half=$!
unit_tests --first=$((half + 1)) --duration=true > "$work/unit_tests.2.log" 2>&1
tests_rc=$?
wait $first_half || tests_rc=1
# the cases each half ran (--duration: a line "SECONDS s: NAME" each; doctest's own summary counts
# the other half's cases as passed), and the failed ones ("test cases: N | P passed | F failed | ...")
ran=$(cat "$work/unit_tests.1.log" "$work/unit_tests.2.log" | grep -c '^[0-9.]* s: ')
failures=$(grep -h "test cases:" "$work/unit_tests.1.log" "$work/unit_tests.2.log" | tr -d '|' |
    awk '{ f += $7 } END { print f + 0 }')
counts="$ran test cases ran, $failures failed"
if [ "$tests_rc" = 0 ] && [ "${cases:-0}" -gt 0 ]; then
    echo "arm64 check: the unit tests under qemu, in $(($(date +%s) - tests_start)) s: $counts" \
         "(the command-line cases and those that set the thread count left out)"
else
    echo "arm64 check: FAILED: the unit tests under qemu ($counts):"
    grep -h -B2 -A6 "ERROR" "$work/unit_tests.1.log" "$work/unit_tests.2.log" | head -40
    failed=1
fi

# A short run of each task family, here and under qemu, with the same flags
rm -rf "$work/runs" && mkdir -p "$work/runs/x86-64" "$work/runs/arm64"
text="$work/runs/tiny-text"
"$python" data/prepare_text.py --input tests/fixtures/text/tiny.txt --out "$text" --tokenizer bytes \
    > "$work/runs/tiny-text.log" 2>&1 || { echo "arm64 check: FAILED: data/prepare_text.py"; exit 1; }
SMALL="--width 16 --layers 1 --heads 2 --head-size 8 --mlp 16 --batch 32"
LM="--task lm --data-dir $text --seq-len 16 --eval-windows 8"
# a safetensors file's tensor bytes: what follows its 8-byte header length and its JSON header
tensors() { tail -c +$((9 + $(od -An -t u8 -N 8 "$1" | tr -d ' '))) "$1"; }
# close X86_LOG ARM_LOG: every number of the two log.jsonl files within 1e-5 of each other,
# relatively (the rest the same); prints the largest relative difference
close() {
    "$python" - "$1" "$2" <<'EOF'
import json, sys
a, b = ([json.loads(line) for line in open(path)] for path in sys.argv[1:3])
worst = 0.0
def walk(x, y):
    global worst
    if isinstance(x, (int, float)) and isinstance(y, (int, float)) and not isinstance(x, bool):
        worst = max(worst, abs(x - y) / max(abs(x), abs(y), 1e-30))
    elif isinstance(x, list) and isinstance(y, list) and len(x) == len(y):
        for u, v in zip(x, y): walk(u, v)
    elif isinstance(x, dict) and isinstance(y, dict) and x.keys() == y.keys():
        for k in x: walk(x[k], y[k])
    elif x != y:
        worst = float("inf")
walk(a, b) if len(a) == len(b) else walk(0, 1e300)
print("%.1e" % worst)
sys.exit(0 if worst <= 1e-5 else 1)
EOF
}
# NAME|same or close|FLAGS: same: the same bytes; close: within 1e-5, as said at the top
while IFS='|' read -r name match flags; do
    x86="$work/runs/x86-64/$name" arm="$work/runs/arm64/$name"
    run_start=$(date +%s)
    # shellcheck disable=SC2086  # flags are words
    if ! ./maskprior $flags --device cpu --out "$x86" > "$x86.log" 2>&1 ||
       ! $qemu "$work/tree/maskprior" $flags --device cpu --out "$arm" > "$arm.log" 2>&1; then
        echo "arm64 check: FAILED: the $name run:"; tail -3 "$x86.log" "$arm.log"; failed=1; continue
    fi
    tensors "$x86/model.safetensors" > "$x86.bin"
    tensors "$arm/model.safetensors" > "$arm.bin"
    what="$name ($(echo $flags | cut -d' ' -f2), $(wc -l < "$arm/log.jsonl") evaluations, $(($(date +%s) - run_start)) s)"
    if cmp -s "$x86/log.jsonl" "$arm/log.jsonl" && cmp -s "$x86.bin" "$arm.bin"; then
        echo "arm64 check: $what: the same log.jsonl and checkpoint tensors on both"
    elif [ "$match" = close ] && worst=$(close "$x86/log.jsonl" "$arm/log.jsonl"); then
        echo "arm64 check: $what: log.jsonl the same to $worst, relatively (glibc's log1pf: docs/speed.md)"
    else
        echo "arm64 check: FAILED: $name: ARM64's run differs from x86-64's:"
        diff "$x86/log.jsonl" "$arm/log.jsonl" | head -4 | cut -c1-200
        cmp "$x86.bin" "$arm.bin"
        failed=1
    fi
done <<EOF
maj3|same|--task maj3 --init mask --seed 1 --steps 60 --eval-every 30
add3|same|--task add3 --init mask --max-test 64 $SMALL --steps 60 --eval-every 30
fashion-mnist|same|--task fashion-mnist --patch 7 --init impulse $SMALL --steps 20 --eval-every 10
language|same|$LM --init mask $SMALL --steps 60 --eval-every 30
language-alibi|close|$LM --init mask --mask-prior alibi $SMALL --steps 60 --eval-every 30
EOF
echo "arm64 check: $([ $failed = 0 ] && echo passed || echo FAILED) in $(($(date +%s) - start)) s"
exit $failed
