#!/bin/sh
# tests/gpu_tests_isolated.sh [--each S] [--total S] [--wrap "COMMAND"] [--logs DIR] [--gpu-cases]
#                             [--first FILTER] [--list] BINARY [FILTER]
# Runs a doctest binary's test cases (those whose names match FILTER, doctest's -tc, when given) so
# that a crash ends only its part and the rest still runs and reports: make gpu-check runs the GPU
# cases this way (tests/gpu_check_plan.py), where one bad kernel can kill the process with a
# signal, or leave a sticky CUDA error on which cudaCheck exits in the middle of a case.
#   - the cases are listed (--list-test-cases, XML) and grouped into families, one per source file
#     (tests/test_gpu_matmul.cu, ...): each family runs in a process of its own (-sf=FILE and its
#     cases by name), so a GPU session pays one CUDA context per family, not per case;
#   - --gpu-cases: only the cases that need a GPU: those that run here and skip themselves when the
#     tests are told there is none (listed again with MASKPRIOR_TESTS_WITHOUT_GPU=1, tests/test_util.h).
#     Doctest's name filters ignore case ("*GPU*" matches "tools/bench_gpu.py"), so a name cannot
#     say it; the cases' own skip can;
#   - --first FILTER: the chosen cases whose names match FILTER run first, in one process of their
#     own ("first: FILTER"), then the families as above (the sanitizers start with attention);
#   - a family that ends as doctest ends a run (its "Status:" line, exit 0 or 1) is ok, or FAILED with
#     its failing cases named; one that dies (a signal, a time limit, an exit before doctest's
#     summary, as cudaCheck's) is CRASHED, named with the case doctest was in when it can tell, and
#     then its cases run again one process each (by name), so that each gets its own line;
#   - a family still running when --total's seconds run out did not finish: it is not a crash, its
#     cases are not run again (no time is left), and it is counted apart (a slow tool is not a bug);
#   - one line per part, the output of each part that did not pass, then a summary line.
# --each S: each process's time limit (default 300); --total S: no process starts after S seconds
# (default: none), each part's limit cut to what is left; --wrap: a command that runs each process,
# its words split by the shell (compute-sanitizer --tool memcheck --error-exitcode 9); --logs DIR:
# keep each part's output there (default: a temporary folder, removed at the end); --list: print the
# chosen cases ("FILE<tab>NAME", in the order they would run) and run nothing.
# Each part runs under timeout(1), in a process group of its own; SIGTERM, SIGINT or SIGHUP to this
# script stops the part then running (its whole group) before the script exits.
# Exit status: 0 every case passed, 1 some case failed or crashed, 3 none failed or crashed but some
# did not run or finish in --total's seconds, 2 bad arguments or a binary that cannot list its
# cases, 77 no case to run (every case skipped, as without a GPU), 128+N stopped by signal N.
# tests/test_gpu_tests_isolated.sh checks it on a binary with a crash planted in one case.
set -u
usage() {
    echo "usage: tests/gpu_tests_isolated.sh [--each S] [--total S] [--wrap COMMAND] [--logs DIR] [--gpu-cases]" \
         "[--first FILTER] [--list] BINARY [FILTER]" >&2
    exit 2
}
each=300 total="" wrap="" logs="" gpu_cases=false first="" list=false
while [ $# -gt 0 ]; do
    case $1 in
        --each|--total|--wrap|--logs|--first) [ $# -ge 2 ] || usage ;;
    esac
    case $1 in
        --each) each=$2; shift 2 ;;
        --total) total=$2; shift 2 ;;
        --wrap) wrap=$2; shift 2 ;;
        --logs) logs=$2; shift 2 ;;
        --gpu-cases) gpu_cases=true; shift ;;
        --first) first=$2; shift 2 ;;
        --list) list=true; shift ;;
        -*) usage ;;
        *) break ;;
    esac
done
[ $# -ge 1 ] && [ $# -le 2 ] || usage
binary=$1 filter=${2:-}
for n in "$each" ${total:+"$total"}; do
    case $n in ''|*[!0-9]*) echo "gpu_tests_isolated: a time limit must be whole seconds, got '$n'" >&2; exit 2 ;; esac
done
[ -x "$binary" ] || { echo "gpu_tests_isolated: $binary is not an executable" >&2; exit 2; }
kept=$logs  # the folder named, where the logs stay
if [ -n "$logs" ]; then mkdir -p "$logs" || exit 2
else logs=$(mktemp -d); trap 'rm -rf "$logs"' EXIT; fi
tab=$(printf '\t')
start=$(date +%s)

