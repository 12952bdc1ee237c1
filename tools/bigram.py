#!/usr/bin/python3
"""The loss a bigram model reaches on a prepared text: the floor any language model should beat.

    tools/bigram.py DIR [--json]

DIR is a folder data/prepare_text.py wrote (train.bin, val.bin, tokenizer.bin). The script
counts the token pairs of train.bin and predicts each validation token from the one before it
(positions 1 .. N-1 of val.bin), with two models:

  unigram   Pu(w) = (c(w) + 1) / (N_train + V)          add-one counts of the training tokens
  bigram    P(w|v) = (c(v,w) + T(v) Pu(w)) / (c(v) + T(v))           Witten-Bell interpolation

where c(v,w) counts the training pairs "v then w", c(v) = sum over w of c(v,w), and T(v) the
number of distinct tokens ever seen after v. Witten-Bell trusts a context's counts in proportion
to how many of its continuations were already seen; no constant is tuned. A context never seen
in training (c(v) = T(v) = 0) falls back on Pu.

It prints each model's validation loss in nats per token and in bits per byte of the original
text: the summed negative log-likelihood over the predicted tokens, divided by ln 2 times the
UTF-8 bytes those tokens decode to (their lengths come from tokenizer.bin). Bits per byte do not
depend on the tokenizer, so a bytes run and a BPE run can be compared. With --json, one JSON line
instead. Exit code 2 with one line on stderr when a file is missing or malformed.
"""

import argparse
import json
import math
import os
import struct
import sys

import numpy as np


class FormatError(Exception):
    """A missing or malformed file: one line on stderr, exit code 2."""


def read_file(path):
    try:
        with open(path, "rb") as f:
            return f.read()
    except OSError as e:
        raise FormatError(f"cannot read {path}: {e.strerror}")


def read_tokens(path):
    """(V, token ids as uint16) of a token file, after checking its header and size:
    "MPTOKENS", uint32 version 1, uint32 V, uint64 N, uint64 text bytes, then N uint16 ids."""
    data = read_file(path)
    if len(data) < 32 or data[:8] != b"MPTOKENS":
        raise FormatError(f"{path}: not a token file (no MPTOKENS header)")
    version, vocab, count, _ = struct.unpack("<IIQQ", data[8:32])
    if version != 1:
        raise FormatError(f"{path}: version {version}, not 1")
    if not 1 <= vocab <= 65536:
        raise FormatError(f"{path}: vocabulary size {vocab} outside 1..65536")
    if len(data) != 32 + 2 * count:
        raise FormatError(f"{path}: {len(data)} bytes where its header's {count} tokens make {32 + 2 * count}")
    tokens = np.frombuffer(data, dtype="<u2", offset=32)  # read whole: its ids are checked, and counted
    if count and tokens.max() >= vocab:
        raise FormatError(f"{path}: token id {tokens.max()} is not below V = {vocab}")
    return vocab, tokens


def read_token_lengths(path):
    """How many bytes of text each token decodes to, from tokenizer.bin: "MPVOCAB1", uint32
    version 1, V, kind, reserved, then per token float32 score, uint8 type, uint32 L, L bytes."""
    data = read_file(path)
    if len(data) < 24 or data[:8] != b"MPVOCAB1":
        raise FormatError(f"{path}: not a vocabulary file (no MPVOCAB1 header)")
    version, vocab, _, _ = struct.unpack("<IIII", data[8:24])
    if version != 1:
        raise FormatError(f"{path}: version {version}, not 1")
    lengths, pos = np.zeros(vocab, dtype=np.int64), 24
    for i in range(vocab):
        if pos + 9 > len(data):
            raise FormatError(f"{path}: ends inside entry {i} of {vocab}")
        lengths[i] = struct.unpack("<I", data[pos + 5:pos + 9])[0]   # skip score (4) and type (1)
        pos += 9 + lengths[i]
    if pos != len(data):
        raise FormatError(f"{path}: {len(data) - pos} bytes after the last entry")
    return lengths


def evaluate(train, val, vocab, lengths):
    """The two models' numbers on val, fitted on train (both uint16 arrays of ids < vocab)."""
    # Unigram: add-one counts over all training tokens.
    unigram = (np.bincount(train, minlength=vocab) + 1.0) / (len(train) + vocab)

    # Bigram counts, kept sparse: a pair (v, w) is the key v * V + w, and np.unique gives the
    # distinct keys in sorted order with how often each occurs (V can be 65536: no V x V table).
    before, after = train[:-1].astype(np.int64), train[1:].astype(np.int64)
    pair_keys, pair_counts = np.unique(before * vocab + after, return_counts=True)
    context_count = np.bincount(before, minlength=vocab).astype(np.float64)        # c(v)
    distinct_next = np.bincount(pair_keys // vocab, minlength=vocab).astype(np.float64)  # T(v)

    # The validation pairs: look each key up among the training keys (binary search).
    v, w = val[:-1].astype(np.int64), val[1:].astype(np.int64)
    keys = v * vocab + w
    at = np.minimum(np.searchsorted(pair_keys, keys), len(pair_keys) - 1)
    pair = np.where(pair_keys[at] == keys, pair_counts[at], 0).astype(np.float64)   # c(v, w)

    seen, weight = context_count[v] + distinct_next[v], distinct_next[v]
    bigram = np.where(seen > 0, (pair + weight * unigram[w]) / np.maximum(seen, 1), unigram[w])

    predicted_bytes = int(lengths[w].sum())
    result = {"vocab": vocab, "train_tokens": len(train), "val_predicted": len(w),
              "val_predicted_bytes": predicted_bytes}
    for name, p in (("unigram", unigram[w]), ("bigram", bigram)):
        nll = float(-np.log(p).sum())
        result[f"{name}_loss"] = nll / len(w)
        result[f"{name}_bpb"] = nll / (math.log(2) * predicted_bytes) if predicted_bytes else float("nan")
    return result


def main(argv):
    p = argparse.ArgumentParser(prog="bigram.py", description=__doc__.split("\n")[0])
    p.add_argument("dir", help="a folder written by data/prepare_text.py")
    p.add_argument("--json", action="store_true", help="print one JSON line instead of the table")
    args = p.parse_args(argv)

    vocab, train = read_tokens(os.path.join(args.dir, "train.bin"))
    val_vocab, val = read_tokens(os.path.join(args.dir, "val.bin"))
    lengths = read_token_lengths(os.path.join(args.dir, "tokenizer.bin"))
    if not vocab == val_vocab == len(lengths):
        raise FormatError(f"{args.dir}: V differs: train.bin {vocab}, val.bin {val_vocab}, "
                          f"tokenizer.bin {len(lengths)}")
    if len(train) < 2 or len(val) < 2:
        raise FormatError(f"{args.dir}: train.bin and val.bin need 2 tokens or more each")
    result = evaluate(train, val, vocab, lengths)

    if args.json:
        print(json.dumps({"data_dir": args.dir, **result}))
        return
    print(f"bigram.py: {args.dir}: V = {vocab}, fitted on {result['train_tokens']:,d} training tokens; "
          f"{result['val_predicted']:,d} validation tokens predicted ({result['val_predicted_bytes']:,d} bytes)")
    for name, label in (("unigram", "unigram (add-one)"), ("bigram", "bigram (Witten-Bell)")):
        print(f"  {label:21s} loss {result[f'{name}_loss']:.4f} nats/token  "
              f"{result[f'{name}_bpb']:.4f} bits/byte")


if __name__ == "__main__":
    try:
        main(sys.argv[1:])
    except FormatError as e:
        print(f"bigram.py: error: {e}", file=sys.stderr)
        sys.exit(2)
