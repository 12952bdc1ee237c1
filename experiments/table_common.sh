# What the table scripts share; sourced by them with their own arguments.
#   [--paper] [--seeds N]: sets size (cpu, or paper with --paper) and count (seeds, 3 unless
#   --seeds says otherwise); anything else is one line on stderr and exit code 2.
#   The scripts print one line per run (its folder, then its flags) into
#   experiments/run_many.sh --keep-finished, which runs them side by side and keeps a run whose
#   folder holds metrics.json, so an interrupted table continues where it stopped.
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

