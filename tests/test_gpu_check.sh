#!/bin/sh
# tests/test_gpu_check.sh, make gpu-check-rehearsal: make gpu-check flown here without a GPU, through
# every stage in order, by the same driver (tests/gpu_check.py --rehearse: the emulated programs where
# they take seconds, stand-ins that sleep each step's estimate scaled down elsewhere), and checked:
#   - each tier's limits sum within its budget by the driver's own check (--plan), and a planted limit
#     past the budget makes it refuse to start, with its line, running nothing;
#   - the quick tier (stages a-d) and then stages e-i: every step reached, in order, its rows in the
#     return folder (GPU_CHECK_RETURN), which a device call brings back whole (at most 8 files of 16 MiB,
#     2 folders down, plain names; the logs archive at most 12 MiB, without checkpoints or binaries),
#     and the summary complete, as text and as JSON;
#   - a rehearsal stopped part way, by SIGTERM then SIGKILL, and one by SIGKILL alone: the rows that
#     finished are in the return folder, the step then running is named;
#   - a step that writes into the return folder (a planted 16 MiB + 1 file) fails the check and the
#     return folder's check; a planted 30 MiB log is cut so that the archive still fits.
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
# rows DIR: each row of DIR/summary.json as "step|status|name", one a line
rows() { $PY -c 'import json, sys
for r in json.load(open(sys.argv[1] + "/summary.json"))["rows"]: print("%s|%s|%s" % (r["step"], r["status"], r["name"]))' "$1"; }
# returns DIR: the return folder comes back whole, and its archive holds no checkpoint, data or binary
returns() {
    if $PY tests/gpu_check.py --check-return "$1" > "$tmp/return.out"; then ok "$1 comes back whole"
    else bad "$1 does not come back whole:"; cat "$tmp/return.out"; fi
    if tar -tzf "$1/logs.tar.gz" | grep -E '\.(safetensors|bin)$|(^|/)maskprior$' > "$tmp/archived.out"; then
        bad "the archive holds checkpoints, data or binaries:"; cat "$tmp/archived.out"
    else ok "the archive holds no checkpoint, data or binary"; fi
}
# reached DIR STAGES: every step of STAGES has a finished row in DIR's summary, in the plan's order
reached() {
    $PY - "$1" "$2" > "$tmp/reached.out" <<'EOF'
import json, sys
sys.path.insert(0, "tests")
import gpu_check_plan as plan
summary = json.load(open(sys.argv[1] + "/summary.json"))
planned = [s.key for s in plan.STEPS if s.stage in sys.argv[2]]
seen = [r["step"] for r in summary["rows"] if r["stage"] in sys.argv[2]]
order = [k for i, k in enumerate(seen) if k not in seen[:i]]
unfinished = [r["name"] for r in summary["rows"] if r["status"] in ("running", "not run", "did not finish", "FAILED")]
print("planned %s, reached %s, complete %s, unfinished %s" % (planned, order, summary["complete"], unfinished))
sys.exit(0 if order == planned and summary["complete"] and not unfinished else 1)
EOF
    if [ $? = 0 ]; then ok "every step of stages $2 reached, in order, and finished"
    else bad "stages $2:"; cat "$tmp/reached.out"; fi
}

echo "== the plan: each tier's limits within its budget; a planted limit past it refused"
for tier in "" --full "--stages i"; do
    $PY tests/gpu_check.py $tier --plan > "$tmp/plan.out"
    expect_rc "the plan of ${tier:-the quick tier}" $? 0
    expect "its budget check" "within the budget of" "$tmp/plan.out"
done
GPU_CHECK_RETURN=$tmp/refused GPU_CHECK_WORK=$tmp/work $PY tests/gpu_check.py --rehearse 0.05 \
    --limit gpu-cases=400 > "$tmp/refused.out" 2>&1
expect_rc "a step's limit past the quick tier's budget" $? 2
expect "the refusal names each stage's sum" "refused to start: the limits of stages abcd sum to 787 s (a 485," \
    "$tmp/refused.out"
rows "$tmp/refused" > "$tmp/refused.rows"
if [ "$(cat "$tmp/refused.rows")" = "budget|FAILED|budget" ]; then ok "nothing ran; the summary says why"
else bad "rows after a refusal:"; cat "$tmp/refused.rows"; fi

echo "== the quick tier (stages a-d), rehearsed"
GPU_CHECK_RETURN=$tmp/quick GPU_CHECK_WORK=$tmp/work $PY tests/gpu_check.py --rehearse 0.05 > "$tmp/quick.out" 2>&1
expect_rc "the rehearsal passes" $? 0
reached "$tmp/quick" abcd
returns "$tmp/quick"
expect "the summary as text" "verdict: rehearsal, not a GPU's verdict: switch the defaults" "$tmp/quick/summary.txt"
expect "the speed tables" "== dev/matmul (dev-matmul.txt)" "$tmp/quick/speed.txt"

echo "== stages e-i, rehearsed"
GPU_CHECK_RETURN=$tmp/full GPU_CHECK_WORK=$tmp/work $PY tests/gpu_check.py --stages efghi --rehearse 0.02 \
    > "$tmp/full.out" 2>&1
expect_rc "the rehearsal passes" $? 0
reached "$tmp/full" efghi
returns "$tmp/full"
expect "the Boolean table from the runs that finished" "| 2parity | mask | 2 |" "$tmp/full/tables.txt"

# stopped RUN SIGNALS...: a rehearsal of stages b and c into $tmp/RUN, sent SIGNALS (a second apart)
# once stage b's row has finished and the return folder's summary names stage c's first step running;
# sets rc
stopped() {
    name=$1; shift
    GPU_CHECK_RETURN=$tmp/$name GPU_CHECK_WORK=$tmp/work-$name $PY tests/gpu_check.py --stages bc \
        --rehearse 0.05 > "$tmp/$name.out" 2>&1 &
    pid=$!
    for _ in $(seq 200); do
        grep -q '| c | dev/attention_forward | running' "$tmp/$name/summary.txt" 2>/dev/null && break
        sleep 0.1
    done
    for sig in "$@"; do kill -s "$sig" $pid 2>/dev/null; sleep 1; done
    wait $pid
    rc=$?
}
echo "== stopped part way: SIGTERM, then SIGKILL"
stopped stopped TERM KILL
expect_rc "stopped by SIGTERM" $rc 143
rows "$tmp/stopped" > "$tmp/stopped.rows"
expect "the finished row came back" "bench|ok|speed vs PyTorch (--quick)" "$tmp/stopped.rows"
expect "the step it stopped" "|did not finish|" "$tmp/stopped.rows"
expect "the steps after it" "profile-graph|not run|" "$tmp/stopped.rows"
returns "$tmp/stopped"
echo "== stopped part way by SIGKILL alone"
stopped killed KILL
expect_rc "killed" $rc 137
rows "$tmp/killed" > "$tmp/killed.rows"
expect "the finished row came back" "bench|ok|speed vs PyTorch (--quick)" "$tmp/killed.rows"
expect "the step then running named" "|running|" "$tmp/killed.rows"

echo "== planted: a file written into the return folder, a log larger than the archive"
GPU_CHECK_RETURN=$tmp/planted GPU_CHECK_WORK=$tmp/work $PY tests/gpu_check.py --stages b --rehearse 0.01 \
    --plant return-file > "$tmp/planted.out" 2>&1
expect_rc "the check fails" $? 1
expect "its row" "| - | return folder | FAILED: planted.bin: 16.0 MiB, over the 16 MiB a file" "$tmp/planted/summary.txt"
if $PY tests/gpu_check.py --check-return "$tmp/planted" > /dev/null; then bad "the return folder's check passed it"
else ok "the return folder's check fails on it"; fi
GPU_CHECK_RETURN=$tmp/big GPU_CHECK_WORK=$tmp/work $PY tests/gpu_check.py --stages b --rehearse 0.01 \
    --plant big-log > "$tmp/big.out" 2>&1
expect_rc "the check passes" $? 0
returns "$tmp/big"
tar -xzOf "$tmp/big/logs.tar.gz" planted-big.log | head -1 > "$tmp/big.head"
expect "the log cut to fit" "bytes cut: the archive keeps" "$tmp/big.head"

[ $errors = 0 ] && echo "gpu-check rehearsal: every check held" || echo "gpu-check rehearsal: $errors checks FAILED"
[ $errors = 0 ]
