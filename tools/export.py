#!/usr/bin/python3
"""A maskprior checkpoint as the state dict of a model PyTorch users know (docs/runs.md, Exporting).

    /usr/bin/python3 tools/export.py CHECKPOINT OUT.pt

CHECKPOINT is a model.safetensors, a --save file or a --dump-state file. A token model with the
next-token head (--task lm, and add3 and mul2, whose decoder is causal) becomes nanoGPT's GPT
(karpathy/nanoGPT, model.py); an image model becomes timm's VisionTransformer
(timm.models.vision_transformer). OUT.pt is written by torch.save (to OUT.pt.tmp, then renamed),
a dict of tensors, numbers, strings and tuples, read back by torch.load(OUT.pt):
    "model":      the state dict, float32 tensors bit for bit the checkpoint's, named below;
    "kind":       "nanogpt" or "timm-vit";
    "model_args": the model's arguments: nanoGPT's GPTConfig fields (as nanoGPT's ckpt.pt
                  keeps them), or VisionTransformer's keyword arguments;
    "layer_args": what the state dict cannot say, and the model must be built with:
                  {"layer_norm_eps": 1e-5, "gelu": "tanh"}: maskprior's LayerNorm eps (timm's
                  default is 1e-6) and its GELU, the tanh form (nanoGPT's and timm's: erf), i.e.
                  nn.GELU(approximate="tanh");
    "metadata":   the checkpoint's metadata (task, init, seed, step, ...).
The AdamW moments (opt.m.*, opt.v.*) and a --dump-state file's batch and gradients are left out.

The mask: each layer with a mask gets <layer>.attn.mask_bias = log sigmoid(M), (T,T) shared by
the heads or (NH,T,T) one per head: the bias maskprior adds to the attention logits q.k/sqrt(HS)
before the causal mask and the softmax. A layer without a mask (--prior-layers first: every layer
but 0) has none; a model without one (--init default) none at all. No model class has these
tensors: load with strict=False and add the bias to the logits (nanoGPT: in
CausalSelfAttention.forward; timm: block N's forward(x, attn_mask=bias)); tests/test_export.py
does both.

nanoGPT: transformer.wte (V,C) and .wpe (T,C); per layer N, transformer.h.N.ln_1, .attn.c_attn
(3C, C: the q, k, v rows, each heads in order, as nanoGPT splits them), .attn.c_proj, .ln_2,
.mlp.c_fc (4C, C), .mlp.c_proj; transformer.ln_f; lm_head.weight (V,C) and lm_head.bias (V).
Unlike nanoGPT, lm_head has a bias and its weight is its own (nanoGPT ties it to wte): maskprior
learns both, so the model must have nn.Linear(C, V, bias=True) untied. The causal buffer
transformer.h.N.attn.bias, which nanoGPT rebuilds itself, is not written.
timm: cls_token (1,1,C), pos_embed (1,T,C), patch_embed.proj (the Conv2d: maskprior's patch.weight
(C, channels*P*P) is channel-major, so it reshapes to (C, channels, P, P)); per layer
blocks.N.norm1, .attn.qkv, .attn.proj, .norm2, .mlp.fc1, .mlp.fc2; norm for the CLS readout, or
fc_norm for --pool mean (timm then normalises the patches' mean, as maskprior does); head.

What the classes cannot hold is refused with one line and exit status 2: heads * head_size other
than the width (both split C into the heads), nanoGPT's MLP other than 4 * width, a token model
without the causal next-token head or with the scalar encoding, a file maskprior did not write.
"""
import json
import os
import struct
import sys

import numpy as np
import torch
import torch.nn.functional as F


def fail(message):
    """One line on stderr, exit status 2 (as maskprior answers bad input)."""
    print(f"export.py: error: {message}", file=sys.stderr)
    sys.exit(2)


