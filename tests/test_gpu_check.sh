#!/bin/sh
# tests/test_gpu_check.sh, make gpu-check-rehearsal: make gpu-check flown here without a GPU, through
# every stage in order, by the same driver (tests/gpu_check.py --rehearse: the emulated programs where
# they take seconds, stand-ins that sleep each step's estimate scaled down elsewhere), and checked:
#   - the plan: each tier's limits within its budget by the driver's own check (--plan), the quick
#     tier's stages in the order a, c, d, b, within the call's deadline with the preflight and the
#     stop margin; a planted limit past the budget makes it refuse to start, running nothing;
#   - docs/gpu.md's device call (command, carry, timeout_s) is read out of the document: its carry is
#     what the preflight checks, its deadline its timeout_s, and it is the call flown below;
#   - the GPU cases: every case tests/unit_tests skips without a GPU is chosen, and none that it runs
#     (the name filter "*GPU*" took a CPU case: doctest's filters ignore case);
#   - the preflight as on the device (--preflight) against this machine's build: each binary's
#     settings and commit read from its --version, the native build and the missing dev/ programs
#     named with the make line that builds them, the missing GPU;
#   - the documented call flown (quick tier, under timeout_s): every step reached in order and
#     finished, the return folder within the device tool's limits, the summary complete;
#   - six faults planted at once, in the steps they strike: a stale binary (dev/attention_backward),
#     cuBLASLt turning every product down, a NaN evaluation in the --cuda-graph comparison, an
#     exception while profile-graph's outputs are read, a slow first CUDA start, a file written into
#     the return folder: every step reached, each row saying what it found, the verdict switching
#     what no fault touched and keeping what each touches;
#   - stages e-i with an exception while the first step's outputs are read and a NaN evaluation in
#     stage f: every later step reached, the summary complete, those rows FAILED;
#   - a step that does not finish at its limit run again in the second pass, inside the same call
#     (with a planted 30 MiB log, cut so that the archive fits); the GPU cases' runner cut at the
#     call's deadline while the emulated 400-step run goes on, none of its processes left (timeout's
#     process group and the run its case started among them);
#   - a rehearsal stopped by SIGTERM then SIGKILL (no process of it left), and one by SIGKILL alone:
#     the rows that finished are in the return folder, the step then running is named.
# Needs the binaries of make test (./maskprior, ./maskprior-emulated, tests/emulated_tests,
# tests/unit_tests, dev/*-emulated). Exit 0 when every check holds.
cd "$(dirname "$0")/.."
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
errors=0
PY=${MASKPRIOR_PYTHON:-python3}
ok() { echo "  ok: $1"; }
bad() { echo "  FAILED: $1"; errors=$((errors + 1)); }
# expect WHAT TEXT FILE: a line of FILE holds TEXT
expect() { if grep -q -F -- "$2" "$3"; then ok "$1"; else bad "$1: no line '$2' in $3:"; cat "$3"; fi; }
expect_rc() { if [ "$2" = "$3" ]; then ok "$1 (exit $2)"; else bad "$1: exit $2, wanted $3"; fi; }
# rows DIR: each row of DIR/summary.json as "step|status|name|detail|blocks|pass", one a line
rows() { $PY -c 'import json, sys
for r in json.load(open(sys.argv[1] + "/summary.json"))["rows"]:
    print("%s|%s|%s|%s|%s|%s" % (r["step"], r["status"], r["name"], r["detail"], ",".join(r["blocks"]),
                                 r.get("pass", "")))' "$1"; }
# returns DIR: the return folder comes back whole, and its archive holds no checkpoint, data or binary
returns() {
    if $PY tests/gpu_check.py --check-return "$1" > "$tmp/return.out"; then ok "$1 comes back whole"
    else bad "$1 does not come back whole:"; cat "$tmp/return.out"; fi
    if tar -tzf "$1/logs.tar.gz" | grep -E '\.(safetensors|bin)$|(^|/)maskprior$' > "$tmp/archived.out"; then
        bad "the archive holds checkpoints, data or binaries:"; cat "$tmp/archived.out"
    else ok "the archive holds no checkpoint, data or binary"; fi
}
# reached DIR STEPS [UNFINISHED]: every step of STEPS (stage letters, or "keys:" and step keys) has a
# row in DIR's summary, in the plan's order, the summary is complete, and the steps whose last pass
# did not pass are the UNFINISHED (step keys, a comma list)
reached() {
    $PY - "$1" "$2" "${3:-}" > "$tmp/reached.out" <<'EOF'
import json, sys
sys.path.insert(0, "tests")
import gpu_check_plan as plan
summary = json.load(open(sys.argv[1] + "/summary.json"))
keys = sys.argv[2][5:].split(",") if sys.argv[2].startswith("keys:") else None
planned = [s.key for s in plan.STEPS if (s.key in keys if keys else s.stage in sys.argv[2])]
again = {r["step"] for r in summary["rows"] if r.get("pass") == 2}
latest = [r for r in summary["rows"] if r["step"] in planned and (r["step"] not in again or r.get("pass") == 2)]
seen = [r["step"] for r in summary["rows"] if r["step"] in planned]
order = [k for i, k in enumerate(seen) if k not in seen[:i]]
unfinished = sorted({r["step"] for r in latest if r["status"] in ("running", "not run", "did not finish", "FAILED")})
wanted = sorted(k for k in sys.argv[3].split(",") if k)
print("planned %s, reached %s, complete %s, unfinished %s (wanted %s)" % (planned, order, summary["complete"],
                                                                          unfinished, wanted))
sys.exit(0 if order == planned and summary["complete"] and unfinished == wanted else 1)
EOF
    if [ $? = 0 ]; then ok "every step of $2 reached, in order${3:+, all but $3 passing}"
    else bad "$2:"; cat "$tmp/reached.out"; fi
}

echo "== the plan: each tier's limits within its budget, the quick tier's order; a limit past it refused"
for tier in "" --full "--stages i"; do
    $PY tests/gpu_check.py $tier --plan > "$tmp/plan.out"
    expect_rc "the plan of ${tier:-the quick tier}" $? 0
    expect "its budget check" "within the budget of" "$tmp/plan.out"
done
$PY tests/gpu_check.py --plan --deadline 600 > "$tmp/plan.out"
expect "the quick tier's order: what decides first, speed last" "the limits of stages acdb sum to" "$tmp/plan.out"
expect "within the call's deadline" "s stop margin: 597 s, within the call's deadline of 600 s" "$tmp/plan.out"
GPU_CHECK_RETURN=$tmp/refused GPU_CHECK_WORK=$tmp/work $PY tests/gpu_check.py --rehearse 0.05 \
    --limit gpu-cases=400 > "$tmp/refused.out" 2>&1
expect_rc "a step's limit past the quick tier's budget" $? 2
expect "the refusal names each stage's sum" "refused to start: the limits of stages acdb sum to 792 s (a 510," \
    "$tmp/refused.out"
rows "$tmp/refused" > "$tmp/refused.rows"
if [ "$(cut -d'|' -f1-3 "$tmp/refused.rows")" = "budget|FAILED|budget" ]; then ok "nothing ran; the summary says why"
else bad "rows after a refusal:"; cat "$tmp/refused.rows"; fi

echo "== docs/gpu.md's device call: read out of the document, and flown below"
command=$(sed -n 's/^    command:   //p' docs/gpu.md | head -1)
carry=$(sed -n 's/^    carry:     //p' docs/gpu.md | head -1)
timeout_s=$(sed -n 's/^    timeout_s: //p' docs/gpu.md | head -1)
carried=$($PY -c 'import sys; sys.path.insert(0, "tests"); import gpu_check_preflight as p
print(", ".join(p.CARRIED))')
if [ "$carry" = "$carried" ]; then ok "its carry is what the preflight checks ($carry)"
else bad "its carry '$carry' is not what the preflight checks: '$carried'"; fi
case $command in
    "GPU_CHECK_RETURN=\$OUT python3 tests/gpu_check.py --deadline $timeout_s") ok "its command: $command" ;;
    *) bad "its command '$command' is not the quick tier with --deadline $timeout_s (its timeout_s)" ;;
