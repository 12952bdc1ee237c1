#!/bin/sh
# data/prepare_text.py on tests/fixtures/text/tiny.txt (16 short stories, each ending with an
# <|endoftext|> line; double spaces, a tab, "café — naïve", digits), with the bytes tokenizer and
# with a BPE of 400 pieces (the smallest round size sentencepiece accepts there: 256 byte pieces,
# <unk>, <|endoftext|> and the fixture's ~65 characters must all fit). Checks the files' headers
# and sizes, that the tokens decode back to the fixture byte for byte and that the last 2 stories
# (ceil of 10% of 16) are the validation split, that sentencepiece decodes the BPE ids to the same
# text, that a second run writes the same bytes, that awkward text ('\r\n', runs of spaces, a NUL,
# a literal '▁', no final newline) comes back whole, and that bad input gives exit code 2 and one
# line. Then tools/bigram.py on the bytes output: a finite loss below ln 256 (uniform guessing).
# Exit 0 when all holds, 1 when not, 77 (skipped) when sentencepiece or numpy is missing.
# The Python is ${MASKPRIOR_PYTHON:-/usr/bin/python3}.
cd "$(dirname "$0")/.." || exit 1
python=${MASKPRIOR_PYTHON:-/usr/bin/python3}
if ! "$python" -c "import sentencepiece, numpy" 2>/dev/null; then
    echo "prepare_text test: skipped (no sentencepiece or numpy)"
    exit 77
fi
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
failed=0
fail() { echo "prepare_text test: FAILED: $1"; failed=1; }
fixture=tests/fixtures/text/tiny.txt

# prepare NAME ARGS...: runs prepare_text.py on the fixture into $tmp/NAME; a failure is reported.
prepare() {
    out=$1; shift
    "$python" data/prepare_text.py --input "$fixture" --out "$tmp/$out" "$@" >"$tmp/stdout" 2>"$tmp/stderr" \
        || fail "prepare_text.py $* exited with $?: $(cat "$tmp/stderr")"
}

# 1. Both tokenizers, each twice (into another folder): the second run must write the same bytes.
prepare bytes --tokenizer bytes
prepare bytes_again --tokenizer bytes
prepare bpe --tokenizer bpe --vocab 400
prepare bpe_again --tokenizer bpe --vocab 400
for name in train.bin val.bin tokenizer.bin meta.json; do
    cmp -s "$tmp/bytes/$name" "$tmp/bytes_again/$name" || fail "bytes: $name differs between two runs"
done
for name in train.bin val.bin tokenizer.bin tokenizer.model meta.json; do
    cmp -s "$tmp/bpe/$name" "$tmp/bpe_again/$name" || fail "bpe: $name differs between two runs"
done

# 2. Awkward text as the validation file of a BPE run: prepare_text.py checks the round trip
# itself (exit 3 if it fails); the check below decodes it once more.
{
    printf 'two  spaces,\ta tab, CRLF\r\n   leading\n\n a NUL \000 here, '
    printf 'a literal \342\226\201 mark, an emoji \360\237\230\200\n<|endoftext|>caf\303\251 no final newline  '
} >"$tmp/awkward.txt"
prepare awkward --tokenizer bpe --vocab 400 --val-input "$tmp/awkward.txt"

# 3. The files, read back with nothing but the format: headers, sizes, ids, decoding, the split.
"$python" - "$tmp" "$fixture" >"$tmp/check" 2>&1 <<'EOF' || fail "$(cat "$tmp/check")"
import json, math, struct, sys
import numpy as np
import sentencepiece as spm
tmp, fixture = sys.argv[1], sys.argv[2]
text = open(fixture, "rb").read()
# The fixture's 16 documents, each ending with its separator line; the last 2 are validation.
documents = [d + b"<|endoftext|>\n" for d in text.split(b"<|endoftext|>\n")[:-1]]
assert b"".join(documents) == text and len(documents) == 16, "the fixture is not 16 documents"
expected = {"train": b"".join(documents[:14]), "val": b"".join(documents[14:])}

def vocabulary(folder):
    """tokenizer.bin: header, then per id (score, type, bytes)."""
    data = open(f"{folder}/tokenizer.bin", "rb").read()
    magic, version, size, kind, reserved = struct.unpack("<8sIIII", data[:24])
    assert (magic, version, reserved) == (b"MPVOCAB1", 1, 0), f"{folder}: tokenizer.bin header"
    entries, pos = [], 24
    for _ in range(size):
        score, kind_of_piece, length = struct.unpack("<fBI", data[pos:pos + 9])
        entries.append((score, kind_of_piece, data[pos + 9:pos + 9 + length]))
        pos += 9 + length
    assert pos == len(data), f"{folder}: tokenizer.bin has bytes after its {size} entries"
    return kind, entries

