"""Every kind of safetensors file maskprior writes, made small, for tests/test_safetensors_official.py
and tests/test_export.py.

make_files(binary, folder) runs the maskprior binary (on the CPU) once per model below: 3 training
steps into a run folder (its model.safetensors, which --save and --checkpoint-every write the same
way), then a --dump-state file of the checkpoint resumed (its parameters, the first batch, its loss
and every gradient). The data is made here: 3 classes of 8x8 RGB PNG images (PIL) and
tests/fixtures/text/tiny.txt in bytes tokens (data/prepare_text.py). The models are 2 layers of
width 16, 2 heads of 8, MLP 64 (4 x width, as nanoGPT's), each with a mask, in all the shapes a
mask takes: shared, per head, and in the first layer alone; at --mask-c 1.5, so that the bias
log sigmoid(M) is far from a constant (at c = 6 it is nearly 0 where G is 1 and -6 where it is 0).
"""
import os
import subprocess
import sys

import numpy as np

ROOT = os.path.normpath(os.path.join(os.path.dirname(os.path.abspath(__file__)), ".."))
SMALL = ["--device", "cpu", "--width", "16", "--layers", "2", "--heads", "2", "--head-size", "8", "--mlp", "64",
         "--init", "mask", "--mask-c", "1.5", "--steps", "3", "--batch", "8", "--eval-every", "3"]


def models(data):
    """{name: (family, the flags of its run)}; data holds the folders "images" and "text"."""
    return {
        "maj3": ("Boolean", ["--task", "maj3"]),
        "add3": ("arithmetic", ["--task", "add3", "--mask-per-head"]),
        "images": ("image", ["--task", "images", "--data-dir", data["images"], "--patch", "4", "--label-smoothing",
                             "0.1"]),
        "images-mean": ("image", ["--task", "images", "--data-dir", data["images"], "--patch", "4", "--pool",
                                  "mean", "--prior-layers", "first"]),
        "lm": ("language", ["--task", "lm", "--data-dir", data["text"], "--seq-len", "16", "--mask-window", "4",
                            "--eval-windows", "4"]),
    }


def write_images(folder):
    """3 classes of 8x8 RGB PNG images, 8 training and 3 test images each, one colour channel
    brighter per class; seeded."""
    from PIL import Image
    rng = np.random.default_rng(7)
    for split, count in (("train", 8), ("test", 3)):
        for k in range(3):
            os.makedirs(os.path.join(folder, split, f"c{k}"))
            for i in range(count):
                pixels = rng.integers(0, 128, size=(8, 8, 3), dtype=np.uint8)
                pixels[:, :, k] += 127
                Image.fromarray(pixels).save(os.path.join(folder, split, f"c{k}", f"{i}.png"))


def run(command, what):
    """Runs command; on failure, prints what failed with its output and exits 1."""
    result = subprocess.run(command, cwd=ROOT, capture_output=True, text=True)
    if result.returncode != 0:
        print(f"FAIL: {what} exited with {result.returncode}:\n{result.stdout}{result.stderr}")
        sys.exit(1)


def make_files(binary, folder, families=None):
    """[(name, family, checkpoint path, dump path)] of every model (or of those of the families
    named), written under folder."""
    data = {"images": os.path.join(folder, "images"), "text": os.path.join(folder, "text")}
    write_images(data["images"])
    run([sys.executable, "data/prepare_text.py", "--input", "tests/fixtures/text/tiny.txt", "--tokenizer", "bytes",
         "--out", data["text"]], "data/prepare_text.py")
    files = []
    for name, (family, flags) in models(data).items():
        if families is not None and family not in families:
            continue
        out = os.path.join(folder, "run-" + name)
        checkpoint, dump = os.path.join(out, "model.safetensors"), os.path.join(folder, name + "-dump.safetensors")
        run([binary] + SMALL + flags + ["--out", out], f"the {name} run")
        run([binary] + SMALL + flags + ["--resume", checkpoint, "--dump-state", dump], f"the {name} --dump-state")
        files.append((name, family, checkpoint, dump))
    return files