# "1 case", "N cases"
cases_of() { if [ "$1" = 1 ]; then echo "1 case"; else echo "$1 cases"; fi; }
parts_of() { if [ "$1" = 1 ]; then echo "1 part"; else echo "$1 parts"; fi; }
# listed OUT SETTING [ARG...]: the cases that run (are not skipped), in doctest's order (by file, then
# line), as "FILE<tab>NAME" lines in OUT, XML's escapes undone; the binary listed with ARGS, under
# env SETTING (VAR=VALUE) when one is given
listed() {
    out=$1 setting=$2; shift 2
    if ! env ${setting:+"$setting"} "$binary" --list-test-cases --reporters=xml "$@" > "$out.xml" 2>&1; then
        echo "gpu_tests_isolated: $binary cannot list its test cases:" >&2
        head -5 "$out.xml" >&2
        exit 2
    fi
    sed -n "s|^ *<TestCase name=\"\(.*\)\" filename=\"\([^\"]*\)\" line=\"[0-9]*\" skipped=\"false\"/>\$|\\2$tab\\1|p" \
        "$out.xml" | sed 's/&quot;/"/g; s/&apos;/'"'"'/g; s/&lt;/</g; s/&gt;/>/g; s/&amp;/\&/g' > "$out"
}
# the chosen cases: those FILTER matches; with --gpu-cases, those of them a GPU lets run
listed "$logs/listed" "" ${filter:+"-tc=$filter"}
if $gpu_cases; then
    listed "$logs/without-gpu" MASKPRIOR_TESTS_WITHOUT_GPU=1 ${filter:+"-tc=$filter"}
    grep -v -x -F -f "$logs/without-gpu" "$logs/listed" > "$logs/chosen"
else
    cp "$logs/listed" "$logs/chosen"
fi
# --first's cases, then the rest: "PART<tab>FILE<tab>NAME" a line, PART "first: FILTER" or the file
: > "$logs/cases"
if [ -n "$first" ]; then
    listed "$logs/first" "" "-tc=$first"
    grep -x -F -f "$logs/first" "$logs/chosen" | sed "s|^|first: $first$tab|" >> "$logs/cases"
    grep -v -x -F -f "$logs/first" "$logs/chosen" | awk -F"$tab" -v OFS="$tab" '{ print $1, $0 }' >> "$logs/cases"
else
    awk -F"$tab" -v OFS="$tab" '{ print $1, $0 }' "$logs/chosen" >> "$logs/cases"
fi
cases=$(wc -l < "$logs/cases")
cut -f1 "$logs/cases" | awk '!seen[$0]++' > "$logs/families"
if $list; then
    cut -f2- "$logs/cases"
    [ "$cases" = 0 ] && exit 77
    exit 0
fi
if [ "$cases" = 0 ]; then
    echo "gpu_tests_isolated: no test case to run in $binary${filter:+ matching '$filter'}$($gpu_cases && echo \
         " that needs a GPU") (every one skipped?)"
    exit 77
fi
echo "gpu_tests_isolated: $(cases_of $cases) of $binary${filter:+ matching '$filter'}$($gpu_cases && echo \
     " that need a GPU"), in $(parts_of $(wc -l < "$logs/families")), a process each${wrap:+, under $wrap}"

passed=0 failed="" crashed="" not_run=0 unfinished=0
# limit: each's limit, or what is left of --total when that is less (0: none left)
limit() {
    if [ -z "$total" ]; then echo "$each"; return; fi
    left=$((total - ($(date +%s) - start)))
    if [ $left -le 0 ]; then echo 0; elif [ $left -lt "$each" ]; then echo $left; else echo "$each"; fi
}
# the part then running (its timeout's pid, the leader of its process group), stopped with the
# whole group when this script is
running=""
stop() {
    if [ -n "$running" ]; then kill -TERM "$running" 2>/dev/null; wait "$running" 2>/dev/null; fi
    exit "$1"
}
trap 'stop 129' HUP
trap 'stop 130' INT
trap 'stop 143' TERM
# tc NAMES: doctest's -tc for exactly these names (one a line): commas and backslashes escaped
tc() { printf '%s\n' "$1" | sed 's/\\/\\\\/g; s/,/\\,/g' | paste -sd, -; }
# part LOG ARGS...: the binary with ARGS in a process of its own, under the limit, its output to
# LOG; sets rc and how (what ended it: "" for doctest's own end, else why it died): rc 125 when no
# time is left to start it, 126 when it ran out of what was left of --total
part() {
    log=$1; shift
    LIMIT=$(limit)
    if [ "$LIMIT" = 0 ]; then rc=125 how="not run: the $total s were spent"; return; fi
    timeout -k 10 "$LIMIT" $wrap "$binary" --no-intro=true "$@" > "$log" 2>&1 < /dev/null &
    running=$!
    wait "$running"
    rc=$?
    running=""
    how=""
    if { [ $rc = 124 ] || [ $rc = 137 ]; } && [ "$LIMIT" -lt "$each" ]; then
        rc=126 how="did not finish: the $total s ran out after $LIMIT s of it"
    elif [ $rc = 124 ] || [ $rc = 137 ]; then how="timed out after $LIMIT s"
    elif [ $rc -gt 128 ]; then how="signal $(kill -l $rc 2>/dev/null || echo $((rc - 128)))"
    elif ! grep -q '^\[doctest\] Status:' "$log"; then how="exit $rc before doctest's summary"; fi
}
# show LOG: a part's output, cut at 100 lines, between two marks (naming LOG where it is kept)
show() {
    echo "    --- its output${kept:+ ($1)} ---"
    head -100 "$1"
    lines=$(wc -l < "$1")
    [ "$lines" -gt 100 ] && echo "    ... $((lines - 100)) more lines"
    echo "    --- end of its output ---"
}
# the cases a finished part's output names as failing, each in quotes, one a line
failing_cases() { sed -n 's/^TEST CASE:  \(.*\)$/"\1"/p' "$1" | awk '!seen[$0]++'; }
# the case doctest was in when the process died (its crash report), in quotes, or nothing
crashed_in() {
    awk '/^TEST CASE:  / { name = substr($0, 13) } /test case CRASHED/ { print "\"" name "\""; exit }' "$1"
}