def read_checkpoint(path):
    """A safetensors file's tensors (float32 torch tensors, bit for bit) and its metadata."""
    try:
        with open(path, "rb") as f:
            (header_len,) = struct.unpack("<Q", f.read(8))
            if header_len > os.path.getsize(path) - 8:
                raise ValueError(f"a header of {header_len} bytes, longer than the file")
            header = json.loads(f.read(header_len))
            data = f.read()
        metadata = header.pop("__metadata__", {})
        tensors = {}
        for name, entry in header.items():
            if entry["dtype"] != "F32":
                fail(f"{path}: tensor {name} is {entry['dtype']}, not F32")
            begin, end = entry["data_offsets"]
            array = np.frombuffer(data[begin:end], dtype="<f4").reshape(entry["shape"])
            tensors[name] = torch.from_numpy(array.copy())
    except (OSError, ValueError, KeyError, TypeError, struct.error) as e:
        fail(f"{path}: not a safetensors file maskprior wrote ({type(e).__name__}: {e})".replace("\n", " "))
    return tensors, metadata


def config_of(path, meta):
    """The model's shape from the checkpoint's metadata (run/checkpoint.h, config_metadata)."""
    try:
        cfg = {key: int(meta[key]) for key in ("width", "layers", "heads", "head_size", "mlp", "seq_len", "vocab",
                                              "out", "causal")}
    except (KeyError, ValueError) as e:
        fail(f"{path}: the metadata has no valid {e}: not a checkpoint maskprior wrote")
    cfg.update(mask=meta.get("mask", "none"), head_type=meta.get("head_type", "regression"),
               encoding=meta.get("encoding", "token"), image=meta.get("image", "none"),
               patch=int(meta.get("patch", "0")), pool=meta.get("pool", "cls"))
    return cfg


def mask_biases(p, cfg, prefix):
    """{prefix(l) + "attn.mask_bias": log sigmoid(M) of layer l} for every layer with a mask."""
    out = {}
    for l in range(cfg["layers"]):
        mask = p.get(f"h.{l}.attn.mask")
        if mask is not None:  # computed in float64, rounded once to float32
            out[prefix(l) + "attn.mask_bias"] = F.logsigmoid(mask.double()).float()
    return out


def block_tensors(p, l, names):
    """Layer l's tensors under the model's names: names maps maskprior's module to the model's."""
    out = {}
    for ours, theirs in names.items():
        for kind in ("weight", "bias"):
            out[f"{theirs}.{kind}"] = p[f"h.{l}.{ours}.{kind}"]
    return out


def nanogpt(path, p, cfg):
    """(state dict, model_args) of nanoGPT's GPT."""
    C = cfg["width"]
    if cfg["head_type"] != "next_token" or not cfg["causal"] or cfg["encoding"] != "token":
        fail(f"{path}: nanoGPT's GPT is a causal next-token model with token embeddings; this one has "
             f"head_type={cfg['head_type']}, causal={cfg['causal']}, encoding={cfg['encoding']}")
    if cfg["mlp"] != 4 * C:
        fail(f"{path}: nanoGPT's MLP is 4 * width = {4 * C} wide; this one's is {cfg['mlp']}")
    names = {"ln1": "ln_1", "attn.qkv": "attn.c_attn", "attn.proj": "attn.c_proj", "ln2": "ln_2",
             "mlp.fc": "mlp.c_fc", "mlp.proj": "mlp.c_proj"}
    sd = {"transformer.wte.weight": p["wte"], "transformer.wpe.weight": p["wpe"]}
    for l in range(cfg["layers"]):
        sd.update({f"transformer.h.{l}.{k}": v for k, v in block_tensors(p, l, names).items()})
    sd.update({"transformer.ln_f.weight": p["ln_f.weight"], "transformer.ln_f.bias": p["ln_f.bias"],
               "lm_head.weight": p["head.weight"], "lm_head.bias": p["head.bias"]})
    sd.update(mask_biases(p, cfg, lambda l: f"transformer.h.{l}."))
    args = {"block_size": cfg["seq_len"], "vocab_size": cfg["vocab"], "n_layer": cfg["layers"],
            "n_head": cfg["heads"], "n_embd": C, "dropout": 0.0, "bias": True}
    return sd, args


