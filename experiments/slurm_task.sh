#!/bin/sh
# experiments/slurm_task.sh LIST [--unfinished]: one task of a Slurm job array that
# experiments/slurm_array.sh wrote; the array's sbatch script calls it from the repository root.
# LIST holds one run per line: its arguments to ./maskprior (FLAGS --out FOLDER --continue).
#   Task SLURM_ARRAY_TASK_ID = i runs line i + 1: a line naming the task, the host, the GPU and
#   the run, then the run's own output (exit: the run's). A run whose folder holds metrics.json
#   has finished and is not run again (exit 0); any other continues its folder's checkpoint when
#   it has one (--continue), so a task that Slurm requeued after a preemption, or that was
#   submitted again, goes on from where its run stopped.
#   SIGUSR1 (the array asks Slurm for it 120 s before the time limit: --signal=B:USR1@120, sent
#   to this shell alone) is passed on to the run, which writes its checkpoint and exits 3
#   (run/signals.h); the task then requeues itself (scontrol requeue JOBID_INDEX), and its run
#   continues bit-exactly. SIGTERM (a preemption, which Slurm requeues itself: --requeue) reaches
#   the run from Slurm directly; this shell only waits for the run to write its checkpoint.
#   --unfinished: prints the indices of the runs without metrics.json, comma-separated, for
#   sbatch --array=...; nothing when every run has finished.
set -f
list=${1:?usage: experiments/slurm_task.sh LIST [--unfinished]}
# folder_of LINE: the run folder of a line of LIST, the word after its last --out
folder_of() {
    echo "${1##* --out }" | cut -d" " -f1
}
if [ "${2:-}" = --unfinished ]; then
    index=0
    unfinished=""
    while IFS= read -r line; do
        [ -f "$(folder_of "$line")/metrics.json" ] || unfinished="$unfinished,$index"
        index=$((index + 1))
    done < "$list"
    echo "${unfinished#,}"
    exit 0
fi
index=${SLURM_ARRAY_TASK_ID:-}
case $index in
    ''|*[!0-9]*) echo "slurm_task.sh: error: SLURM_ARRAY_TASK_ID is '$index', not an array index" >&2; exit 2 ;;
esac
line=$(sed -n "$((index + 1))p" "$list")
if [ -z "$line" ]; then
    echo "slurm_task.sh: error: $list has no line $((index + 1)) (task $index)" >&2
    exit 2
fi
folder=$(folder_of "$line")
if [ -f "$folder/metrics.json" ]; then
    echo "task $index: $folder has finished"
    exit 0
fi
echo "== task $index on $(uname -n), GPU ${CUDA_VISIBLE_DEVICES:-none}, $(date '+%Y-%m-%d %H:%M:%S'):" \
    "./maskprior $line"
# shellcheck disable=SC2086
./maskprior $line &
run=$!
requeue=0
trap 'requeue=1; kill -USR1 $run' USR1
trap : TERM  # Slurm sent it to the run too: wait for its checkpoint
status=0
wait $run || status=$?
while kill -0 $run 2>/dev/null; do  # a trap ended the wait, not the run
    status=0
    wait $run || status=$?
done
if [ $requeue = 1 ] && [ $status = 3 ]; then
    echo "task $index: stopped before the time limit, checkpoint written: requeued"
    scontrol requeue "${SLURM_ARRAY_JOB_ID}_${SLURM_ARRAY_TASK_ID}"
fi
exit $status