esac

echo "== the GPU cases: every case tests/unit_tests skips without a GPU, and none that it runs"
./tests/unit_tests --list-test-cases --reporters=xml --no-skip=true > "$tmp/unit.xml"
sh tests/gpu_tests_isolated.sh --list --gpu-cases tests/emulated_tests > "$tmp/chosen.out" 2>&1
$PY - "$tmp/unit.xml" "$tmp/chosen.out" > "$tmp/cases.out" <<'EOF'
import re, sys
from xml.sax.saxutils import unescape
listed = re.findall(r'<TestCase name="(.*?)" filename="[^"]*" line="\d+" skipped="(true|false)"/>',
                    open(sys.argv[1]).read())
unit = [(unescape(n, {"&quot;": '"', "&apos;": "'"}), s) for n, s in listed]
chosen = {line.split("\t", 1)[1] for line in open(sys.argv[2]).read().split("\n") if "\t" in line}
# skipped here for another reason than the GPU: the large case (make test-large), the build without CUDA's
other = ("MASKPRIOR_LARGE_TESTS", "the build without CUDA trains on the CPU")
gpu = {n for n, s in unit if s == "true" and not any(o in n for o in other)}
cpu = {n for n, s in unit if s == "false"}
print("%d GPU cases in tests/unit_tests, %d chosen, %d CPU cases" % (len(gpu), len(chosen), len(cpu)))
for n in sorted(cpu & chosen):
    print("a CPU case chosen: " + n)
