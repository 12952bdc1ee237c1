#!/bin/sh
# tests/test_scheduler.sh: the ways a table's runs are run give the same runs. A tiny table (four
# small CPU runs, one of them 1000 steps with a checkpoint every 50) goes through the table
# scripts' shared place, experiments/table_common.sh, as a table script uses it:
#   1. run here, one at a time (JOBS=1): the reference;
#   2. with SCHEDULER=slurm: the table stops (exit 0) without its table, having written the run
#      list (each line the reference run's own command line, --continue included) and the sbatch
#      script of a job array (its #SBATCH lines checked); the array script is run once per index
#      with SLURM_ARRAY_TASK_ID set, from another folder, as Slurm would; the long run's task is
#      killed with kill -9 after its first checkpoint and started again, as a requeue would (it
#      must continue, not start over), and a finished task started again ends at once; while the
#      killed run is unfinished, --unfinished names it and the files written again hold the same
#      list and an sbatch command for it alone; afterwards the table finds every run finished;
#      and a task's shell sent SIGUSR1 (as --signal=B:USR1@120 has Slurm do before the time
#      limit) passes it on to its run, which writes its checkpoint and exits 3, and the task
#      requeues itself (a stand-in scontrol records the call);
#   3. run here with JOBS=2 (each run with OMP_NUM_THREADS = cores / 2); and with SCHEDULER=list
#      the table prints its four runs, one a line, and stops (exit 0) having written nothing;
#   4. run here on a machine that seems to have two GPUs (an nvidia-smi that lists two; the runs
#      still train on the CPU): while they run, two that run at once never share a
#      CUDA_VISIBLE_DEVICES, and both GPUs get runs (seen through pgrep and /proc; left out
#      without them).
# Every run of 2-4 must end with the reference's log.jsonl (byte for byte) and metrics.json (all
# but seconds and command; in 3 and 4 also but threads and device, which name the thread count).
# Exit 0 when all holds, 1 when not, 77 (skipped) without ./maskprior or /usr/bin/python3.
# About 20 s on 2 cores.
set -u
cd "$(dirname "$0")/.." || exit 1
repo=$(pwd)
python=/usr/bin/python3
if [ ! -x ./maskprior ] || [ ! -x "$python" ]; then
    echo "scheduler test: skipped (needs ./maskprior and $python)"
    exit 77
fi
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
failed=0
fail() { echo "scheduler test: FAILED: $1"; failed=1; }
unset OMP_NUM_THREADS JOBS SCHEDULER CUDA_VISIBLE_DEVICES

# The tiny table: its runs into $TINY_ROOT, through run_runs and stop_if_scheduled as the table
# scripts call them; then "table:" and the number of finished runs in place of a table. (The
# double space in one line: sweep_2parity.sh prints such lines too.)
small="--device cpu --width 8 --layers 1 --heads 2 --head-size 4 --mlp 8"
cat > "$tmp/tiny_table.sh" <<EOF
set -e
cd "$repo"
. experiments/table_common.sh
root=\$TINY_ROOT
{
    echo "\$root/maj3-default-s1 --task maj3 $small --steps 30 --eval-every 15 --seed 1"
    echo "\$root/maj3-mask-s2 --task maj3 --init mask $small --steps 30 --eval-every 15 --seed 2"
    echo "\$root/2parity-qk-svd-s1 --task 2parity  --init qk-svd $small --steps 30 --eval-every 15 --seed 1"
    echo "\$root/maj3-long-s3 --task maj3 $small --steps 1000 --eval-every 500 --checkpoint-every 50 --seed 3"
} | run_runs "\$root"
stop_if_scheduled
echo "table: \$(ls "\$root"/*/metrics.json | wc -l) runs finished"
EOF
runs="maj3-default-s1 maj3-mask-s2 2parity-qk-svd-s1 maj3-long-s3"

