"""The official safetensors reader (huggingface/safetensors, from the Python registry) on every
kind of file maskprior writes.

    sh tests/test_safetensors_official.sh       (makes the environment and the helper, then runs this)
    VENV_PYTHON tests/test_safetensors_official.py BINARY ECHO FOLDER

BINARY is maskprior, ECHO tests/safetensors_echo.cpp built, FOLDER an empty folder for the files:
a checkpoint and a --dump-state file of each model of tests/maskprior_files.py (Boolean,
arithmetic, image with CLS and with mean pooling, language). For each file:
  - safetensors.numpy.load_file and safetensors.torch.load_file read it, and safe_open, with
    numpy and with torch, lists the same names, float32 tensors of the same shapes and the same
    metadata;
  - every tensor is, bit for bit, what the program's own reader reads (ECHO reads the file with
    safetensors_read and writes what it read with safetensors_write; the official reader reads
    that file too), and the metadata is the same;
  - the metadata holds the run's config (width 16, layers 2, ..., its task and init); a checkpoint
    holds adam_t and every parameter's opt.m. and opt.v. moments, a dump-state file the batch,
    the loss and every parameter's grad.
And both the official reader and safetensors_read (through ECHO: exit 2, one line) refuse the five
files of tests/fuzz/corpus/safetensors/rejected/ that break the official rules (a gap, an overlap,
an end before its begin, a name twice, a header that is not UTF-8). One line per check that fails;
the last line sums up. Exit 0 when all hold, 1 when not.
"""
import os
import subprocess
import sys

import numpy as np
import safetensors
import torch
from safetensors import safe_open
from safetensors.numpy import load_file as load_numpy
from safetensors.torch import load_file as load_torch

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from maskprior_files import ROOT, make_files  # noqa: E402

REJECTED = ["gap-between-tensors", "tensors-overlap", "offsets-end-before-begin", "name-twice", "header-not-utf8"]
failures = []


def check(holds, what):
    if not holds:
        failures.append(what)
        print(f"FAIL: {what}")


def same_bits(a, b):
    """Whether two float32 arrays hold the same bits (NaN and -0 included)."""
    return a.dtype == b.dtype == np.float32 and a.shape == b.shape and np.array_equal(a.view(np.uint32),
                                                                                       b.view(np.uint32))


def check_file(path, echoed, name, kind, task):
    tensors = load_numpy(path)
    with safe_open(path, framework="np") as f:
        metadata = f.metadata()
        check(sorted(f.keys()) == sorted(tensors), f"{path}: safe_open's names differ from load_file's")
        for key in f.keys():
            check(same_bits(f.get_tensor(key), tensors[key]), f"{path}: {key} differs between safe_open and load_file")
    with safe_open(path, framework="pt") as f:
        check(f.metadata() == metadata, f"{path}: the metadata differs between numpy and torch")
    for key, tensor in load_torch(path).items():
        check(tensor.dtype == torch.float32 and same_bits(tensor.numpy(), tensors[key]),
              f"{path}: {key} differs between safetensors.torch and safetensors.numpy")
    ours = load_numpy(echoed)
    with safe_open(echoed, framework="np") as f:
        check(f.metadata() == metadata, f"{path}: the metadata differs from what safetensors_read reads")
    check(sorted(ours) == sorted(tensors), f"{path}: the names differ from what safetensors_read reads")
    for key in tensors:
        check(key in ours and same_bits(ours[key], tensors[key]),
              f"{path}: {key} differs from what safetensors_read reads")

    config = {"width": "16", "layers": "2", "heads": "2", "head_size": "8", "mlp": "64", "task": task,
              "init": "mask"}
    for key, value in config.items():
        check(metadata.get(key) == value, f"{path}: metadata {key} is {metadata.get(key)!r}, not {value!r}")
    parameters = [key for key in tensors if not key.startswith(("opt.", "grad.", "batch.")) and key != "loss"]
    check("wpe" in parameters and "h.1.mlp.proj.weight" in parameters, f"{path}: parameters missing")
    if kind == "checkpoint":
        check(metadata.get("adam_t") == "3", f"{path}: adam_t is {metadata.get('adam_t')!r}, not '3'")
        extra = [f"opt.{m}.{p}" for p in parameters for m in ("m", "v")]
    else:
        extra = ["batch.inputs", "batch.targets", "loss"] + ["grad." + p for p in parameters]
    check(all(key in tensors for key in extra), f"{path}: missing {[k for k in extra if k not in tensors][:3]}")
    print(f"{name} {kind}: {len(tensors)} tensors, {len(metadata)} metadata keys, read alike")


def main(argv):
    if len(argv) != 4:
        sys.exit(f"usage: {argv[0]} BINARY ECHO FOLDER")
    binary, echo, folder = argv[1:]
    print(f"safetensors {safetensors.__version__} (the official reader), torch {torch.__version__}")
    files = make_files(binary, folder)
    pairs = []
    for name, family, checkpoint, dump in files:
        for kind, path in (("checkpoint", checkpoint), ("dump", dump)):
            pairs.append((name, family, kind, path, os.path.join(folder, f"echo-{name}-{kind}.safetensors")))
    result = subprocess.run([echo] + [p for pair in pairs for p in pair[3:]], capture_output=True, text=True)
    if result.returncode != 0:
        print(f"FAIL: {echo} exited with {result.returncode}: {result.stderr.strip()}")
        return 1
    for name, family, kind, path, echoed in pairs:
        task = {"images-mean": "images"}.get(name, name)
        check_file(path, echoed, f"{name} ({family})", kind, task)

    for name in REJECTED:
        path = os.path.join(ROOT, "tests/fuzz/corpus/safetensors/rejected", name + ".safetensors")
        try:
            load_numpy(path)
            check(False, f"the official reader accepts {path}")
        except safetensors.SafetensorError as e:
            ours = subprocess.run([echo, path, os.path.join(folder, "refused.safetensors")], capture_output=True,
                                  text=True)
            check(ours.returncode == 2 and len(ours.stderr.splitlines()) == 1,
                  f"safetensors_read does not refuse {path} with one line (exit {ours.returncode})")
            print(f"rejected/{name}: official: {str(e).splitlines()[0]}; ours: {ours.stderr.strip()}")
    print(f"{'PASS' if not failures else 'FAIL'}: {len(pairs)} files maskprior wrote, read by safetensors "
          f"{safetensors.__version__} as by maskprior's reader; {len(REJECTED)} broken files refused by both"
          + (f"; {len(failures)} checks failed" if failures else ""))
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
