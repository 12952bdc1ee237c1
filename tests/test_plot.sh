#!/bin/sh
# tools/plot.py on the fixture runs in tests/fixtures/plot (one default, one qk-svd, one mask
# run of 2parity): every PNG is written and is a real image; a folder that is not a run gives
# exit code 2 and one line on stderr; metrics missing or null in a log are no error. Then
# tools/arithmetic_table.py, tools/boolean_targets_table.py and tools/boolean_data_g_table.py on
# hand-written metrics.json files.
# Exit 0 when all holds, 1 when not, 77 (skipped) when matplotlib is missing.
# The Python is ${MASKPRIOR_PYTHON:-/usr/bin/python3}.
cd "$(dirname "$0")/.." || exit 1
python=${MASKPRIOR_PYTHON:-/usr/bin/python3}
if ! "$python" -c "import matplotlib" 2>/dev/null; then
    echo "plot test: skipped (no matplotlib)"
    exit 77
fi
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
failed=0
fail() { echo "plot test: FAILED: $1"; failed=1; }

# 1. The fixture: four PNG files, each path printed, each a PNG wider and taller than 100 px.
if "$python" tools/plot.py tests/fixtures/plot/* --out "$tmp/out" >"$tmp/stdout" 2>"$tmp/stderr"; then
    for name in loss prior_mass persistence accuracy; do
        png="$tmp/out/$name.png"
        grep -qx "$png" "$tmp/stdout" || fail "$name.png: path not printed"
        # A PNG starts with an 8-byte signature, then the IHDR chunk: length (4 bytes), "IHDR",
        # width and height (4 bytes each, big-endian).
        "$python" - "$png" 2>/dev/null <<'EOF' || fail "$name.png: missing, empty or not a PNG of more than 100x100 px"
import struct, sys
with open(sys.argv[1], "rb") as f:
    head = f.read(24)
ok = len(head) == 24 and head[:8] == b"\x89PNG\r\n\x1a\n" and head[12:16] == b"IHDR"
sys.exit(0 if ok and min(struct.unpack(">II", head[16:24])) > 100 else 1)
EOF
    done
else
    fail "exit code $? on the fixture: $(cat "$tmp/stderr")"
fi

# 2. A folder without log.jsonl and metrics.json: exit code 2, one line "plot.py: error: ...".
"$python" tools/plot.py tests/fixtures --out "$tmp/bad" >/dev/null 2>"$tmp/stderr"
status=$?
[ "$status" = 2 ] || fail "a folder that is not a run gave exit code $status, not 2"
if [ "$(wc -l <"$tmp/stderr")" != 1 ] || ! grep -q "^plot.py: error: " "$tmp/stderr"; then
    fail "a folder that is not a run: stderr is not one 'plot.py: error:' line: $(cat "$tmp/stderr")"
fi

# 3. Metrics missing or null in some lines (a run without a mask, an older log): still exit 0.
mkdir "$tmp/sparse"
echo '{"task": "maj3", "init": "qk-opt", "seed": 2}' >"$tmp/sparse/metrics.json"
cat >"$tmp/sparse/log.jsonl" <<'EOF'
{"step": 0, "loss": null, "eval_loss": 1.3, "prior_mass": [0.9, null], "mask_drift": null}
{"step": 500, "loss": 0.01, "qk_cosine": [0.7, 0.6], "grad_norm_qk": [0.0, 0.02]}
{"step": 1000}
EOF
"$python" tools/plot.py "$tmp/sparse" --out "$tmp/sparse_out" >/dev/null 2>"$tmp/stderr" \
    || fail "a run with missing and null metrics: $(cat "$tmp/stderr")"

# 4. tools/arithmetic_table.py: two seeds of one setting give one row, mean ± std in percent,
# with the paper's number beside it; a folder without arithmetic runs is an error.
for seed in 1 2; do
    mkdir -p "$tmp/arith/s$seed"
    echo "{\"task\": \"add3\", \"init\": \"mask\", \"seed\": $seed, \"device\": \"CPU\", \"train_examples\": 4000,
          \"eval_examples\": 2000, \"seq_acc\": 0.$((seed + 4)), \"digit_acc\": 0.9, \"prior_mass\": [0.9, 1.0]}" \
        >"$tmp/arith/s$seed/metrics.json"
done
"$python" tools/arithmetic_table.py "$tmp/arith" >"$tmp/table" 2>&1 || fail "arithmetic_table.py: $(cat "$tmp/table")"
grep -qF "| add3 | 0.004 | 4000 | mask | 2 | 55.00 ± 7.07 | 90.00 ± 0.00 | 0.950 ± 0.000 | 77.49 |" "$tmp/table" \
    || fail "arithmetic_table.py: not the expected row: $(cat "$tmp/table")"
"$python" tools/arithmetic_table.py "$tmp/sparse" >/dev/null 2>&1 && fail "arithmetic_table.py accepted a folder without arithmetic runs"

# 5. tools/boolean_targets_table.py: two seeds of one target give one row named by their folder,
# with the MDI's accuracy beside it; a null acc_unseen (f = 0 on the whole held-out part) is left
# out of its mean; a folder without runs is an error.
for seed in 1 2; do
    mkdir -p "$tmp/targets/parity3-mask-s$seed"
    unseen=$([ $seed = 1 ] && echo 0.5 || echo null)
    echo "{\"task\": \"boolean\", \"target\": \"x0*x1*x2\", \"unseen\": \"x0=-1,x1=-1\", \"variant\": \"mask\",
          \"seed\": $seed, \"device\": \"CPU\", \"seconds\": 30, \"acc_cube\": 0.$((seed + 7))75,
          \"acc_unseen\": $unseen, \"exact_cube\": 0.75, \"mdi_agreement\": 0.5, \"mdi_acc_cube\": 0.75,
          \"prior_mass\": [0.9, 1.0]}" >"$tmp/targets/parity3-mask-s$seed/metrics.json"
done
"$python" tools/boolean_targets_table.py "$tmp/targets" >"$tmp/table" 2>&1 \
    || fail "boolean_targets_table.py: $(cat "$tmp/table")"
row="| parity3 | \`x0*x1*x2\` | \`x0=-1,x1=-1\` | mask | 2 | 92.50 ± 7.07 | 50.00 ± 0.00 | 75.00 ± 0.00 |"
row="$row 50.00 ± 0.00 | 0.950 ± 0.000 | 75.00 |"
grep -qF "$row" "$tmp/table" || fail "boolean_targets_table.py: not the expected row: $(cat "$tmp/table")"
grep -qF "1.0 minutes of runs in all" "$tmp/table" || fail "boolean_targets_table.py: not the runs' minutes"
"$python" tools/boolean_targets_table.py "$tmp/arith" >/dev/null 2>"$tmp/stderr" \
    && fail "boolean_targets_table.py accepted a folder without Boolean-target runs"
grep -q "^boolean_targets_table.py: error: no metrics.json" "$tmp/stderr" \
    || fail "boolean_targets_table.py: a folder without its runs is not one error line: $(cat "$tmp/stderr")"

# 6. tools/boolean_data_g_table.py: one row per target, its three kinds of run by folder and
# g_from, the two readings computed from f's text (maj3: 25% of its weight off x0, x1, and half of
# its held-out points moved onto seen ones by x0 <-> x2; x0 x1 x2 x3 held out where x0 x1 = 1: none,
# and 3/4), and what the data's G was read off beside the oracle's.
g_run() {  # folder target unseen variant g_from g_support acc_unseen
    mkdir -p "$tmp/g/$1-s1"
    echo "{\"task\": \"boolean\", \"target\": \"$2\", \"unseen\": \"$3\", \"g_from\": \"$5\",
          \"g_support\": $6, \"mdi_acc_unseen\": 0.5, \"variant\": \"$4\", \"seed\": 1, \"device\": \"CPU\",
          \"seconds\": 60, \"acc_unseen\": $7, \"mdi_acc_cube\": 0.875}" >"$tmp/g/$1-s1/metrics.json"
}
g_run maj-default "sign(x0+x1+x2)" "x0=-1,x1=-1" default target '["x0"]' 0.5
g_run maj-mask "sign(x0+x1+x2)" "x0=-1,x1=-1" mask target '["x0", "x1"]' 1.0
g_run maj-mask-g-data "sign(x0+x1+x2)" "x0=-1,x1=-1" mask data '["x0", "x1"]' 1.0
g_run p4-mask "x0*x1*x2*x3" "x0*x1=1" mask target '["x0*x1*x2*x3"]' 0.0
g_run p4-mask-g-data "x0*x1*x2*x3" "x0*x1=1" mask data '["x2*x3"]' 0.25
"$python" tools/boolean_data_g_table.py "$tmp/g" >"$tmp/table" 2>&1 || fail "boolean_data_g_table.py: $(cat "$tmp/table")"
for row in "| maj | \`sign(x0+x1+x2)\` | \`x0=-1,x1=-1\` | 25% | 50% | 50.0 | 50 (50) | 100 (100) | 100 (100) | the oracle's |" \
    "| p4 | \`x0*x1*x2*x3\` | \`x0*x1=1\` | 0% | 75% | 50.0 | - | 0 (0) | 25 (25) | \`x2*x3\` |"; do
    grep -qF "$row" "$tmp/table" || fail "boolean_data_g_table.py: not the row $row: $(cat "$tmp/table")"
done
grep -qF "5.0 minutes of runs in all" "$tmp/table" || fail "boolean_data_g_table.py: not the runs' minutes"

[ "$failed" = 0 ] && echo "plot test: ok"
exit "$failed"