# same_runs ROOT [KEY...]: every run of ROOT has the reference's log.jsonl and metrics.json (but
# seconds, command and the KEYs); prints what differs otherwise
same_runs() {
    "$python" - "$tmp/local" "$@" $runs <<'EOF'
import json, os, sys
reference, root, rest = sys.argv[1], sys.argv[2], sys.argv[3:]
ignored = {"seconds", "command"} | {key for key in rest if "-" not in key}
problems = []
for run in (name for name in rest if "-" in name):
    a, b = os.path.join(reference, run), os.path.join(root, run)
    if not os.path.exists(b + "/metrics.json"):
        problems.append(run + ": no metrics.json")
        continue
    if open(a + "/log.jsonl").read() != open(b + "/log.jsonl").read():
        problems.append(run + ": log.jsonl differs")
    ma, mb = json.load(open(a + "/metrics.json")), json.load(open(b + "/metrics.json"))
    keys = (set(ma) | set(mb)) - ignored
    problems += [run + ": metrics.json's " + key + " differs" for key in sorted(keys) if ma.get(key) != mb.get(key)]
print("; ".join(problems[:4]))
sys.exit(1 if problems else 0)
EOF
}

# 1. The reference: here, one run at a time.
start=$(date +%s)
if ! JOBS=1 TINY_ROOT="$tmp/local" sh "$tmp/tiny_table.sh" > "$tmp/local.out" 2>&1; then
    echo "scheduler test: FAILED: the tiny table, run here, failed:"
    cat "$tmp/local.out"
    exit 1
fi
grep -qx "table: 4 runs finished" "$tmp/local.out" || fail "the tiny table run here: $(cat "$tmp/local.out")"
[ "$(grep -c "^$tmp/local/.*: eval  step" "$tmp/local.out")" = 4 ] \
    || fail "run_many.sh did not print one 'FOLDER: eval ...' line per run: $(cat "$tmp/local.out")"
TINY_ROOT="$tmp/local" sh "$tmp/tiny_table.sh" > "$tmp/again.out" 2>&1
[ "$(cat "$tmp/again.out")" = "table: 4 runs finished" ] || fail "finished runs were not kept: $(cat "$tmp/again.out")"

# 2. Slurm: the files, then each array task run here as Slurm would run it.
slurm=$tmp/slurm/slurm
array=$slurm/array.sh
if SCHEDULER=slurm TINY_ROOT="$tmp/slurm" sh "$tmp/tiny_table.sh" > "$tmp/slurm.out" 2>&1; then
    grep -q "^table:" "$tmp/slurm.out" && fail "SCHEDULER=slurm went on to the table"
    grep -qxF "  sbatch $array" "$tmp/slurm.out" || fail "SCHEDULER=slurm did not print the sbatch command"
else
    fail "SCHEDULER=slurm: exit code not 0: $(cat "$tmp/slurm.out")"
fi
for line in "--array=0-3" "--gres=gpu:1" "--requeue" "--signal=B:USR1@120" "--open-mode=append" \
    "--output=$slurm/logs/%a.out"; do
    grep -qxF -- "#SBATCH $line" "$array" 2>/dev/null || fail "array.sh has no line '#SBATCH $line'"
done
grep -qxF "cd \"$repo\" || exit 1" "$array" 2>/dev/null || fail "array.sh does not change to the repository"
# each line of the list: the reference run's own command line but its folder, in the same order
"$python" - "$slurm/runs.txt" "$tmp/local" "$tmp/slurm" $runs <<'EOF' || fail "runs.txt: not the runs' command lines"
import json, sys
path, local, slurm, runs = sys.argv[1], sys.argv[2], sys.argv[3], sys.argv[4:]
lines = open(path).read().splitlines()
commands = [json.load(open(f"{local}/{run}/metrics.json"))["command"] for run in runs]
want = [command.split(" ", 1)[1].replace(local, slurm) for command in commands]
if lines != want:
    print("\n".join(["runs.txt:"] + lines + ["the runs:"] + want))
    sys.exit(1)
EOF
# task TASK: runs array task TASK as Slurm would, from another folder, its output appended to its log
task() {
    (cd "$tmp" && SLURM_ARRAY_TASK_ID=$1 sh "$array") >> "$slurm/logs/$1.out" 2>&1
}
for index in 0 1 2; do
    task $index || fail "array task $index failed: $(tail -3 "$slurm/logs/$index.out")"
