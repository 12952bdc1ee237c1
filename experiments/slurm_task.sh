#!/bin/sh
# experiments/slurm_task.sh LIST [--unfinished]: one task of a Slurm job array that
# experiments/slurm_array.sh wrote; the array's sbatch script calls it from the repository root.
# LIST holds one run per line: its arguments to ./maskprior (FLAGS --out FOLDER --continue).
#   Task SLURM_ARRAY_TASK_ID = i runs line i + 1: a line naming the task, the host, the GPU and
#   the run, then the run's own output (exit: the run's). A run whose folder holds metrics.json
#   has finished and is not run again (exit 0); any other continues its folder's checkpoint when
#   it has one (--continue), so a task that Slurm requeued after a preemption, or that was
#   submitted again, goes on from where its run stopped.
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
exec ./maskprior $line
