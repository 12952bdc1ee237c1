#!/bin/sh
# tests/test_faults.sh [--timed N]: a run survives kill -9 anywhere, and a stop signal (SIGTERM,
# SIGINT, SIGUSR1: run/signals.h) anywhere, and --continue ends it exactly as if nothing had
# happened. For each task family (a Boolean task, an arithmetic task, a language model, a ViT on
# a slice of Fashion-MNIST; each on the CPU, small, with a checkpoint every few steps):
#   1. the run uninterrupted;
#   2. the same run killed with SIGKILL at exact points (the test-only hook MASKPRIOR_KILL_AT,
#      run/atomic_file.h): after a step between checkpoints; after the step of an evaluation,
#      before its log row and checkpoint; between a checkpoint's temporary file and its rename;
#      just after a rename; between the final checkpoint and metrics.json; between
#      metrics.json's temporary file and its rename. Each is started again with --continue
#      until it finishes;
#   3. the same run sent a stop signal at exact points (MASKPRIOR_KILL_SIGNAL besides): after a
#      step between checkpoints, and during a periodic checkpoint's write. It must exit 3 with
#      one line naming the step, its checkpoint holding that step, and is then continued;
#   4. with --timed N, also N kills and N stop signals from outside at random moments of one run:
#      kill -9, or SIGTERM, SIGINT, SIGUSR1 in turn, after a random delay within the uninterrupted
#      run's time (start-up included), again and again, continuing each time. A signal that lands
#      before the run catches it ends the run as a kill does.
# Each interrupted run must end with the uninterrupted run's parameters and AdamW moments (bit for
# bit), its log.jsonl (byte for byte) and its metrics.json (all but seconds and command).
# Prints "faults: S/K kills and stops survived" (the reliability table's line) and exits 0 when
# S = K.
# MASKPRIOR_BINARY runs another build (make test-sanitize: ./maskprior-sanitize).
set -u
cd "$(dirname "$0")/.."
python=${MASKPRIOR_PYTHON:-/usr/bin/python3}
maskprior=${MASKPRIOR_BINARY:-./maskprior}
timed=0
[ "${1:-}" = --timed ] && timed=${2:?--timed needs a count}
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
tried=0
survived=0

# same_run A B: the two run folders hold the same tensors (bit for bit), the same log.jsonl and
# the same metrics.json but for its seconds and command line; prints the difference otherwise.
same_run() {
    "$python" - "$1" "$2" <<'EOF'
import json, struct, sys
def tensors(path):
    with open(path, "rb") as f:
        n = struct.unpack("<Q", f.read(8))[0]
        header = json.loads(f.read(n))
        data = f.read()
    return {k: data[v["data_offsets"][0]:v["data_offsets"][1]] for k, v in header.items() if k != "__metadata__"}
def metrics(folder):
    m = json.load(open(folder + "/metrics.json"))
    return {k: v for k, v in m.items() if k not in ("seconds", "command")}
a, b = sys.argv[1], sys.argv[2]
problems = []
ta, tb = tensors(a + "/model.safetensors"), tensors(b + "/model.safetensors")
problems += ["tensor " + k + " differs" for k in ta if ta[k] != tb.get(k)]
if open(a + "/log.jsonl").read() != open(b + "/log.jsonl").read(): problems.append("log.jsonl differs")
ma, mb = metrics(a), metrics(b)
problems += ["metrics.json: " + k + " differs" for k in ma if ma[k] != mb.get(k)]
print("; ".join(problems[:3]))
sys.exit(1 if problems else 0)
EOF
}

# stopped FOLDER OUTPUT: a run's exit after a stop signal was right: OUTPUT (the run's output)
# has the line "maskprior: stopped by SIG... after step N: wrote FOLDER/model.safetensors ...",
# the checkpoint holds step N, and there is no metrics.json; prints what is wrong otherwise.
stopped() {
    line=$(grep "^maskprior: stopped" "$2" | tail -1)
    step=$(echo "$line" | sed -n "s|^maskprior: stopped by SIG[A-Z0-9]* after step \([0-9]*\): wrote $1/|\1 |p")
    [ "${step#* }" = "model.safetensors (--continue goes on from there)" ] || step=""
    step=${step%% *}
    [ -n "$step" ] || { echo "not the stop line: $line"; return 1; }
    [ ! -f "$1/metrics.json" ] || { echo "a stopped run wrote metrics.json"; return 1; }
    "$python" - "$1/model.safetensors" "$step" 2>&1 <<'EOF'
import json, struct, sys
with open(sys.argv[1], "rb") as f:
    step = json.loads(f.read(struct.unpack("<Q", f.read(8))[0]))["__metadata__"]["step"]
if step != sys.argv[2]:
    print(f"stopped after step {sys.argv[2]}, but its checkpoint holds step {step}")
    sys.exit(1)
EOF
}