done
# task 3: killed with kill -9 once it has a checkpoint, then started again; the run and the
# task's shell both, as a lost node loses them (the run's pid is in its folder's .lock)
long=$tmp/slurm/maj3-long-s3
(cd "$tmp" && exec env SLURM_ARRAY_TASK_ID=3 sh "$array") >> "$slurm/logs/3.out" 2>&1 &
pid=$!
tries=0
while [ ! -f "$long/model.safetensors" ] && [ $tries -lt 300 ]; do
    sleep 0.1
    tries=$((tries + 1))
done
kill -9 "$(cat "$long/.lock")" $pid
{ wait $pid; } 2>/dev/null  # no "Killed" line
if [ -f "$long/metrics.json" ] || [ ! -f "$long/model.safetensors" ]; then
    fail "array task 3 was not killed between its first checkpoint and its end"
fi
[ "$(sh "$array" --unfinished)" = 3 ] || fail "--unfinished printed '$(sh "$array" --unfinished)', not 3"
# the files written again: the same list, and the sbatch command for the unfinished run alone
cp "$slurm/runs.txt" "$tmp/runs.txt"
SCHEDULER=slurm TINY_ROOT="$tmp/slurm" sh "$tmp/tiny_table.sh" > "$tmp/slurm.out" 2>&1
cmp -s "$slurm/runs.txt" "$tmp/runs.txt" || fail "runs.txt written again is not the same"
grep -qxF "  sbatch --array=3 $array" "$tmp/slurm.out" || fail "written again, not the command for task 3 alone"
task 3 || fail "array task 3, started again, failed: $(tail -3 "$slurm/logs/3.out")"
grep -qE "1000 \(from [1-9][0-9]*\)" "$slurm/logs/3.out" \
    || fail "array task 3, started again, did not continue from its checkpoint"
[ -z "$(sh "$array" --unfinished)" ] || fail "--unfinished printed '$(sh "$array" --unfinished)', all finished"
task 0 && grep -qx "task 0: $tmp/slurm/maj3-default-s1 has finished" "$slurm/logs/0.out" \
    || fail "array task 0, started again after it finished, did not end at once"
difference=$(same_runs "$tmp/slurm") || fail "the Slurm array's runs differ from the reference: $difference"
TINY_ROOT="$tmp/slurm" sh "$tmp/tiny_table.sh" > "$tmp/table.out" 2>&1
[ "$(cat "$tmp/table.out")" = "table: 4 runs finished" ] \
    || fail "the table after the Slurm array did not find every run finished: $(cat "$tmp/table.out")"
# SIGUSR1 to a task's shell alone: its run, long enough not to finish first, stops with its
# checkpoint, and the task requeues itself through scontrol (here a stand-in that records it)
mkdir -p "$tmp/slurm_bin"
printf '#!/bin/sh\necho "$*" >> "%s"\n' "$tmp/scontrol.calls" > "$tmp/slurm_bin/scontrol"
chmod +x "$tmp/slurm_bin/scontrol"
echo "--task maj3 $small --steps 100000000 --eval-every 100000000 --out $tmp/usr1 --continue" > "$tmp/usr1.txt"
PATH="$tmp/slurm_bin:$PATH" SLURM_ARRAY_JOB_ID=77 SLURM_ARRAY_TASK_ID=0 \
    sh experiments/slurm_task.sh "$tmp/usr1.txt" > "$tmp/usr1.out" 2>&1 &
pid=$!
tries=0
while [ ! -s "$tmp/usr1/log.jsonl" ] && [ $tries -lt 300 ]; do  # its step-0 row: it is training
    sleep 0.1
    tries=$((tries + 1))
done
kill -USR1 $pid
status=0
wait $pid || status=$?
[ $status = 3 ] || fail "a task sent SIGUSR1 exited with $status, not 3: $(tail -3 "$tmp/usr1.out")"
grep -q "^maskprior: stopped by SIGUSR1 after step [0-9]*: wrote $tmp/usr1/model.safetensors" "$tmp/usr1.out" \
    && [ -f "$tmp/usr1/model.safetensors" ] && [ ! -f "$tmp/usr1/metrics.json" ] \
    || fail "a task sent SIGUSR1: its run did not stop with its checkpoint: $(tail -3 "$tmp/usr1.out")"
