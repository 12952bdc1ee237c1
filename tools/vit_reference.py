#!/usr/bin/python3
"""The PyTorch reference of maskprior's Vision Transformer on Fashion-MNIST (docs/results.md, Vision).

    tools/vit_reference.py evaluate CHECKPOINT [--data-dir DIR]
        loads a checkpoint that ./maskprior --task fashion-mnist wrote and prints its top-1 test
        accuracy computed by PyTorch (float32): the same number as the run's metrics.json "acc",
        to rounding, when the two implementations agree.
    tools/vit_reference.py train [--data-dir DIR] [--epochs E] [--seed S] [--threads N]
        trains the same model with the same recipe in PyTorch and prints its test accuracy per
        epoch: C 64, L 4, NH 4, HS 16, MLP 128, patch 4, batch 128, AdamW lr 1e-3 wd 0.05 (every
        weight), linear warmup over 5% of the steps then cosine to 0, gradient norm clipped at 1,
        label smoothing 0.1, a random crop with padding 2 (in normalised pixels, so the padding is
        the mean colour) and a random horizontal flip. Its own random numbers (torch.manual_seed),
        so it matches maskprior in distribution, not bit for bit.

The model is tests/torch_reference.py's (model_output, model_loss); the data
is read from the four IDX files with gzip and numpy, normalised per channel by the training
set's mean and standard deviation as maskprior does.
"""
import argparse
import gzip
import math
import os
import struct
import sys
import time

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "tests"))
import numpy as np  # noqa: E402
import torch  # noqa: E402
import torch.nn.functional as F  # noqa: E402
import torch_reference as ref  # noqa: E402

MODEL = {"width": 64, "layers": 4, "heads": 4, "head_size": 16, "mlp": 128, "patch": 4}


def read_idx(path):
    """An IDX file (raw or .gz) as a numpy array."""
    opener = gzip.open if path.endswith(".gz") else open
    with opener(path, "rb") as f:
        data = f.read()
    dims = data[3]
    shape = struct.unpack(">" + "I" * dims, data[4:4 + 4 * dims])
    return np.frombuffer(data, dtype=np.uint8, offset=4 + 4 * dims).reshape(shape)


def load_fashion(folder):
    """(train pixels, train labels, test pixels, test labels): pixels (N,1,28,28) normalised."""
    def find(name):
        for candidate in (name, name + ".gz"):
            if os.path.exists(os.path.join(folder, candidate)):
                return os.path.join(folder, candidate)
        sys.exit(f"vit_reference.py: error: no {name}[.gz] in {folder}")
    images = [read_idx(find(n)).astype(np.float64) / 255 for n in ("train-images-idx3-ubyte", "t10k-images-idx3-ubyte")]
    labels = [torch.from_numpy(read_idx(find(n)).astype(np.int64)) for n in ("train-labels-idx1-ubyte",
                                                                             "t10k-labels-idx1-ubyte")]
    mean, std = images[0].mean(), images[0].std()  # one channel; over every training pixel
    pixels = [torch.from_numpy(((x - mean) / std).astype(np.float32)).unsqueeze(1) for x in images]
    return pixels[0], labels[0], pixels[1], labels[1]