for n in sorted(gpu - chosen):
    print("a GPU case not chosen: " + n)
sys.exit(1 if cpu & chosen or gpu - chosen or not gpu else 0)
EOF
if [ $? = 0 ]; then ok "$(head -1 "$tmp/cases.out"): every GPU case, no CPU case"
else bad "the GPU cases:"; cat "$tmp/cases.out"; fi
if grep -q "bench_gpu.py" "$tmp/chosen.out"; then bad "tools/bench_gpu.py's case (a CPU case) chosen"
else ok "tools/bench_gpu.py's case, which '*GPU*' took, not chosen"; fi

echo "== the preflight as on the device, against this machine's build (no GPU here)"
GPU_CHECK_WORK=$tmp/work $PY tests/gpu_check.py --preflight > "$tmp/preflight.out" 2>&1
expect_rc "it fails here" $? 1
expect "no GPU" "-> GPU: FAILED: nvidia-smi finds none" "$tmp/preflight.out"
march=$(./maskprior --version | sed -n 's/.*HOST_MARCH=\([^ ]*\).*/\1/p')
if [ "$march" = x86-64-v3 ]; then ok "./maskprior is built for x86-64-v3 here: nothing to name"
else expect "./maskprior's HOST_MARCH named" "HOST_MARCH=$march, not x86-64-v3 (rebuild with \`make maskprior" \
    "$tmp/preflight.out"; fi
expect "its commit read from the binary" "commit $(./maskprior --version | head -1 | cut -d' ' -f2)" \
    "$tmp/preflight.out"
if [ -x dev/matmul ]; then ok "dev/matmul is built here"
else expect "a missing binary names the make line" "-> binary dev/matmul: FAILED: missing: build it where nvcc is\
 with \`make maskprior tests/unit_tests dev ARCH=90 HOST_MARCH=x86-64-v3\`" "$tmp/preflight.out"; fi

echo "== the documented call, flown on the emulation (its command, --rehearse 0.02, under its timeout_s)"
OUT=$tmp/quick GPU_CHECK_WORK=$tmp/work timeout "$timeout_s" sh -c "$command --rehearse 0.02" > "$tmp/quick.out" 2>&1
expect_rc "the rehearsal passes" $? 0
reached "$tmp/quick" acdb
rows "$tmp/quick" > "$tmp/quick.rows"
if grep "|skipped|" "$tmp/quick.rows"; then bad "a step skipped in the rehearsal"; else ok "no step skipped"; fi
returns "$tmp/quick"
expect "the summary as text" "verdict: rehearsal, not a GPU's verdict: switch the defaults to attention kernel 3,\
 --fast-kernels, --matmul-kernel 2, --cuda-graph: every row" "$tmp/quick/summary.txt"
expect "the binaries' commit in the summary" "commit $(./maskprior-emulated --version | head -1 | cut -d' ' -f2)" \
    "$tmp/quick/summary.txt"
expect "the speed tables" "== dev/matmul (dev-matmul.txt)" "$tmp/quick/speed.txt"

echo "== six faults planted at once, in the steps they strike"
steps=short-arithmetic,make-run-flags,dev-attention_backward,dev-matmul,profile-graph
GPU_CHECK_RETURN=$tmp/faults GPU_CHECK_WORK=$tmp/work $PY tests/gpu_check.py --steps $steps --rehearse 0.02 \
    --deadline 600 --plant stale:dev/attention_backward --plant cublaslt --plant nan-eval:make-run-flags@cuda-graph \
    --plant read-error:profile-graph --plant slow-start --plant return-file --limit short-arithmetic=3 \
    > "$tmp/faults.out" 2>&1
expect_rc "the check fails" $? 1
reached "$tmp/faults" "keys:$steps" "dev-attention_backward,dev-matmul,make-run-flags,profile-graph"
rows "$tmp/faults" > "$tmp/faults.rows"
expect "the stale binary" "preflight|FAILED|binary dev/attention_backward|built at 0000000" "$tmp/faults.rows"
expect "what it runs, blocked" "dev-attention_backward|not run|dev/attention_backward|blocked:" "$tmp/faults.rows"
expect "the slow first start, in the warm-up" "preflight|ok|CUDA warm-up|the first CUDA process" "$tmp/faults.rows"
expect "the first step within its 3 s limit after it" "short-arithmetic|ok|" "$tmp/faults.rows"
expect "the lab notices the fallback" "dev-matmul|FAILED|dev/matmul|cuBLASLt turned down" "$tmp/faults.rows"
expect "matmul 2's comparison" "|make run's model, GPU vs CPU: --matmul-kernel 2|mask: cuBLASLt turned products\
 down" "$tmp/faults.rows"