[ "$(cat "$tmp/scontrol.calls" 2>/dev/null)" = "requeue 77_0" ] \
    || fail "a task sent SIGUSR1 did not call 'scontrol requeue 77_0': $(cat "$tmp/scontrol.calls" 2>/dev/null)"

# 3. JOBS=2 on the CPU: one thread each on 2 cores (cores / 2, at least 1).
threads=$(($(nproc) / 2))
[ $threads -ge 1 ] || threads=1
if JOBS=2 TINY_ROOT="$tmp/jobs2" sh "$tmp/tiny_table.sh" > "$tmp/jobs2.out" 2>&1; then
    difference=$(same_runs "$tmp/jobs2" threads device) || fail "JOBS=2: not the reference's runs: $difference"
    grep -q "\"threads\": $threads," "$tmp/jobs2/maj3-default-s1/metrics.json" \
        || fail "JOBS=2: not $threads threads a run"
else
    fail "JOBS=2: the tiny table failed: $(cat "$tmp/jobs2.out")"
fi

# SCHEDULER=list: the runs printed as the table gives them, nothing run, nothing written
if SCHEDULER=list TINY_ROOT="$tmp/list" sh "$tmp/tiny_table.sh" > "$tmp/list.out" 2>&1; then
    [ "$(cut -d' ' -f1 "$tmp/list.out" | tr '\n' ' ')" = "$(for r in $runs; do printf '%s ' "$tmp/list/$r"; done)" ] \
        || fail "SCHEDULER=list did not print the four runs, one a line: $(cat "$tmp/list.out")"
    [ ! -e "$tmp/list" ] || fail "SCHEDULER=list wrote $tmp/list"
else
    fail "SCHEDULER=list: exit code not 0: $(cat "$tmp/list.out")"
fi

# 4. Two GPUs, as nvidia-smi -L lists them: a run per GPU at once. Samples every 0.1 s which GPU
# each of this test's running ./maskprior processes was given.
if ! command -v pgrep > /dev/null || [ ! -r /proc/self/environ ]; then
    echo "scheduler test: part 4 (two GPUs) left out: it needs pgrep and /proc"
else
    mkdir "$tmp/bin"
    cat > "$tmp/bin/nvidia-smi" <<'EOF'
#!/bin/sh
[ "$1" = -L ] || exit 1
echo "GPU 0: Fake (UUID: GPU-0)"
echo "GPU 1: Fake (UUID: GPU-1)"
EOF
    chmod +x "$tmp/bin/nvidia-smi"
    PATH="$tmp/bin:$PATH" SCHEDULER_TEST=$$ TINY_ROOT="$tmp/gpus" sh "$tmp/tiny_table.sh" > "$tmp/gpus.out" 2>&1 &
    pid=$!
    while kill -0 $pid 2>/dev/null; do
        for process in $(pgrep -x maskprior); do
            environment=$({ tr '\0' '\n' < "/proc/$process/environ"; } 2>/dev/null)
            echo "$environment" | grep -qx "SCHEDULER_TEST=$$" || continue
            gpu=$(echo "$environment" | sed -n 's/^CUDA_VISIBLE_DEVICES=//p')
            printf '%s ' "${gpu:-none}"
        done
        echo
        sleep 0.1
    done > "$tmp/samples"
    if wait $pid; then
        difference=$(same_runs "$tmp/gpus" threads device) || fail "two GPUs: not the reference's runs: $difference"
        # each line: the GPUs of the runs at one moment
        awk '{ for (i = 1; i <= NF; i++) { if ($i != 0 && $i != 1 || seen[NR, $i]++) bad = 1; used[$i] = 1 } }
             END { exit bad || !used[0] || !used[1] }' "$tmp/samples" \
            || fail "two GPUs: not each run at once on its own GPU, 0 or 1, and both used: $(sort -u "$tmp/samples")"
    else
        fail "two GPUs: the tiny table failed: $(cat "$tmp/gpus.out")"
    fi
fi

[ "$failed" = 0 ] && echo "scheduler test: ok ($(($(date +%s) - start)) s)"
exit "$failed"
