#!/bin/sh
# experiments/slurm_array.sh ROOT: the runs on stdin (one per line: its folder, then its flags to
# ./maskprior, as experiments/run_many.sh reads them) written out as a Slurm job array, one GPU
# per run, instead of run. The table scripts call it with SCHEDULER=slurm (table_common.sh); ROOT
# is the table's folder (relative to the repository root, or absolute). Writes into ROOT/slurm:
#   runs.txt  one run per line: its arguments to ./maskprior, the ones run_many.sh gives it
#             (FLAGS --out FOLDER --continue); array task i runs line i + 1;
#   array.sh  the sbatch script: #SBATCH --array=0-(N-1), --gres=gpu:1, --requeue,
#             --signal=B:USR1@120 (a task stopped before its time limit requeues itself),
#             --open-mode=append, --output logs/<i>.out, and a comment block on how to submit it,
#             rerun failed tasks and get the table. It changes to this repository (its absolute
#             path written in, as sbatch runs a copy of the script) and runs its line there
#             (experiments/slurm_task.sh);
#   logs/     each task's output, appended to when Slurm requeues the task.
# Then prints where they are and the sbatch command. Runs that have finished stay in the list
# (their task ends at once; the output names the others), so index i names the same run each
# time the list is written.
set -e
root=${1:?usage: experiments/slurm_array.sh ROOT < runs}
cd "$(dirname "$0")/.."
repo=$(pwd)
mkdir -p "$root/slurm/logs"
dir=$(cd "$root/slurm" && pwd)
set -f
while IFS= read -r line; do
    # shellcheck disable=SC2086
    set -- $line
    [ $# -gt 0 ] || continue
    folder=$1
    shift
    echo "$* --out $folder --continue"
done > "$dir/runs.txt"
n=$(wc -l < "$dir/runs.txt")
if [ "$n" -eq 0 ]; then
    echo "slurm_array.sh: error: no runs on stdin" >&2
    exit 2
fi
unfinished=$(sh experiments/slurm_task.sh "$dir/runs.txt" --unfinished)
job=maskprior-$(echo "${root#runs/}" | tr -s / - | sed 's/^-//')
cat > "$dir/array.sh" <<EOF
#!/bin/sh
# A Slurm job array of the $n maskprior runs of $root, one GPU each, written by
# experiments/slurm_array.sh on $(date '+%Y-%m-%d %H:%M'). Task i runs line i + 1 of
# $root/slurm/runs.txt as ./maskprior FLAGS --out FOLDER --continue in the repository
# $repo
# (the nodes must see this folder and run its ./maskprior: where their CPUs or GPUs differ from
# the machine that built it, build it with make HOST_MARCH=x86-64-v3 ARCH=<their GPUs', e.g. 90>).
# A run whose folder holds metrics.json has finished and is not run again. Task i writes to
# $root/slurm/logs/i.out. The commands below run from the repository.
#   Submit:      sbatch $root/slurm/array.sh
#                (sbatch options given there win over the #SBATCH lines below: --partition,
#                --time, --account, --cpus-per-task, or --array=0-$((n - 1))%K for K runs at once)
#   Preemption:  --requeue: Slurm starts a preempted task (or one whose node failed) again, and
#                its run continues from its last checkpoint; its log is appended to. Preempted
#                (SIGTERM), the run writes its checkpoint after its step and exits 3, losing
#                nothing; a lost node loses at most a checkpoint interval (5 minutes of the run).
#   Time limit:  --signal=B:USR1@120: 120 s before it, the task passes SIGUSR1 on to its run, which
#                writes its checkpoint and exits 3, and requeues itself (scontrol requeue).
#   Failed runs: sh $root/slurm/array.sh --unfinished
#                prints the indices of the runs without metrics.json (nothing when all finished);
#                a=$root/slurm/array.sh; sbatch --array=\$(sh \$a --unfinished) \$a
#                runs those again, each from its checkpoint. Submitting the whole array again is
#                safe too: a finished task ends at once.
#   The table:   when every run has finished, the table's command again without SCHEDULER=slurm
#                (e.g. make table-lm LM_ARGS=--paper) finds every run finished and prints the table.
#SBATCH --job-name=$job
#SBATCH --array=0-$((n - 1))
#SBATCH --gres=gpu:1
#SBATCH --requeue
#SBATCH --signal=B:USR1@120
#SBATCH --open-mode=append
#SBATCH --output=$dir/logs/%a.out
cd "$repo" || exit 1
exec sh experiments/slurm_task.sh "$dir/runs.txt" "\$@"
EOF
echo "slurm_array.sh: wrote the $n runs of $root as a Slurm job array, one GPU per run:"
echo "  in $dir: runs.txt (one run per line), array.sh (the sbatch script), logs/"
if [ -z "$unfinished" ]; then
    echo "every run has finished already: the same command without SCHEDULER=slurm prints the table"
    exit 0
elif [ "$(echo "$unfinished" | tr , '\n' | wc -l)" -eq "$n" ]; then
    echo "submit it with"
    echo "  sbatch $dir/array.sh"
else
    echo "some have finished already; submit the others with"
    echo "  sbatch --array=$unfinished $dir/array.sh"
    echo "(or the whole array: a finished task ends at once)"
fi
echo "then, when every run has finished, the same command without SCHEDULER=slurm prints the table"
