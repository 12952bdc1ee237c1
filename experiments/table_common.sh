# What the table scripts share; sourced by them with their own arguments.
#   [--paper] [--seeds N]: sets size (cpu, or paper with --paper) and count (seeds, 3 unless
#   --seeds says otherwise); anything else is one line on stderr and exit code 2.
#   The scripts print one line per run (its folder, then its flags) into run_runs ROOT, then
#   call stop_if_scheduled, then print the table from ROOT's runs.
#   SCHEDULER (environment) says where the runs go:
#     local (default)  here: experiments/run_many.sh --keep-finished runs them side by side
#                      (JOBS=N at once; one per GPU on a machine with several), keeps a run whose
#                      folder holds metrics.json and continues one that has a checkpoint, so an
#                      interrupted table continues where it stopped;
#     slurm            a Slurm job array, one GPU per run: experiments/slurm_array.sh writes the
#                      run list and the sbatch script into ROOT/slurm and prints the sbatch
#                      command; the table script then stops (exit 0). Once the array has run,
#                      the same table command without SCHEDULER=slurm finds every run finished
#                      and prints the table;
#     list             nowhere: the runs are printed, one a line, and the script stops (exit 0)
#                      having run and written nothing (tests/check_docs.py counts them).
scheduler=${SCHEDULER:-local}
case $scheduler in
    local|slurm|list) ;;
    *) echo "$(basename "$0"): error: SCHEDULER=$scheduler (use local, slurm or list)" >&2; exit 2 ;;
esac
size=cpu
count=3
while [ $# -gt 0 ]; do
    case $1 in
        --paper) size=paper ;;
        --seeds) count=$2; shift ;;
        *) echo "$(basename "$0"): error: unknown argument $1 (use --paper, --seeds N)" >&2; exit 2 ;;
    esac
    shift
done
case $count in ''|*[!0-9]*|0) echo "$(basename "$0"): error: --seeds needs a count of at least 1" >&2; exit 2 ;; esac

# runs_for_seeds FOLDER FLAGS: one line per seed 1..count for experiments/run_many.sh,
# "FOLDER-sN FLAGS --seed N"
runs_for_seeds() {
    seed=1
    while [ "$seed" -le "$count" ]; do
        echo "$1-s$seed $2 --seed $seed"
        seed=$((seed + 1))
    done
}

# run_runs ROOT: the runs on stdin, run here, written out for Slurm into ROOT/slurm, or printed
# (SCHEDULER)
run_runs() {
    case $scheduler in
        slurm) sh experiments/slurm_array.sh "$1" ;;
        list) cat ;;
        *) sh experiments/run_many.sh --keep-finished ;;
    esac
}

# no_paper_size: for a table asked at the make-run size only: --paper is one line on stderr, exit 2
no_paper_size() {
    if [ $size = paper ]; then
        echo "$(basename "$0"): error: no --paper size: this table runs at the make-run size" >&2
        exit 2
    fi
}

# stop_if_scheduled: with SCHEDULER=slurm or list the runs have not run yet, so the table script
# stops here, without its table (run_runs sits in a pipeline, a subshell, and cannot stop it)
stop_if_scheduled() {
    [ "$scheduler" = local ] || exit 0
}