def config(classes, image_side, mask):
    T = 1 + (image_side // MODEL["patch"]) ** 2
    return dict(MODEL, seq_len=T, out=classes, causal=0, head_type="class", image=(1, image_side, image_side),
                pool="cls", mask=mask, label_smoothing=0.1)


def accuracy(p, cfg, pixels, labels):
    with torch.no_grad():
        right = sum((ref.model_output(p, cfg, pixels[i:i + 500]).argmax(-1) == labels[i:i + 500]).sum().item()
                    for i in range(0, len(labels), 500))
    return right / len(labels)


def evaluate(args):
    tensors, meta = ref.read_safetensors(args.checkpoint)
    if meta.get("task") != "fashion-mnist":
        sys.exit(f"vit_reference.py: error: {args.checkpoint} is a checkpoint of {meta.get('task')}, not fashion-mnist")
    _, _, test_x, test_y = load_fashion(args.data_dir)
    cfg = config(int(meta["out"]), test_x.shape[-1], meta["mask"])
    cfg.update({k: int(meta[k]) for k in ("width", "layers", "heads", "head_size", "mlp", "patch", "seq_len")})
    cfg["pool"] = meta.get("pool", "cls")
    p = {name: t.float() for name, t in tensors.items() if not name.startswith("opt.")}
    print(f"PyTorch top-1 test accuracy of {args.checkpoint}: {accuracy(p, cfg, test_x, test_y):.4f}")


def augment(x, pad, generator):
    """Random crop with zero padding (normalised space) and horizontal flip, per image."""
    B, _, H, W = x.shape
    padded = F.pad(x, (pad, pad, pad, pad))
    dy = torch.randint(0, 2 * pad + 1, (B,), generator=generator)
    dx = torch.randint(0, 2 * pad + 1, (B,), generator=generator)
    flip = torch.rand(B, generator=generator) < 0.5
    out = torch.stack([padded[b, :, dy[b]:dy[b] + H, dx[b]:dx[b] + W] for b in range(B)])
    return torch.where(flip[:, None, None, None], out.flip(-1), out)


def train(args):
    torch.manual_seed(args.seed)
    torch.set_num_threads(args.threads)
    generator = torch.Generator().manual_seed(args.seed)
    train_x, train_y, test_x, test_y = load_fashion(args.data_dir)
    cfg = config(10, train_x.shape[-1], "none")
    C, T, K = cfg["width"], cfg["seq_len"], MODEL["patch"] ** 2
    shapes = ref.parameter_shapes(dict(cfg, vocab=0))
    p = {}
    for name, shape in shapes.items():  # maskprior's default init for images
        if name == "cls":
            p[name] = torch.zeros(shape)
        elif name == "wpe":
            p[name] = torch.randn(shape) * 0.02
        elif "ln" in name:
            p[name] = torch.ones(shape) if name.endswith("weight") else torch.zeros(shape)
        else:
            fan_in = K if name.startswith("patch") else shapes[name.replace(".bias", ".weight")][1]
            p[name] = (torch.rand(shape) * 2 - 1) / math.sqrt(fan_in)
    params = [t.requires_grad_() for t in p.values()]
    optimizer = torch.optim.AdamW(params, lr=1e-3, weight_decay=0.05)
    steps_per_epoch = math.ceil(len(train_y) / 128)
    total = math.ceil(args.epochs * len(train_y) / 128)
    warmup = total // 20
    def schedule(s):  # run/schedule.h: linear warmup, then cosine to 0
        return (s + 1) / warmup if s < warmup else 0.5 * (1 + math.cos(math.pi * (s - warmup) / (total - warmup)))
    scheduler = torch.optim.lr_scheduler.LambdaLR(optimizer, schedule)
    start = time.time()
    for step in range(total):
        if step % steps_per_epoch == 0:
            order = torch.randperm(len(train_y), generator=generator)
        rows = order[(step % steps_per_epoch) * 128:(step % steps_per_epoch + 1) * 128]
        loss = ref.model_loss(p, cfg, augment(train_x[rows], 2, generator), train_y[rows].float())
        optimizer.zero_grad()
        loss.backward()
        torch.nn.utils.clip_grad_norm_(params, 1.0)
        optimizer.step()
        scheduler.step()
        if (step + 1) % steps_per_epoch == 0 or step + 1 == total:
            print(f"step {step + 1}/{total} loss {loss.item():.4f} test acc {accuracy(p, cfg, test_x, test_y):.4f} "
                  f"({time.time() - start:.0f} s)", flush=True)


def main():
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("mode", choices=["evaluate", "train"])
    parser.add_argument("checkpoint", nargs="?")
    parser.add_argument("--data-dir", default="/usr/share/datasets/fashion-mnist")
    parser.add_argument("--epochs", type=float, default=2)
    parser.add_argument("--seed", type=int, default=1)
    parser.add_argument("--threads", type=int, default=1)
    args = parser.parse_args()
    if args.mode == "evaluate":
        if not args.checkpoint:
            parser.error("evaluate needs a CHECKPOINT")
        evaluate(args)
    else:
        train(args)


if __name__ == "__main__":
    main()