while IFS= read -r family; do
    names=$(awk -F"$tab" -v f="$family" '$1 == f { print $3 }' "$logs/cases")
    count=$(echo "$names" | wc -l)
    key=$(echo "$family" | tr -c 'A-Za-z0-9_.\n-' '_')
    # a file's family: -sf and its cases' names; --first's: the names alone
    case $family in "first: "*) file="" ;; *) file=$family ;; esac
    t0=$(date +%s)
    part "$logs/$key.log" ${file:+"-sf=$file"} "-tc=$(tc "$names")"
    if [ $rc = 125 ]; then
        echo "NOT RUN  $family: $(cases_of $count), $how"
        not_run=$((not_run + count))
    elif [ $rc = 126 ]; then
        echo "DID NOT FINISH  $family: $(cases_of $count), $how"
        show "$logs/$key.log"
        unfinished=$((unfinished + count))
    elif [ -z "$how" ] && [ $rc = 0 ]; then
        echo "ok       $family: $(cases_of $count) ($(($(date +%s) - t0)) s)"
        passed=$((passed + count))
    elif [ -z "$how" ]; then
        bad=$(failing_cases "$logs/$key.log" | grep -c .)
        named=$(failing_cases "$logs/$key.log" | awk '{ printf "%s%s", (NR > 1 ? "; " : ""), $0 }')
        [ "$bad" = 0 ] && bad=$count  # every case passed doctest's checks, but the process failed (a --wrap tool)
        echo "FAILED   $family (exit $rc): $bad of $(cases_of $count) failed${named:+: $named}"
        show "$logs/$key.log"
        passed=$((passed + count - bad))
        failed="$failed${named:-$family (exit $rc)}; "
    else
        in=$(crashed_in "$logs/$key.log")
        echo "CRASHED  $family ($how)${in:+ in $in}; its $(cases_of $count) again, a process each:"
        show "$logs/$key.log"
        i=0
        echo "$names" > "$logs/$key.names"
        while IFS= read -r name; do
            i=$((i + 1))
            part "$logs/$key-$i.log" ${file:+"-sf=$file"} "-tc=$(tc "$name")"
            if [ $rc = 125 ]; then echo "  NOT RUN  \"$name\": $how"; not_run=$((not_run + 1))
            elif [ $rc = 126 ]; then echo "  DID NOT FINISH  \"$name\": $how"; unfinished=$((unfinished + 1))
            elif [ -z "$how" ] && [ $rc = 0 ]; then echo "  ok       \"$name\""; passed=$((passed + 1))
            elif [ -z "$how" ]; then
                echo "  FAILED   \"$name\" (exit $rc)"
                show "$logs/$key-$i.log"
                failed="$failed\"$name\"; "
            else
                echo "  CRASHED  \"$name\" ($how)"
                show "$logs/$key-$i.log"
                crashed="$crashed\"$name\" ($how); "
            fi
        done < "$logs/$key.names"
    fi
done < "$logs/families"

summary="$passed of $(cases_of $cases) passed"
[ -n "$failed" ] && summary="$summary; FAILED: ${failed%; }"
[ -n "$crashed" ] && summary="$summary; CRASHED: ${crashed%; }"
[ $unfinished -gt 0 ] && summary="$summary; DID NOT FINISH: $unfinished"
[ $not_run -gt 0 ] && summary="$summary; NOT RUN: $not_run"
echo "gpu_tests_isolated: $summary ($(($(date +%s) - start)) s)"
if [ "$passed" = "$cases" ]; then exit 0
elif [ -z "$failed$crashed" ]; then exit 3
else exit 1; fi
