#!/bin/sh
# tests/fuzz/run_fuzz.sh: runs the libFuzzer harnesses of tests/fuzz/, one after another (one core),
# each for a time or a number of executions, and prints one line per harness.
#
#   sh tests/fuzz/run_fuzz.sh [--seconds S | --runs N] [harness...]    (default --seconds 10, all)
#   harnesses: safetensors structure arithmetic idx cifar image token_file vocabulary target
#
# Builds what is missing or stale (make tests/fuzz/bin/fuzz_<name>; clang++ with ASan and UBSan).
# Each harness first checks that its valid seeds parse (tests/fuzz/fuzz.h), then fuzzes starting
# from tests/fuzz/corpus/<name>/ (valid/ and rejected/), which it only reads. What a run leaves is
# in $FUZZ_OUT/<name>/ (default tests/fuzz/out, git-ignored; emptied at the start of each run):
# corpus/ (the inputs it found), log, and the reproducer of a finding: crash-*, leak-*, timeout-*
# or oom-*, replayed by
#   tests/fuzz/bin/fuzz_<name> tests/fuzz/out/<name>/crash-...      (from the repository root)
# The inputs are written to a folder under /dev/shm (memory) when there is one, else under out/.
# Limits: 2 GB of memory (RSS and any one malloc), 5 s per input, inputs up to MAX_LEN bytes below.
# Line: harness, executions, exec/s, seconds, corpus (seed files -> inputs held at the end),
# crashes (0, or the reproducer's path). Exit code 0 when every harness ran clean, 1 when any
# found something or rejected a valid seed, 2 on bad arguments.
cd "$(dirname "$0")/../.." || exit 2
all="safetensors structure arithmetic idx cifar image token_file vocabulary target"
limit="-max_total_time=10"
case $1 in
    --seconds) limit="-max_total_time=$2"; shift 2 ;;
    --runs) limit="-runs=$2"; shift 2 ;;
    -*) echo "usage: sh tests/fuzz/run_fuzz.sh [--seconds S | --runs N] [harness...]" >&2; exit 2 ;;
esac
harnesses=${*:-$all}
for name in $harnesses; do
    case " $all " in *" $name "*) ;; *) echo "run_fuzz: no harness $name (the harnesses: $all)" >&2; exit 2 ;; esac
done

# the largest input per format: a little over its largest seed
max_len() {
    case $1 in
        safetensors) echo 16384 ;; structure) echo 4096 ;; arithmetic) echo 1024 ;; idx) echo 4096 ;;
        cifar) echo 10000 ;; image) echo 8192 ;; token_file) echo 10240 ;; vocabulary) echo 8192 ;;
        target) echo 1024 ;;
    esac
}

# shellcheck disable=SC2086
make --no-print-directory -s $(for name in $harnesses; do echo "tests/fuzz/bin/fuzz_$name"; done) || exit 1
results=${FUZZ_OUT:-tests/fuzz/out}
mkdir -p "$results" || exit 1
scratch=$(mktemp -d /dev/shm/maskprior-fuzz-XXXXXX 2>/dev/null || mktemp -d "$PWD/$results/tmp-XXXXXX")
trap 'rm -rf "$scratch"' EXIT
export UBSAN_OPTIONS="print_stacktrace=1:$UBSAN_OPTIONS"
status=0
printf '%-12s %12s %8s %8s %16s  %s\n' harness executions exec/s seconds corpus crashes
for name in $harnesses; do
    out=$results/$name
    rm -rf "$out"
    mkdir -p "$out/corpus"
    seeds=$(find "tests/fuzz/corpus/$name" -type f | wc -l)
    start=$(date +%s)
    TMPDIR=$scratch "tests/fuzz/bin/fuzz_$name" $limit -max_len="$(max_len "$name")" -rss_limit_mb=2048 \
        -malloc_limit_mb=2048 -timeout=5 -print_final_stats=1 -artifact_prefix="$out/" \
        "$out/corpus" "tests/fuzz/corpus/$name" >"$out/log" 2>&1
    rc=$?
    seconds=$(($(date +%s) - start))
    stat() { sed -n "s/^stat::$1: *//p" "$out/log"; }
    held=$(grep -ao 'corp: [0-9]*' "$out/log" | tail -1 | sed 's/corp: //')
    found=$(find "$out" -maxdepth 1 -type f \( -name 'crash-*' -o -name 'leak-*' -o -name 'timeout-*' \
        -o -name 'oom-*' \) | head -1)
    if [ $rc = 0 ]; then
        crashes=0
    else
        status=1
        crashes=${found:-"failed with exit code $rc, see $out/log"}
        grep -aq 'VALID SEED REJECTED' "$out/log" && crashes="VALID SEED REJECTED, see $out/log"
    fi
    printf '%-12s %12s %8s %8s %16s  %s\n' "$name" "$(stat number_of_executed_units)" \
        "$(stat average_exec_per_sec)" "$seconds" "$seeds -> ${held:-?}" "$crashes"
    [ $rc = 0 ] || grep -a -m 3 -E 'FINDING|VALID SEED|ERROR|runtime error' "$out/log" | sed 's/^/    /'
done
exit $status
