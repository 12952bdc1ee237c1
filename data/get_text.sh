#!/bin/sh
# data/get_text.sh: downloads a text data set for the language-model task (--task lm), then
# tokenizes it with data/prepare_text.py and prints the --data-dir to use. Needs the internet,
# curl or wget (and unzip for WikiText-2), and Python with numpy (and sentencepiece for bpe).
#
#   sh data/get_text.sh tinystories|wikitext2 [--tokenizer bpe|bytes] [--vocab N]
#                                              (default: --tokenizer bpe --vocab 4096)
#
#   tinystories: TinyStoriesV2-GPT4-train.txt (about 2.2 GB) and TinyStoriesV2-GPT4-valid.txt
#                (about 22 MB) from Hugging Face (Eldan and Li, 2023) -> data/tinystories/
#   wikitext2:   wikitext-2-raw-v1.zip (a few MB; Merity et al., 2016), the raw version (the
#                original text, no <unk>), unpacked into data/wikitext2/wikitext-2-raw/:
#                wiki.train.raw, wiki.valid.raw, wiki.test.raw
#
# The tokens go to data/<name>-bpe<N>/ (or data/<name>-bytes/): trained on the training file,
# validated on the validation file (prepare_text.py --input TRAIN --val-input VALID). WikiText-2's
# test file is not used: it is kept for a final report, once every choice has been made on the
# validation file.
#
# Run again, it downloads nothing that is already here. Neither source publishes a checksum, so
# none is checked; prepare_text.py refuses a file that is not UTF-8 text. WikiText-2 was first
# published by Salesforce on Amazon S3 (s3.amazonaws.com/research.metamind.io/wikitext/), which
# no longer serves it; the address below is Stephen Merity's mirror of that archive, which could
# not be checked from the machine this script was written on (no internet). If an address fails,
# TEXT_MIRROR replaces the folder the files come from (curl also reads file:// addresses).
# The Python is ${MASKPRIOR_PYTHON:-/usr/bin/python3}.
set -eu

usage="usage: sh data/get_text.sh tinystories|wikitext2 [--tokenizer bpe|bytes] [--vocab N]"
data=$(dirname "$0")
python=${MASKPRIOR_PYTHON:-/usr/bin/python3}
name=${1:-}
[ $# -gt 0 ] && shift
tokenizer=bpe
vocab=4096
while [ $# -gt 0 ]; do
    case "$1" in
        --tokenizer|--vocab)
            [ $# -ge 2 ] || { echo "get_text.sh: $1 needs a value ($usage)" >&2; exit 2; }
            if [ "$1" = --tokenizer ]; then tokenizer=$2; else vocab=$2; fi
            shift 2 ;;
        *)  echo "get_text.sh: unknown argument '$1' ($usage)" >&2
            exit 2 ;;
    esac
done

# Downloads $1 into the file $2 (through $2.part, so that a broken download is never taken for
# a whole file), unless $2 is already here.
fetch() {
    if [ -s "$2" ]; then
        echo "get_text.sh: $2 is already here"
        return
    fi
    echo "get_text.sh: downloading $1"
    if command -v curl >/dev/null 2>&1; then
        curl --fail --location --output "$2.part" "$1"
    elif command -v wget >/dev/null 2>&1; then
        wget --output-document="$2.part" "$1"
    else
        echo "get_text.sh: neither curl nor wget is installed" >&2
        exit 1
    fi
    mv "$2.part" "$2"
}

case "$name" in
    tinystories)
        dest=$data/tinystories
        mkdir -p "$dest"
        url=${TEXT_MIRROR:-https://huggingface.co/datasets/roneneldan/TinyStories/resolve/main}
        fetch "$url/TinyStoriesV2-GPT4-train.txt" "$dest/TinyStoriesV2-GPT4-train.txt"
        fetch "$url/TinyStoriesV2-GPT4-valid.txt" "$dest/TinyStoriesV2-GPT4-valid.txt"
        train=$dest/TinyStoriesV2-GPT4-train.txt
        valid=$dest/TinyStoriesV2-GPT4-valid.txt ;;
    wikitext2)
        dest=$data/wikitext2
        mkdir -p "$dest"
        url=${TEXT_MIRROR:-https://wikitext.smerity.com}
        fetch "$url/wikitext-2-raw-v1.zip" "$dest/wikitext-2-raw-v1.zip"
        command -v unzip >/dev/null 2>&1 || { echo "get_text.sh: unzip is not installed" >&2; exit 1; }
        unzip -o -q "$dest/wikitext-2-raw-v1.zip" -d "$dest"
        train=$dest/wikitext-2-raw/wiki.train.raw
        valid=$dest/wikitext-2-raw/wiki.valid.raw
        echo "get_text.sh: $dest/wikitext-2-raw/wiki.test.raw is kept for a final report (not tokenized)" ;;
    *)  echo "get_text.sh: the data set is tinystories or wikitext2, not '$name' ($usage)" >&2
        exit 2 ;;
esac

case "$tokenizer" in
    bpe)   out=$data/$name-bpe$vocab
           "$python" "$data/prepare_text.py" --input "$train" --val-input "$valid" \
               --tokenizer bpe --vocab "$vocab" --out "$out" ;;
    bytes) out=$data/$name-bytes
           "$python" "$data/prepare_text.py" --input "$train" --val-input "$valid" \
               --tokenizer bytes --out "$out" ;;
    *)     echo "get_text.sh: the tokenizer is bpe or bytes, not '$tokenizer'" >&2
           exit 2 ;;
esac
echo "get_text.sh: use --task lm --data-dir $out"