# finish FOLDER FLAGS: runs --continue until the run exits by itself (a kill asked for by the
# environment ends a try with 137); fails after 20 tries.
finish() {
    folder=$1
    shift
    for try in 1 2 3 4 5 6 7 8 9 10 11 12 13 14 15 16 17 18 19 20; do
        "$maskprior" "$@" --out "$folder" --continue >> "$folder.out" 2>&1
        rc=$?
        [ $rc = 0 ] && return 0
        [ $rc = 137 ] || { echo "a continued run exited with $rc:"; tail -3 "$folder.out"; return 1; }
    done
    return 1
}

# check NAME FOLDER [KILLS]: compares a finished killed run (killed KILLS times, 1 if not given)
# with the family's uninterrupted one
check() {
    tried=$((tried + ${3:-1}))
    if difference=$(same_run "$tmp/$family-whole" "$2"); then
        survived=$((survived + ${3:-1}))
        echo "  survived: $1"
    else
        echo "  FAILED: $1: $difference"
    fi
}

# family NAME POINTS SIGNAL_POINTS FLAGS: the uninterrupted run, then one run killed at each
# point (point:n, as MASKPRIOR_KILL_AT takes it) and one stopped at each signal point
# (point:n:signal number), each continued, then the timed kills and stops.
family() {
    family=$1 points=$2 signal_points=$3
    shift 3
    echo "== $family: $*"
    start=$(date +%s.%N)
    "$maskprior" "$@" --out "$tmp/$family-whole" > "$tmp/$family-whole.out" 2>&1 \
        || { echo "the uninterrupted $family run failed:"; tail -3 "$tmp/$family-whole.out"; exit 1; }
    seconds=$(echo "$start $(date +%s.%N)" | awk '{ print $2 - $1 }')  # the timed kills fall within this
    for point in $points; do
        folder=$tmp/$family-$point
        MASKPRIOR_KILL_AT=$point "$maskprior" "$@" --out "$folder" --continue > "$folder.out" 2>&1
        rc=$?
        if [ $rc != 137 ]; then  # the point was never reached: the test is wrong, not the program
            tried=$((tried + 1))
            echo "  FAILED: $point: the run was not killed there (exit $rc)"
            continue
        fi
        finish "$folder" "$@" && check "kill at $point" "$folder" || { tried=$((tried + 1)); echo "  FAILED: $point"; }
    done
    for point in $signal_points; do
        folder=$tmp/$family-signal-$point
        MASKPRIOR_KILL_AT=${point%:*} MASKPRIOR_KILL_SIGNAL=${point##*:} "$maskprior" "$@" --out "$folder" --continue \
            > "$folder.out" 2>&1
        rc=$?
        wrong=""
        if [ $rc != 3 ] || ! wrong=$(stopped "$folder" "$folder.out"); then
            tried=$((tried + 1))
            echo "  FAILED: signal ${point##*:} at ${point%:*}: exit $rc (3 expected); ${wrong:-}"
            continue
        fi
        finish "$folder" "$@" && check "signal ${point##*:} at ${point%:*}" "$folder" \
            || { tried=$((tried + 1)); echo "  FAILED: signal at $point"; }
    done
    [ "$timed" -gt 0 ] || return 0
    # kills and stops in turn: kill -9, then SIGTERM, SIGINT or SIGUSR1, each family from another one
    folder=$tmp/$family-timed
    kills=0 stops=0 tries=0 signals="TERM INT USR1"
    case $family in arithmetic) signals="INT USR1 TERM" ;; language) signals="USR1 TERM INT" ;; esac
    while [ $kills -lt "$timed" ] || [ $stops -lt "$timed" ]; do
        tries=$((tries + 1))  # a fresh delay for each try
        signal=KILL
        [ $stops -lt $kills ] && signal=$(echo $signals | cut -d" " -f$((stops % 3 + 1)))
        "$maskprior" "$@" --out "$folder" --continue > "$folder.try" 2>&1 &
        pid=$!
        sleep "$(awk -v seed="$tries$$" -v s="$seconds" 'BEGIN { srand(seed); printf "%.3f", rand() * s }')"
        kill -$signal "$pid" 2>/dev/null
        wait "$pid" 2>/dev/null
        rc=$?
        cat "$folder.try" >> "$folder.out"
        wrong=""
        if [ $rc = 0 ]; then  # it had finished before the signal (or ignored SIGINT): start again from nothing
            rm -rf "$folder"
        elif [ $signal = KILL ] && [ $rc = 137 ]; then  # killed (the shell's "Killed" line is left out)
            kills=$((kills + 1))
        elif [ $signal != KILL ] && [ $rc = 3 ] && wrong=$(stopped "$folder" "$folder.try"); then  # stopped, saved
            stops=$((stops + 1))
        elif [ $signal != KILL ] && [ $rc -gt 128 ]; then  # ended by it before it was caught
            stops=$((stops + 1))
        else
            echo "  FAILED: SIG$signal at a random moment: exit $rc; $wrong"
            tried=$((tried + 2 * timed))
            return 0
        fi
    done
    finish "$folder" "$@" && check "$timed kills -9 and $timed stop signals at random moments of one run" "$folder" \
        $((2 * timed))
}

