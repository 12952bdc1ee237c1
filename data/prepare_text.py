#!/usr/bin/python3
"""Turns a UTF-8 text file into token files for the language-model task, as llm.c and llama2.c do.

    data/prepare_text.py --input FILE [--val-input FILE] --tokenizer bpe|bytes [--vocab N] --out DIR
                         [--val-fraction 0.1] [--max-train-lines N]

The text is cut into a training and a validation part. With --val-input, the validation text is
that file and the training text all of --input. Otherwise the file is cut into documents at each
'<|endoftext|>' (TinyStories' separator; a document keeps its separator and the newline after it),
or into lines when there is no separator, and the last ceil(val_fraction x count) of them are the
validation text. Concatenating the two parts gives back the file byte for byte.

Two tokenizers:
  bytes  V = 256, a token is one byte of the UTF-8 text. Nothing to train.
  bpe    a sentencepiece BPE model of --vocab pieces, trained on the training text only, with byte
         fallback: a character the model has no piece for is spelled as its UTF-8 bytes, one token
         per byte (pieces '<0x00>' .. '<0xFF>'), so every text can be encoded. Each line is encoded
         on its own, and its newline is the byte piece '<0x0A>'.

Whatever the tokenizer, the script proves that the tokens spell the text: it decodes every token
back to bytes and checks that they concatenate to the original text (exit code 3 if not). That is
what lets a loss in nats per token be turned into bits per byte of the original text.

It writes into DIR: train.bin and val.bin (the tokens), tokenizer.bin (every token's bytes),
meta.json (what was done), and for bpe sentencepiece's own tokenizer.model. The formats, all
little-endian:

  train.bin, val.bin   "MPTOKENS", uint32 version 1, uint32 V, uint64 N tokens,
                       uint64 bytes of text they encode, then N uint16 token ids (32 + 2N bytes)
  tokenizer.bin        "MPVOCAB1", uint32 version 1, uint32 V, uint32 kind (0 bytes, 1 bpe),
                       uint32 0, then per token in id order: float32 score, uint8 type (0 normal,
                       1 byte, 2 control: decodes to nothing, 3 user-defined), uint32 length L,
                       L bytes (what the token decodes to)

Exit codes: 0 done, 2 bad arguments or input, 3 the tokens do not spell the text (a bug).
"""

import argparse
import json
import math
import os
import shutil
import struct
import sys
import tempfile
import time
from fractions import Fraction

import numpy as np

SEPARATOR = b"<|endoftext|>"
TOKENS_MAGIC, VOCAB_MAGIC, VERSION = b"MPTOKENS", b"MPVOCAB1", 1
TYPE_NORMAL, TYPE_BYTE, TYPE_CONTROL, TYPE_USER = 0, 1, 2, 3
KIND_BYTES, KIND_BPE = 0, 1
CHUNK_BYTES = 1 << 23   # the text is decoded, encoded and checked about 8 MiB at a time
SPACE_MARK = "\u2581"   # '▁': how sentencepiece writes a space inside its pieces


class InputError(Exception):
    """Bad arguments or input: one line on stderr, exit code 2."""


class RoundTripError(Exception):
    """The tokens do not decode to the text they were made from: exit code 3."""


# ---------------------------------------------------------------------------------------------
# Reading and splitting the text
# ---------------------------------------------------------------------------------------------

def chunks(text, size=CHUNK_BYTES):
    """Cuts the memoryview `text` into pieces of about `size` bytes, each ending just after a '\\n'
    (or at the end), and yields (offset, piece). A newline byte is never inside a multi-byte UTF-8
    character, so each piece decodes on its own, and it holds whole lines."""
    start = 0
    while start < len(text):
        cut = min(start + size, len(text))
        while cut < len(text) and text[cut - 1] != ord("\n"):   # move on to just after a newline
            found = bytes(text[cut:cut + 65536]).find(b"\n")
            cut = cut + found + 1 if found >= 0 else min(cut + 65536, len(text))
        yield start, text[start:cut]
        start = cut


def read_text(path):
    """The file's bytes, after checking that it exists, is not empty and is strict UTF-8."""
    try:
        with open(path, "rb") as f:
            data = f.read()
    except OSError as e:
        raise InputError(f"cannot read {path}: {e.strerror}")
    if not data:
        raise InputError(f"{path} is empty")
    for start, piece in chunks(memoryview(data)):
        try:
            str(piece, "utf-8")
        except UnicodeDecodeError as e:
            raise InputError(f"{path} is not UTF-8 text (byte offset {start + e.start}: {e.reason})")
    return data