def tokens(path, size, text):
    """A token file's ids, after checking its header against the vocabulary size and the text."""
    data = open(path, "rb").read()
    magic, version, vocab, count, text_bytes = struct.unpack("<8sIIQQ", data[:32])
    assert (magic, version, vocab) == (b"MPTOKENS", 1, size), f"{path}: header {magic, version, vocab}"
    assert len(data) == 32 + 2 * count, f"{path}: {len(data)} bytes for {count} tokens"
    assert text_bytes == len(text), f"{path}: says {text_bytes} bytes of text, not {len(text)}"
    ids = np.frombuffer(data, dtype="<u2", offset=32)
    assert count == 0 or ids.max() < size, f"{path}: an id is not below V = {size}"
    return ids.tolist()

for folder, want_kind, want_size, texts in (
        ("bytes", 0, 256, expected), ("bpe", 1, 400, expected),
        ("awkward", 1, 400, {"train": text, "val": open(f"{tmp}/awkward.txt", "rb").read()})):
    folder = f"{tmp}/{folder}"
    kind, entries = vocabulary(folder)
    assert (kind, len(entries)) == (want_kind, want_size), f"{folder}: kind {kind}, V {len(entries)}"
    if kind == 0:
        assert entries == [(0.0, 1, bytes([b])) for b in range(256)], f"{folder}: not the 256 bytes"
    else:
        types = [t for _, t, _ in entries]
        assert types[0] == 2 and entries[0][2] == b"", f"{folder}: id 0 is not <unk> (control, no bytes)"
        assert types.count(1) == 256 and types.count(2) == 1, f"{folder}: not 256 byte pieces and one control"
        assert [e[2] for e in entries if e[1] == 3] == [b"<|endoftext|>"], f"{folder}: user-defined pieces"
        sp = spm.SentencePieceProcessor(model_file=f"{folder}/tokenizer.model")
    meta = json.load(open(f"{folder}/meta.json"))
    for split in ("train", "val"):
        ids = tokens(f"{folder}/{split}.bin", want_size, texts[split])
        decoded = b"".join(entries[i][2] for i in ids)
        assert decoded == texts[split], f"{folder}/{split}.bin does not decode to its text"
        if kind == 1:
            assert sp.decode(ids).encode() == texts[split], f"{folder}/{split}.bin: sentencepiece decodes otherwise"
        assert meta[f"{split}_tokens"] == len(ids) and meta[f"{split}_bytes"] == len(texts[split]), \
            f"{folder}/meta.json: {split} counts"
    if folder.endswith("bpe"):
        assert (meta["train_documents"], meta["val_documents"]) == (14, 2), f"{folder}/meta.json: documents"
EOF

# 4. Bad input: exit code 2 and one line "prepare_text.py: error: ...".
printf 'caf\351\n' >"$tmp/latin1.txt"
: >"$tmp/empty.txt"
bad() {
    why=$1; shift
    "$python" data/prepare_text.py --out "$tmp/bad" "$@" >/dev/null 2>"$tmp/stderr"
    status=$?
    [ "$status" = 2 ] || fail "$why: exit code $status, not 2"
    if [ "$(wc -l <"$tmp/stderr")" != 1 ] || ! grep -q "^prepare_text.py: error: " "$tmp/stderr"; then
        fail "$why: stderr is not one 'prepare_text.py: error:' line: $(cat "$tmp/stderr")"
    fi
}
bad "a missing input file" --input "$tmp/no_such_file.txt" --tokenizer bytes
bad "a file that is not UTF-8" --input "$tmp/latin1.txt" --tokenizer bytes
bad "an empty file" --input "$tmp/empty.txt" --tokenizer bytes
bad "bpe without --vocab" --input "$fixture" --tokenizer bpe

# 5. tools/bigram.py on the bytes output: a finite loss, below ln 256 = 5.545 nats (uniform).
if "$python" tools/bigram.py "$tmp/bytes" --json >"$tmp/bigram" 2>&1; then
    "$python" -c "import json, math, sys; r = json.load(open(sys.argv[1])); sys.exit(not all(
        math.isfinite(r[k]) and 0 < r[k] < math.log(256) for k in ('bigram_loss', 'unigram_loss')))" "$tmp/bigram" \
        || fail "bigram.py: not a finite loss below ln 256: $(cat "$tmp/bigram")"
else
    fail "bigram.py exited with an error: $(cat "$tmp/bigram")"
fi
"$python" tools/bigram.py "$tmp" >/dev/null 2>&1 && fail "bigram.py accepted a folder without token files"

[ "$failed" = 0 ] && echo "prepare_text test: ok"
exit "$failed"