# checkpoints every 10 steps of 60: writes 1-5 are periodic, 6 the final checkpoint, 7 metrics.json;
# the signals: 15 SIGTERM, 2 SIGINT, 10 SIGUSR1
kill_points="after-step:7 after-step:20 before-rename:2 after-rename:2 before-rename:6 after-rename:6 before-rename:7"
signal_points="after-step:7:15 after-step:13:2 before-rename:2:10"
small="--device cpu --width 16 --heads 2 --head-size 8 --mlp 32 --init mask --checkpoint-every 10"
family boolean "$kill_points" "$signal_points" --task maj3 --steps 60 --eval-every 20 $small
family arithmetic "$kill_points" "$signal_points" --task add3 --data-frac 0.002 --max-test 64 --steps 60 \
    --eval-every 20 $small

"$python" data/prepare_text.py --input tests/fixtures/text/tiny.txt --out "$tmp/text" --tokenizer bytes \
    > "$tmp/prepare.out" 2>&1 || { echo "prepare_text.py failed:"; cat "$tmp/prepare.out"; exit 1; }
family language "$kill_points" "$signal_points" --task lm --data-dir "$tmp/text" --seq-len 16 --eval-windows 8 \
    --mask-prior alibi --steps 60 --eval-every 20 --batch 8 $small

# a slice of Fashion-MNIST (Debian's dataset-fashion-mnist): 256 training and 64 test images
"$python" - "$tmp/fashion" <<'EOF' || exit 1
import gzip, os, struct, sys
src, out = "/usr/share/datasets/fashion-mnist", sys.argv[1]
os.makedirs(out)
for name, count in (("train", 256), ("t10k", 64)):
    for kind, item in (("images-idx3-ubyte", 784), ("labels-idx1-ubyte", 1)):
        data = gzip.open(f"{src}/{name}-{kind}.gz").read()
        dims = 3 if item > 1 else 1
        header = bytearray(data[:4 + 4 * dims])
        header[4:8] = struct.pack(">I", count)
        open(f"{out}/{name}-{kind}", "wb").write(bytes(header) + data[4 + 4 * dims:4 + 4 * dims + count * item])
EOF
# checkpoints every 4 steps of 24, between the evaluations: the training-accuracy counts carry over
family images "after-step:7 before-rename:3 after-rename:3 before-rename:6 after-rename:6 before-rename:7" \
    "after-step:6:15 after-step:7:2 before-rename:3:10" \
    --task fashion-mnist --data-dir "$tmp/fashion" --patch 7 --layers 1 --batch 16 --steps 24 --eval-every 10 \
    $small --checkpoint-every 4

echo "faults: $survived/$tried kills and stops survived, parameters, log and metrics bit-identical"
[ "$survived" = "$tried" ]