def unit_ends(data):
    """How the text is cut into units: ('documents', ends) when it holds the separator, else
    ('lines', ends); ends[i] is the offset just after unit i, and the last is len(data)."""
    if SEPARATOR in data:
        ends, pos = [], 0
        while (found := data.find(SEPARATOR, pos)) >= 0:
            pos = found + len(SEPARATOR)
            if data[pos:pos + 1] == b"\n":   # the separator's own line ending stays with it
                pos += 1
            ends.append(pos)
        unit = "documents"
    else:
        # Offsets just after each '\n', found by numpy (a large file has millions of lines).
        ends = (np.flatnonzero(np.frombuffer(data, dtype=np.uint8) == ord("\n")) + 1).tolist()
        unit = "lines"
    if not ends or ends[-1] < len(data):   # text after the last separator or newline: one more unit
        ends.append(len(data))
    return unit, ends


def split_text(args):
    """Returns (train, val, units, how): train and val are memoryviews (they share the file's bytes
    instead of copying them), units counts the documents or lines of each, e.g. {"train_lines":
    3760, "val_lines": 4358}, and how is a sentence saying how the split was made."""
    data = read_text(args.input)
    unit, ends = unit_ends(data)
    if args.val_input is not None:
        val = read_text(args.val_input)
        val_unit, val_ends = unit_ends(val)
        units = {f"train_{unit}": len(ends), f"val_{val_unit}": len(val_ends)}
        return memoryview(data), memoryview(val), units, "validation from --val-input"
    count = len(ends)
    n_val = math.ceil(args.val_fraction * count)   # exact: val_fraction is a Fraction
    if n_val >= count:
        raise InputError(f"{args.input} holds {count} {unit}: too few to keep some for training "
                         f"and the last {n_val} for validation")
    cut = ends[count - n_val - 1]
    by = " (by <|endoftext|>)" if unit == "documents" else ""
    how = f"last {float(args.val_fraction) * 100:g}% of {count} {unit}{by}: {n_val} for validation"
    units = {f"train_{unit}": count - n_val, f"val_{unit}": n_val}
    return memoryview(data)[:cut], memoryview(data)[cut:], units, how


# ---------------------------------------------------------------------------------------------
# Tokenizers: each gives its vocabulary (score, type, bytes per id) and encodes text to ids
# ---------------------------------------------------------------------------------------------

class BytesTokenizer:
    kind, name = KIND_BYTES, "bytes"

    def __init__(self):
        self.vocab = [(0.0, TYPE_BYTE, bytes([b])) for b in range(256)]

    def encode(self, chunk):
        """chunk: the bytes of some whole lines; the ids are the byte values."""
        return np.frombuffer(chunk, dtype=np.uint8).astype(np.uint16)