expect "the NaN, printed as such" "|make run's model, GPU vs CPU: --cuda-graph|mask: step 4: loss null on the GPU" \
    "$tmp/faults.rows"
expect "the exception while outputs are read" "profile-graph|FAILED|profile: the fastest, matmul 2, as one CUDA\
 graph|running it or reading its outputs raised RuntimeError: planted" "$tmp/faults.rows"
expect "the verdict: switch what no fault touched" "verdict: rehearsal, not a GPU's verdict: switch the defaults to\
 --fast-kernels: every row that checks it passed" "$tmp/faults/summary.txt"
expect "keep attention 1: the stale lab binary" "keep attention kernel 1: binary dev/attention_backward" \
    "$tmp/faults/summary.txt"
expect "keep matmul 1: the fallback" "keep matmul kernel 1: make run's model, GPU vs CPU: --matmul-kernel 2;\
 dev/matmul;" "$tmp/faults/summary.txt"
expect "keep call by call: the NaN" "keep call by call: make run's model, GPU vs CPU: --cuda-graph;" \
    "$tmp/faults/summary.txt"
expect "the exception blocks what the step's absence leaves open: nothing" "failed, blocking no switch: profile:\
 the fastest, matmul 2, as one CUDA graph" "$tmp/faults/summary.txt"
expect "a file a step wrote into the return folder" "| - | return folder | FAILED: planted.bin: 16.0 MiB, over the\
 16 MiB a file" "$tmp/faults/summary.txt"
if $PY tests/gpu_check.py --check-return "$tmp/faults" > /dev/null; then bad "the return folder's check passed it"
else ok "the return folder's check fails on it"; fi
seconds=$(sed -n 's/.*CUDA warm-up: ok: the first CUDA process (a tiny run of one step) took \([0-9]*\)\..*/\1/p' \
    "$tmp/faults.out")
if [ "${seconds:-0}" -ge 4 ]; then ok "the warm-up took the slow start ($seconds s)"
else bad "the warm-up took ${seconds:-no} s, not the planted start"; fi

echo "== stages e-i: an exception while the first step's outputs are read, a NaN evaluation in stage f"
GPU_CHECK_RETURN=$tmp/full GPU_CHECK_WORK=$tmp/work $PY tests/gpu_check.py --stages efghi --rehearse 0.02 \
    --plant read-error:boolean --plant nan-eval:arithmetic > "$tmp/full.out" 2>&1
expect_rc "the check fails" $? 1
reached "$tmp/full" efghi boolean,arithmetic
returns "$tmp/full"
rows "$tmp/full" > "$tmp/full.rows"
expect "the first step's row" "boolean|FAILED|Boolean table, GOTU's size|running it or reading its outputs raised\
 RuntimeError: planted: reading" "$tmp/full.rows"
expect "the NaN as null" "arithmetic|FAILED|add3-default at Lee et al.'s size|not a number: seq_acc; seq_acc null," \
    "$tmp/full.rows"

echo "== the second pass inside the call, and a step cut by the call's deadline"
GPU_CHECK_RETURN=$tmp/second GPU_CHECK_WORK=$tmp/work $PY tests/gpu_check.py --stages b --rehearse 0.02 \
    --limit bench=60 --deadline 200 --plant big-log > "$tmp/second.out" 2>&1
expect_rc "the check passes" $? 0
rows "$tmp/second" > "$tmp/second.rows"
expect "the first pass did not finish" "bench|did not finish|speed vs PyTorch (--quick)|stopped at its 1.2 s limit" \
    "$tmp/second.rows"
expect "the second finished" "bench|ok|speed vs PyTorch (--quick)|rehearsal: a stand-in of 2.2 s for the estimated\
 110 s|matmul 2|2" "$tmp/second.rows"
