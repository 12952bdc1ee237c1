# What the table scripts share; sourced by them with their own arguments.
#   [--paper] [--seeds N]: sets size (cpu, or paper with --paper) and count (seeds, 3 unless
#   --seeds says otherwise); anything else is one line on stderr and exit code 2.
#   train_once OUT LABEL FLAGS...: one ./maskprior run into folder OUT, its output in
#   OUT/stdout.log; a run whose OUT/metrics.json exists is kept, so an interrupted table
#   continues where it stopped. Prints LABEL and the run's last evaluation line; a failed run
#   prints its output and stops the script.
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

train_once() {
    out=$1 label=$2
    shift 2
    [ -f "$out/metrics.json" ] && return 0
    mkdir -p "$out"
    if ! ./maskprior "$@" --out "$out" > "$out/stdout.log" 2>&1; then
        cat "$out/stdout.log"
        exit 1
    fi
    echo "$label: $(grep -E '^eval' "$out/stdout.log" | tail -1 | cut -c1-100)"
}