class BpeTokenizer:
    kind, name = KIND_BPE, "bpe"
    user_defined = [SEPARATOR.decode()]

    def __init__(self, train_text, vocab_size, max_train_lines, model_path):
        try:
            import sentencepiece as spm
        except ImportError:
            raise InputError("--tokenizer bpe needs sentencepiece (Debian: python3-sentencepiece)")
        self.version = spm.__version__
        home = os.getcwd()
        with tempfile.TemporaryDirectory() as tmp:
            # The trainer reads its sentences from a file, one per line. It also records that
            # file's path and the output's in the model: run in the temporary folder with plain
            # names, so that the model comes out byte for byte the same from run to run.
            os.chdir(tmp)
            with open("train.txt", "wb") as f:
                f.write(train_text)
            # The trainer samples its lines at random when there are more than input_sentence_size;
            # a fixed seed makes the same text give the same model.
            spm.set_random_generator_seed(1234)
            try:
                spm.SentencePieceTrainer.train(
                    input="train.txt", model_prefix="tokenizer", model_type="bpe",
                    vocab_size=vocab_size,
                    # The text must come back byte for byte: no Unicode normalization, spaces kept
                    # as they are (runs, leading, trailing), no space added before each line.
                    # Tabs, '\r' and other control characters need nothing more: they survive
                    # identity normalization and are spelled with byte pieces when rare.
                    normalization_rule_name="identity", remove_extra_whitespaces=False,
                    add_dummy_prefix=False,
                    # Any character without a piece is spelled as its UTF-8 bytes, so <unk>
                    # never appears. With that safety net, character_coverage 0.9995 (the
                    # default) lets the rarest 0.05% of characters (by count) be spelled in bytes
                    # instead of each taking a vocabulary slot.
                    byte_fallback=True, character_coverage=0.9995,
                    # '<|endoftext|>' is one token, matched before any merging.
                    user_defined_symbols=self.user_defined,
                    # <unk> is id 0 (never used, thanks to byte fallback); no BOS, EOS or padding.
                    # The trainer leaves the text of such pieces out of the sentences it learns
                    # from: named '<unk>' as usual, the 15,000 '<unk>' that WikiText-2's tokenized
                    # test file holds would be dropped, and '<' and '>' spelled in bytes (6% more
                    # tokens). A name that no text holds avoids that.
                    unk_id=0, unk_piece="<sentencepiece-unk>", bos_id=-1, eos_id=-1, pad_id=-1,
                    # A training line longer than this would be left out of training (only).
                    max_sentence_length=1 << 20,
                    input_sentence_size=max_train_lines, shuffle_input_sentence=True,
                    num_threads=os.cpu_count() or 1, minloglevel=2)
            except RuntimeError as e:   # e.g. "Vocabulary size too high (3000). Please set it ..."
                raise InputError(f"sentencepiece could not train: {str(e).split('] ')[-1]}")
            finally:
                os.chdir(home)
            shutil.move(os.path.join(tmp, "tokenizer.model"), model_path)
        self.sp = spm.SentencePieceProcessor(model_file=model_path)
        self.vocab = [self.piece(i) for i in range(self.sp.vocab_size())]
        self.newline = self.sp.piece_to_id("<0x0A>")
        self.literal_mark = [self.sp.piece_to_id(f"<0x{b:02X}>") for b in SPACE_MARK.encode()]

    def piece(self, i):
        """(score, type, bytes) of piece i."""
        text, score = self.sp.id_to_piece(i), self.sp.get_score(i)
        if self.sp.is_byte(i):                        # '<0xAB>' is the byte 0xAB
            return score, TYPE_BYTE, bytes([int(text[3:5], 16)])
        if self.sp.is_control(i) or self.sp.is_unknown(i):
            return score, TYPE_CONTROL, b""
        kind = TYPE_USER if text in self.user_defined else TYPE_NORMAL
        return score, kind, text.replace(SPACE_MARK, " ").encode()

    def encode(self, chunk):
        """chunk: the bytes of some whole lines (the last may lack its '\\n'). Each line is
        encoded without its newline, then the newline is appended as the byte piece <0x0A>."""
        lines = str(chunk, "utf-8").split("\n")   # the last item follows the last '\n'
        ids = self.sp.encode(lines, out_type=int)
        for i, line in enumerate(lines):
            if SPACE_MARK in line:
                ids[i] = self.encode_with_literal_marks(line)
            if i < len(lines) - 1:
                ids[i].append(self.newline)
        return np.fromiter((t for line_ids in ids for t in line_ids), dtype=np.uint16,
                           count=sum(map(len, ids)))

    def encode_with_literal_marks(self, line):
        """Sentencepiece reads a '▁' in the text as a space (no trainer option changes that), so
        it would decode to ' '. Such a character is spelled here as its three byte pieces."""
        ids = []
        for k, part in enumerate(line.split(SPACE_MARK)):
            if k > 0:
                ids += self.literal_mark
            ids += self.sp.encode(part, out_type=int)
        return ids


# ---------------------------------------------------------------------------------------------
# Decoding (for the check) and writing
# ---------------------------------------------------------------------------------------------

def decode(vocab_bytes, ids):
    """The bytes that token ids spell: each id's bytes, one after the other."""
    return b"".join(map(vocab_bytes.__getitem__, ids.tolist()))


def check_round_trip(vocab_bytes, ids, chunk, where):
    decoded, original = decode(vocab_bytes, ids), bytes(chunk)
    if decoded != original:
        at = next((k for k, (a, b) in enumerate(zip(decoded, original)) if a != b),
                  min(len(decoded), len(original)))
        raise RoundTripError(f"{where}: the tokens decode to {decoded[at:at + 40]!r} where the text "
                             f"is {original[at:at + 40]!r} (byte {at} of a chunk)")


def write_tokens(path, tokenizer, text, vocab_size):
    """Encodes `text` chunk by chunk into `path`, checking each chunk's round trip; returns N."""
    count, vocab_bytes = 0, [piece for _, _, piece in tokenizer.vocab]
    with open(path + ".part", "wb") as f:
        f.write(b"\0" * 32)                              # the header, written once N is known
        for _, piece in chunks(text):
            ids = tokenizer.encode(piece)
            check_round_trip(vocab_bytes, ids, piece, os.path.basename(path))
            ids.astype("<u2").tofile(f)
            count += len(ids)
        f.seek(0)
        f.write(TOKENS_MAGIC + struct.pack("<IIQQ", VERSION, vocab_size, count, len(text)))
    os.replace(path + ".part", path)
    return count


def write_vocab(path, tokenizer):
    with open(path, "wb") as f:
        f.write(VOCAB_MAGIC + struct.pack("<IIII", VERSION, len(tokenizer.vocab), tokenizer.kind, 0))
        for score, kind, piece in tokenizer.vocab:
            f.write(struct.pack("<fBI", score, kind, len(piece)) + piece)