def timm_vit(path, p, cfg):
    """(state dict, model_args) of timm's VisionTransformer."""
    C = cfg["width"]
    channels, height, width = (int(d) for d in cfg["image"].split("x"))
    P = cfg["patch"]
    if cfg["causal"]:
        fail(f"{path}: timm's VisionTransformer attends both ways; this image model is causal")
    mlp_ratio = cfg["mlp"] / C
    if int(C * mlp_ratio) != cfg["mlp"]:  # timm's hidden width is int(embed_dim * mlp_ratio)
        fail(f"{path}: timm's MLP width int(width * mlp_ratio) cannot be {cfg['mlp']} at width {C}")
    names = {"ln1": "norm1", "attn.qkv": "attn.qkv", "attn.proj": "attn.proj", "ln2": "norm2",
             "mlp.fc": "mlp.fc1", "mlp.proj": "mlp.fc2"}
    sd = {"cls_token": p["cls"].reshape(1, 1, C), "pos_embed": p["wpe"].unsqueeze(0),
          "patch_embed.proj.weight": p["patch.weight"].reshape(C, channels, P, P),
          "patch_embed.proj.bias": p["patch.bias"]}
    for l in range(cfg["layers"]):
        sd.update({f"blocks.{l}.{k}": v for k, v in block_tensors(p, l, names).items()})
    final_norm = "fc_norm" if cfg["pool"] == "mean" else "norm"
    sd.update({f"{final_norm}.weight": p["ln_f.weight"], f"{final_norm}.bias": p["ln_f.bias"],
               "head.weight": p["head.weight"], "head.bias": p["head.bias"]})
    sd.update(mask_biases(p, cfg, lambda l: f"blocks.{l}."))
    args = {"img_size": (height, width), "patch_size": P, "in_chans": channels, "num_classes": cfg["out"],
            "global_pool": "avg" if cfg["pool"] == "mean" else "token", "embed_dim": C, "depth": cfg["layers"],
            "num_heads": cfg["heads"], "mlp_ratio": mlp_ratio, "qkv_bias": True}
    return sd, args


def main(argv):
    if len(argv) != 3:
        print(f"usage: {argv[0]} CHECKPOINT OUT.pt", file=sys.stderr)
        sys.exit(2)
    path, out = argv[1], argv[2]
    tensors, meta = read_checkpoint(path)
    cfg = config_of(path, meta)
    if cfg["heads"] * cfg["head_size"] != cfg["width"]:
        fail(f"{path}: heads * head_size = {cfg['heads'] * cfg['head_size']}, not the width {cfg['width']}: "
             "nanoGPT's and timm's attention split the width into the heads")
    for l in range(cfg["layers"]):  # the tensors every layer has (the mask is optional)
        for name in ("ln1", "attn.qkv", "attn.proj", "ln2", "mlp.fc", "mlp.proj"):
            for kind in ("weight", "bias"):
                if f"h.{l}.{name}.{kind}" not in tensors:
                    fail(f"{path}: tensor h.{l}.{name}.{kind} is missing")
    kind = "timm-vit" if cfg["image"] != "none" else "nanogpt"
    try:
        sd, args = timm_vit(path, tensors, cfg) if kind == "timm-vit" else nanogpt(path, tensors, cfg)
    except (KeyError, RuntimeError) as e:  # a missing tensor, or one whose shape the metadata contradicts
        fail(f"{path}: the tensors do not fit the metadata's model ({type(e).__name__}: {e})".replace("\n", " "))
    export = {"model": sd, "kind": kind, "model_args": args,
              "layer_args": {"layer_norm_eps": 1e-5, "gelu": "tanh"}, "metadata": dict(meta)}
    try:
        with open(out + ".tmp", "wb") as f:  # on disk, then renamed over out: a crash leaves no torn file
            torch.save(export, f)
            f.flush()
            os.fsync(f.fileno())
        os.replace(out + ".tmp", out)
    except OSError as e:
        fail(f"cannot write {out} ({e})")
    masks = sum(name.endswith("mask_bias") for name in sd)
    print(f"wrote {out}: {kind}, {len(sd)} tensors ({masks} mask biases), "
          f"{sum(t.numel() for t in sd.values())} numbers")


if __name__ == "__main__":
    main(sys.argv)
