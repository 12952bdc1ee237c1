#!/bin/sh
# tools/bad_inputs.sh: the catalogue of bad inputs, for docs/results.md ("Reliability"). Makes
# each kind of bad input a user can give (flags, data files of every format, checkpoints, output
# paths, a diverging run) and prints one markdown row per case: what was given and the program's
# answer. Each answer must be exactly one line on stderr, "maskprior: error: ...", with exit
# code 2 (not a crash, not a silent default); a case that answers otherwise is marked FAILED and
# the script exits 1. The unit tests check the same answers case by case (tests/test_cli*.cu).
#   sh tools/bad_inputs.sh [BINARY]     (./maskprior by default)
set -u
cd "$(dirname "$0")/.."
maskprior=${1:-./maskprior}
python=${MASKPRIOR_PYTHON:-/usr/bin/python3}
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
tiny="--device cpu --width 8 --layers 1 --heads 2 --head-size 4 --mlp 8"
failed=0

# case WHAT ARGS...: runs the program on ARGS and prints the row
case_row() {
    what=$1
    shift
    "$maskprior" "$@" > "$tmp/stdout" 2> "$tmp/stderr"
    rc=$?
    answer=$(cat "$tmp/stderr")
    if [ $rc = 2 ] && [ "$(wc -l < "$tmp/stderr")" = 1 ] && [ "${answer#maskprior: error: }" != "$answer" ]; then
        echo "| $what | \`${answer#maskprior: error: }\` |" | sed "s|$tmp|/tmp/x|g"
    else
        echo "| $what | FAILED: exit $rc, $(wc -l < "$tmp/stderr") lines: $(head -c 200 "$tmp/stderr") |"
        failed=1
    fi
}

# files to break: a checkpoint, a structure, arithmetic lines, IDX, CIFAR, an image folder, token folders
"$maskprior" --task maj3 $tiny --steps 2 --out "$tmp/run" > /dev/null 2>&1 || { echo "the good run failed"; exit 1; }
ckpt=$tmp/run/model.safetensors
head -c 100 "$ckpt" > "$tmp/cut.safetensors"
printf 'not a checkpoint' > "$tmp/garbage.safetensors"
"$python" - "$ckpt" "$tmp" <<'EOF'
import struct, sys
data = open(sys.argv[1], "rb").read()
n = struct.unpack("<Q", data[:8])[0]
out = sys.argv[2]
open(out + "/hugeheader.safetensors", "wb").write(struct.pack("<Q", 1 << 60) + data[8:])
open(out + "/badjson.safetensors", "wb").write(data[:8] + b"{" * n + data[8 + n:])
header = data[8:8 + n].replace(b'"F32"', b'"F16"', 1)
open(out + "/f16.safetensors", "wb").write(data[:8] + header + data[8 + n:])
EOF
printf '1 0\n0 1\n' > "$tmp/G_small.txt"
printf '1 0 x\n' > "$tmp/G_word.txt"
printf '$123+456=9750$\n$123+456=9751$\n' > "$tmp/add_wrong.txt"
printf '$12+34=6400$\nhello\n' > "$tmp/add_line.txt"
: > "$tmp/empty.txt"
mkdir -p "$tmp/idx" "$tmp/cifar/cifar-10-batches-bin" "$tmp/images/train/a" "$tmp/images/test/a"
# IDX: 2 labels, and a header for 2 images of 28 x 28 followed by 100 of their 1568 bytes
printf '\000\000\010\001\000\000\000\002\001\002' > "$tmp/idx/train-labels-idx1-ubyte"
{ printf '\000\000\010\003\000\000\000\002\000\000\000\034\000\000\000\034'; head -c 100 /dev/zero; } \
    > "$tmp/idx/train-images-idx3-ubyte"
head -c 3000 /dev/zero > "$tmp/cifar/cifar-10-batches-bin/data_batch_1.bin"
printf 'not a png' > "$tmp/images/train/a/broken.png"
"$python" data/prepare_text.py --input tests/fixtures/text/tiny.txt --out "$tmp/text" --tokenizer bytes > /dev/null
cp -r "$tmp/text" "$tmp/text_cut"
head -c 40 "$tmp/text/train.bin" > "$tmp/text_cut/train.bin"
cp -r "$tmp/text" "$tmp/vocab_cut"
head -c 100 "$tmp/text/tokenizer.bin" > "$tmp/vocab_cut/tokenizer.bin"