# ---------------------------------------------------------------------------------------------
# The command line
# ---------------------------------------------------------------------------------------------

class Parser(argparse.ArgumentParser):
    """argparse, with its errors as one line (no usage text) and exit code 2."""

    def error(self, message):
        raise InputError(message)


def parse_args(argv):
    def fraction(text):
        """--val-fraction as an exact fraction, so that ceil(0.1 x 30) is 3, not 4."""
        try:
            value = Fraction(text)
        except (ValueError, ZeroDivisionError):
            raise argparse.ArgumentTypeError(f"not a number: '{text}'")
        if not 0 < value < 1:
            raise argparse.ArgumentTypeError(f"must lie between 0 and 1, not {text}")
        return value

    def positive(text):
        if not text.isdigit() or int(text) < 1:
            raise argparse.ArgumentTypeError(f"not a positive integer: '{text}'")
        return int(text)

    p = Parser(prog="prepare_text.py", description=__doc__.split("\n")[0])
    p.add_argument("--input", required=True, help="the UTF-8 text file")
    p.add_argument("--val-input", help="a separate validation text (then all of --input trains)")
    p.add_argument("--tokenizer", required=True, choices=["bpe", "bytes"])
    p.add_argument("--vocab", type=positive, help="bpe: the vocabulary size, 300..65536")
    p.add_argument("--out", required=True, help="the folder to write (created if missing)")
    p.add_argument("--val-fraction", type=fraction, help="validation share of the units (0.1)")
    p.add_argument("--max-train-lines", type=positive, default=2_000_000,
                   help="bpe: the most training lines the trainer samples (2000000)")
    args = p.parse_args(argv)
    if args.tokenizer == "bpe" and args.vocab is None:
        p.error("--tokenizer bpe needs --vocab N (300..65536)")
    if args.tokenizer == "bpe" and not 300 <= args.vocab <= 65536:
        p.error(f"--vocab must lie in 300..65536 (256 byte pieces come first), not {args.vocab}")
    if args.tokenizer == "bytes" and args.vocab is not None:
        p.error("--vocab is for --tokenizer bpe (bytes has V = 256)")
    if args.val_input is not None and args.val_fraction is not None:
        p.error("--val-fraction has no use with --val-input")
    if args.val_fraction is None:
        args.val_fraction = Fraction(1, 10)
    return args


def main(argv):
    args = parse_args(argv)
    began = time.time()
    train, val, units, how = split_text(args)
    try:
        os.makedirs(args.out, exist_ok=True)
    except OSError as e:
        raise InputError(f"cannot create {args.out}: {e.strerror}")
    out = lambda name: os.path.join(args.out, name)

    start_training = time.time()
    if args.tokenizer == "bytes":
        tokenizer = BytesTokenizer()
    else:
        tokenizer = BpeTokenizer(train, args.vocab, args.max_train_lines, out("tokenizer.model"))
    trained = time.time()
    vocab_size = len(tokenizer.vocab)
    counts = {name: write_tokens(out(f"{name}.bin"), tokenizer, text, vocab_size)
              for name, text in (("train", train), ("val", val))}
    write_vocab(out("tokenizer.bin"), tokenizer)

    meta = {"tokenizer": tokenizer.name, "vocab": vocab_size, "input": args.input,
            "val_input": args.val_input, "split": how,
            "train_tokens": counts["train"], "val_tokens": counts["val"],
            "train_bytes": len(train), "val_bytes": len(val),
            **units,
            "sentencepiece_version": getattr(tokenizer, "version", None)}
    with open(out("meta.json"), "w") as f:
        json.dump(meta, f, indent=1)
        f.write("\n")

    files = ["train.bin", "val.bin", "tokenizer.bin"] + (["tokenizer.model"] if args.tokenizer == "bpe" else [])
    trained_in = f", trained in {trained - start_training:.1f} s" if args.tokenizer == "bpe" else ""
    print(f"prepare_text.py: {tokenizer.name} tokenizer, V = {vocab_size}{trained_in}; split: {how}")
    for name in ("train", "val"):
        n, nbytes = counts[name], meta[f"{name}_bytes"]
        print(f"  {name + '.bin':9s} {n:>11,d} tokens {nbytes:>13,d} bytes  {nbytes / n:6.3f} bytes/token")
    print(f"  wrote {', '.join(files)} and meta.json into {args.out} in {time.time() - began:.1f} s; "
          "every token decodes back to the text")
    print(f"  use --task lm --data-dir {args.out}")


if __name__ == "__main__":
    try:
        main(sys.argv[1:])
    except InputError as e:
        print(f"prepare_text.py: error: {e}", file=sys.stderr)
        sys.exit(2)
    except RoundTripError as e:
        print(f"prepare_text.py: round trip failed: {e}", file=sys.stderr)
        sys.exit(3)