returns "$tmp/second"
tar -xzOf "$tmp/second/logs.tar.gz" planted-big.log | head -1 > "$tmp/big.head"
expect "a planted 30 MiB log cut to fit" "bytes cut: the archive keeps" "$tmp/big.head"
$PY - "$tmp/cut" > "$tmp/cut.out" 2>&1 <<'EOF'
# a step whose limit reaches past the call's deadline: the GPU cases' runner on the emulated 400-step
# run (its case runs ./maskprior-emulated, under timeout's process group), cut 2 s in, and then no
# process it started is left
import os, sys, time
sys.path.insert(0, "tests")
os.environ.update(GPU_CHECK_WORK=sys.argv[1], GPU_CHECK_STOP_MARK=sys.argv[1])
os.makedirs(sys.argv[1])
import gpu_check, gpu_check_plan as plan
opt = gpu_check.argparse.Namespace(rehearse=1, plant=[], deadline=gpu_check.STOP_MARGIN + 2)
check = gpu_check.Check(opt, [], 0, "quick")
check.bad = set()
runner = ["sh", "tests/gpu_tests_isolated.sh", "--each", "60", "./tests/emulated_tests", "a short GPU training run*"]
step = plan.Step("a", "slow", "the 400-step run", 60, 60, "", lambda c: [c.failed("the 400-step run", c.run(
    runner, "slow.log"), "slow.log")], [], [plan.DEFAULTS])
start = time.time()
check.fly(step)
def marked(pid):
    try:
        environment = open("/proc/%s/environ" % pid, "rb").read().split(b"\0")
        return ("GPU_CHECK_STOP_MARK=" + sys.argv[1]).encode() in environment
    except OSError:
        return False
left = [pid for pid in os.listdir("/proc") if pid.isdigit() and int(pid) != os.getpid() and marked(pid)]
ran = open(os.path.join(sys.argv[1], "slow.log")).read()
print("%.0f s; %s; the runner started its part: %s; processes left: %s" % (
    time.time() - start, check.rows[-1]["detail"], "in 1 part," in ran, left or "none"))
EOF
expect "cut at the deadline" "s before the call's deadline (--deadline), with" "$tmp/cut.out"
expect "none of its processes left, timeout's group and the run it started among them" \
    "(slow.log); the runner started its part: True; processes left: none" "$tmp/cut.out"

# marked RUN: the processes whose environment carries RUN's mark, a pid a line
marked() {
    for f in /proc/[0-9]*/environ; do
        { tr '\0' '\n' < "$f"; } 2>/dev/null | grep -q -x "GPU_CHECK_STOP_MARK=$tmp/$1" && basename "${f%/environ}"
    done
}
# stopped RUN STEPS WHEN SIGNALS...: a rehearsal of STEPS into $tmp/RUN, sent SIGNALS (a second apart)
# once the return folder's summary names the step WHEN ("running:NAME") as running; sets rc
stopped() {
    name=$1 steps=$2 when=$3; shift 3
    GPU_CHECK_STOP_MARK=$tmp/$name GPU_CHECK_RETURN=$tmp/$name GPU_CHECK_WORK=$tmp/work-$name $PY tests/gpu_check.py \
        --steps "$steps" --rehearse 0.05 > "$tmp/$name.out" 2>&1 &
    pid=$!
    for _ in $(seq 300); do
        grep -q "| ${when#running:} | running" "$tmp/$name/summary.txt" 2>/dev/null && break
        sleep 0.1
    done
    for sig in "$@"; do kill -s "$sig" $pid 2>/dev/null; sleep 1; done
    wait $pid
    rc=$?
}
echo "== stopped part way: SIGTERM, then SIGKILL"
stopped stopped bench,bench-full "running:speed vs PyTorch (--quick)" TERM KILL
expect_rc "stopped by SIGTERM" $rc 143
rows "$tmp/stopped" > "$tmp/stopped.rows"
expect "the finished rows came back" "preflight|ok|CUDA warm-up" "$tmp/stopped.rows"
expect "the step it stopped" "bench|did not finish|speed vs PyTorch (--quick)|the check was stopped (SIGTERM)" \
    "$tmp/stopped.rows"
expect "the steps after it" "bench-full|not run|" "$tmp/stopped.rows"
if [ -z "$(marked stopped)" ]; then ok "no process of it left"
else bad "processes left: $(marked stopped)"; fi
returns "$tmp/stopped"
echo "== stopped by SIGKILL alone"
stopped killed bench "running:speed vs PyTorch (--quick)" KILL
expect_rc "killed" $rc 137
rows "$tmp/killed" > "$tmp/killed.rows"
expect "the preflight's rows came back" "preflight|ok|CUDA warm-up" "$tmp/killed.rows"
expect "the step then running named" "bench|running|" "$tmp/killed.rows"

[ $errors = 0 ] && echo "gpu-check rehearsal: every check held" || echo "gpu-check rehearsal: $errors checks FAILED"
[ $errors = 0 ]