echo "| bad input | the answer (exit code 2, one line on stderr after \`maskprior: error:\`) |"
echo "|---|---|"
case_row "an unknown flag" --frobnicate 3
case_row "a flag without its value" --steps
case_row "a malformed number" --width 12x
case_row "a number out of range" --heads 0
case_row "NaN as a learning rate" --lr nan
case_row "an unknown task" --task parity9
case_row "a stray word" stray
case_row "an impossible shape: B·T·C past 2^31" $tiny --batch 100000000 --width 4096
case_row "--steps and --epochs together" --steps 10 --epochs 2
case_row "a flag of another task family" --task maj3 --patch 4
case_row "--target: a dangling operator" $tiny --task boolean --target 'x0*x1+' --unseen x0=-1
case_row "--target: an unknown name" $tiny --task boolean --target 'x0*y1' --unseen x0=-1
case_row "--target: a bit past the cube" $tiny --task boolean --target 'x0*x15' --unseen x0=-1
case_row "--target: two factors without *" $tiny --task boolean --target '2 x0' --unseen x0=-1
case_row "--target: an unclosed parenthesis" $tiny --task boolean --target 'sign(x0+x1' --unseen x0=-1
case_row "--target: constant on the seen domain" $tiny --task boolean --target 'x0+1' --unseen x0=1
case_row "--unseen: a value other than ±1" $tiny --task boolean --target 'x0*x1' --unseen x0=0
case_row "--unseen: a bit fixed twice" $tiny --task boolean --target 'x0*x1' --unseen x0=-1,x0=1
case_row "--unseen: no constraint (the whole cube held out)" $tiny --task boolean --target 'x0*x1' --unseen ''
case_row "--unseen: a parity that contradicts the others" $tiny --task boolean --target 'x0*x2' --unseen 'x0=-1,x1=-1,x0*x1=-1'
case_row "--unseen: a parity that follows from the others" $tiny --task boolean --target 'x0*x2' --unseen 'x0=-1,x1=-1,x0*x1=1'
case_row "--target: a minus sign pasted from a document" $tiny --task boolean --target 'x0 − x1' --unseen x0=-1
case_row "--target: an overflow inside sign()" $tiny --task boolean --target "sign(1$(printf '%0200d' 0)*1$(printf '%0200d' 0))*x2" --unseen x0=-1
case_row "--target: past a float's range" $tiny --task boolean --target "1$(printf '%039d' 0)*x2" --unseen x0=-1
case_row "--g-from for a task that is not Boolean" $tiny --task add3 --g-from data
case_row "--device cuda without a GPU" $tiny --device cuda
case_row "--resume of a missing file" $tiny --resume /nonexistent/model.safetensors
case_row "--resume of a file that is not safetensors" $tiny --resume "$tmp/garbage.safetensors"
case_row "a checkpoint cut at 100 bytes" $tiny --task maj3 --resume "$tmp/cut.safetensors"
case_row "a checkpoint whose header length is 2^60" $tiny --task maj3 --resume "$tmp/hugeheader.safetensors"
case_row "a checkpoint with a corrupt JSON header" $tiny --task maj3 --resume "$tmp/badjson.safetensors"
case_row "a checkpoint with float16 tensors" $tiny --task maj3 --resume "$tmp/f16.safetensors"
case_row "a checkpoint of another task" $tiny --task 2parity --resume "$ckpt"
case_row "a checkpoint of another width" --device cpu --task maj3 --resume "$ckpt"
case_row "--continue on a folder of another run" $tiny --task maj3 --init mask --out "$tmp/run" --continue
case_row "--mask-structure: a missing file" $tiny --init mask --mask-structure /nonexistent/G.txt
case_row "--mask-structure: the wrong size" $tiny --task maj3 --init mask --mask-structure "$tmp/G_small.txt"
case_row "--mask-structure: a word" $tiny --task maj3 --init mask --mask-structure "$tmp/G_word.txt"
case_row "arithmetic: a wrong answer in the data" $tiny --task add3 --train-file "$tmp/add_wrong.txt"
case_row "arithmetic: a malformed line" $tiny --task add3 --train-file "$tmp/add_line.txt"
case_row "arithmetic: an empty file" $tiny --task add3 --train-file "$tmp/empty.txt"
case_row "Fashion-MNIST: a missing folder" $tiny --task fashion-mnist --data-dir /nonexistent
case_row "IDX: a truncated images file" $tiny --task fashion-mnist --data-dir "$tmp/idx"
case_row "CIFAR-10: a truncated batch file" $tiny --task cifar10 --data-dir "$tmp/cifar"
case_row "an image folder with a broken PNG" $tiny --task images --data-dir "$tmp/images"
case_row "--task lm: a missing folder" $tiny --task lm --data-dir /nonexistent
case_row "--task lm: a truncated token file" $tiny --task lm --data-dir "$tmp/text_cut"
case_row "--task lm: a truncated tokenizer.bin" $tiny --task lm --data-dir "$tmp/vocab_cut"
case_row "--generate from a non-language checkpoint" --generate "$ckpt"
case_row "--save where no file can be made" $tiny --task maj3 --save /proc/no/model.safetensors
case_row "--out where no folder can be made" $tiny --task maj3 --out /proc/run
case_row "a run that diverges (--lr 1e8)" $tiny --task maj3 --steps 20 --checkpoint-every 1 --lr 1e8 \
    --out "$tmp/diverge"
exit $failed
