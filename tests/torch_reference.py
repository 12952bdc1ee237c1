#!/usr/bin/python3
"""PyTorch cross-check of maskprior's forward and backward pass (docs/method.md, README).

    /usr/bin/python3 tests/torch_reference.py STATE.safetensors [STATE.safetensors ...]
    /usr/bin/python3 tests/torch_reference.py STATE.safetensors --corrupt NAME[,NAME...]
    /usr/bin/python3 tests/torch_reference.py STATE.safetensors --adamw-step AFTER.safetensors LR WD

Several states are checked in one process (importing torch takes seconds), one PASS or FAIL line
each; --corrupt checks that the check fails with each named tensor corrupted in turn. A state
followed by --corrupt or --adamw-step takes that check, and the forms mix in one process:
    torch_reference.py A.safetensors --corrupt loss B.safetensors --adamw-step B1.safetensors 0.01 0.5 C.safetensors

STATE.safetensors is written by `./maskprior ... --dump-state STATE.safetensors`: the
parameters, one batch (batch.inputs, batch.targets), its loss and every gradient (grad.<name>).
This script builds the same transformer independently in PyTorch, in float64 (pre-LN blocks,
attention scores q.k/sqrt(HS) + log sigmoid(M), causal masking when asked, GELU tanh form,
final LayerNorm and head on position 0, or on the last position when attention is causal, or
on every position for the next-token head: cross-entropy summed over the positions that
batch.loss_mask counts, divided by their number), loads the parameters, runs the batch forward
and lets autograd compute the gradients. The metadata's "encoding" (token | scalar: a valued token
is token_values[v] * wval, the table dumped as token_values) and "loss" (mse | logistic:
log(1 + exp(-y yhat))) choose the embedding and the loss; absent, they mean token and mse. An image
model (metadata "image" = "CxHxW", "patch", "pool") embeds batch.inputs, the normalised pixels,
as timm's VisionTransformer does: a Conv2d of kernel and stride P (patch.weight reshaped to
(C, channels, P, P)), the patches in row-major order after a learned CLS token, plus wpe; its
head reads CLS or the mean of the patch tokens; "label_smoothing" is cross-entropy's. It then
checks, elementwise with the tolerance of
the project's tests for reductions (|cpp - torch| <= 1e-4 + 1e-3 |torch|), the loss and every gradient,
the mask's included (zero under --freeze-mask: metadata freeze_mask 1).
It also fails on NaN/Inf, on a gradient in the file that the model does
not have, and on a model parameter whose gradient is missing from the file.

One line per tensor: its name; its scale (the largest |torch| entry: a tensor whose scale is
far below 1e-4 passes on the absolute term alone, so its verdict is weak, e.g. the mask
gradient at the mask init's c = 6, which σ(-6) shrinks; dump with --mask-c 1.5 to test it);
the max abs diff; the max rel diff (|cpp - torch| / |torch| over the entries within three
decades of the scale, so it means something for tiny tensors too); ok/FAIL.
Exit code 0 when everything matches, 1 otherwise.

--corrupt NAME adds 1e-2 (plus 10% of the tensor's scale) to the first entry of the dumped
tensor NAME (e.g. grad.h.0.attn.mask or loss) before the comparison: the check must then fail.

--adamw-step AFTER LR WD also checks one optimizer step: AFTER is the checkpoint of the same run
after its first step (--steps 1, a constant learning rate LR, no clipping, weight decay WD, the
mask's 0), and torch.optim.AdamW, from STATE's parameters and gradients, must land on its
parameters (|cpp - torch| <= 1e-6 + 1e-5 |torch|), with the param groups AFTER's metadata
"weight_decay_on" names: "matrices" decays the weight matrices alone, as timm and nanoGPT do
(2-D tensors but the position embedding; not biases, LayerNorm, CLS, wval or the mask), "all"
every tensor but the mask.
"""
import json
import math
import struct
import sys

import torch
import torch.nn.functional as F

ATOL, RTOL = 1e-4, 1e-3


def read_safetensors(path):
    """The tensors of a safetensors file (as float64 torch tensors) and its metadata."""
    import numpy as np  # here, so that model_loss can be imported where numpy is missing
    with open(path, "rb") as f:
        (header_len,) = struct.unpack("<Q", f.read(8))
        header = json.loads(f.read(header_len))
        data = f.read()
    metadata = header.pop("__metadata__", {})
    tensors = {}
    for name, entry in header.items():
        if entry["dtype"] != "F32":
            raise ValueError(f"{path}: tensor {name} is {entry['dtype']}, not F32")
        begin, end = entry["data_offsets"]
        array = np.frombuffer(data[begin:end], dtype="<f4").reshape(entry["shape"])
        tensors[name] = torch.from_numpy(array.astype(np.float64))
    return tensors, metadata


def parameter_shapes(cfg):
    """Every parameter of the model the metadata describes: name -> shape (docs/runs.md, "Checkpoints")."""
    C, T, NH, HS, MLP = cfg["width"], cfg["seq_len"], cfg["heads"], cfg["head_size"], cfg["mlp"]
    shapes = {"wpe": (T, C)}
    if cfg.get("image"):
        channels, _, _ = cfg["image"]
        shapes.update({"patch.weight": (C, channels * cfg["patch"] ** 2), "patch.bias": (C,), "cls": (C,)})
    else:
        shapes["wte"] = (cfg["vocab"], C)
    if cfg.get("encoding", "token") == "scalar":
        shapes["wval"] = (C,)
    for l in range(cfg["layers"]):
        h = f"h.{l}."
        shapes.update({h + "ln1.weight": (C,), h + "ln1.bias": (C,),
                       h + "attn.qkv.weight": (3 * NH * HS, C), h + "attn.qkv.bias": (3 * NH * HS,)})
        if cfg["mask"] != "none" and (l == 0 or cfg.get("mask_layers", "all") == "all"):
            shapes[h + "attn.mask"] = (T, T) if cfg["mask"] == "layer" else (NH, T, T)
        shapes.update({h + "attn.proj.weight": (C, NH * HS), h + "attn.proj.bias": (C,),
                       h + "ln2.weight": (C,), h + "ln2.bias": (C,),
                       h + "mlp.fc.weight": (MLP, C), h + "mlp.fc.bias": (MLP,),
                       h + "mlp.proj.weight": (C, MLP), h + "mlp.proj.bias": (C,)})
    shapes.update({"ln_f.weight": (C,), "ln_f.bias": (C,),
                   "head.weight": (cfg["out"], C), "head.bias": (cfg["out"],)})
    return shapes


def attention(x, qkv_weight, qkv_bias, mask, cfg):
    """Masked multi-head attention of x (B,T,C) -> (B,T,NH*HS), before the output projection."""
    B, T, _ = x.shape
    NH, HS = cfg["heads"], cfg["head_size"]
    # qkv rows: all heads' q, then all k, then all v; head h's q is rows [h*HS, (h+1)*HS)
    q, k, v = (t.reshape(B, T, NH, HS).transpose(1, 2)  # (B,NH,T,HS)
               for t in F.linear(x, qkv_weight, qkv_bias).split(NH * HS, dim=-1))
    scores = q @ k.transpose(-1, -2) / math.sqrt(HS)  # (B,NH,T,T)
    if mask is not None:  # (T,T) broadcasts over the heads; (NH,T,T) is one per head
        scores = scores + F.logsigmoid(mask)
    if cfg["causal"]:
        future = torch.ones(T, T, dtype=torch.bool, device=scores.device).triu(1)  # key j after query i
        scores = scores.masked_fill(future, float("-inf"))
    y = torch.softmax(scores, dim=-1) @ v  # (B,NH,T,HS)
    return y.transpose(1, 2).reshape(B, T, NH * HS)


def image_embedding(p, cfg, pixels):
    """(B,T,C): CLS, then the patches (a Conv2d of kernel and stride P), plus the position embedding."""
    C, P = cfg["width"], cfg["patch"]
    weight = p["patch.weight"].reshape(C, pixels.shape[1], P, P)
    patches = F.conv2d(pixels, weight, p["patch.bias"], stride=P).flatten(2).transpose(1, 2)  # (B,NP,C)
    cls = p["cls"].expand(pixels.shape[0], 1, C)
    return torch.cat([cls, patches], dim=1) + p["wpe"]


def model_output(p, cfg, tokens, token_values=None):
    """The head's outputs: (B,T,V) for the next-token head, else (B,OUT); p maps parameter names
    to tensors; tokens are token ids (B,T), or for an image model the pixels (B, channels, H, W);
    token_values (V) is the value table of the scalar encoding."""
    C = cfg["width"]
    if cfg.get("image"):
        x = image_embedding(p, cfg, tokens)
    elif cfg.get("encoding", "token") == "scalar":  # a valued token: value * wval; the others: wte
        value = token_values[tokens].unsqueeze(-1)  # (B,T,1)
        x = torch.where(value != 0, value * p["wval"], p["wte"][tokens]) + p["wpe"]  # (B,T,C)
    else:
        x = p["wte"][tokens] + p["wpe"]  # (B,T,C)
    for l in range(cfg["layers"]):
        h = f"h.{l}."
        a = F.layer_norm(x, (C,), p[h + "ln1.weight"], p[h + "ln1.bias"], eps=1e-5)
        y = attention(a, p[h + "attn.qkv.weight"], p[h + "attn.qkv.bias"], p.get(h + "attn.mask"), cfg)
        x = x + F.linear(y, p[h + "attn.proj.weight"], p[h + "attn.proj.bias"])
        m = F.layer_norm(x, (C,), p[h + "ln2.weight"], p[h + "ln2.bias"], eps=1e-5)
        m = F.gelu(F.linear(m, p[h + "mlp.fc.weight"], p[h + "mlp.fc.bias"]), approximate="tanh")
        x = x + F.linear(m, p[h + "mlp.proj.weight"], p[h + "mlp.proj.bias"])
    if cfg["head_type"] == "next_token":  # every position predicts the token after it
        z = F.layer_norm(x, (C,), p["ln_f.weight"], p["ln_f.bias"], eps=1e-5)  # (B,T,C)
        return F.linear(z, p["head.weight"], p["head.bias"])  # (B,T,V)
    pos = x.shape[1] - 1 if cfg["causal"] else 0  # the head reads CLS; causal: the last position
    summary = x[:, 1:].mean(dim=1) if cfg.get("pool") == "mean" else x[:, pos]  # (B,C)
    cls = F.layer_norm(summary, (C,), p["ln_f.weight"], p["ln_f.bias"], eps=1e-5)  # (B,C)
    return F.linear(cls, p["head.weight"], p["head.bias"])  # (B,OUT)


def model_loss(p, cfg, tokens, targets, token_values=None, loss_mask=None):
    """The mean loss of the batch (model_output's arguments); loss_mask (B,T) weights the
    next-token head's positions."""
    out = model_output(p, cfg, tokens, token_values)
    if cfg["head_type"] == "next_token":
        ce = F.cross_entropy(out.flatten(0, 1), targets.long().flatten(), reduction="none")  # (B*T)
        w = torch.ones_like(ce) if loss_mask is None else loss_mask.flatten()
        return (ce * w).sum() / w.sum()
    if cfg["head_type"] == "regression" and cfg.get("loss", "mse") == "logistic":
        margin = -targets * out[:, 0]
        return torch.logaddexp(torch.zeros_like(margin), margin).mean()  # log(1 + exp(-y yhat))
    if cfg["head_type"] == "regression":
        return ((out[:, 0] - targets) ** 2).mean()
    return F.cross_entropy(out, targets.long(), label_smoothing=cfg.get("label_smoothing", 0.0))


def compare(name, cpp, ref):
    """Prints one line for a tensor; returns whether the C++ value matches the reference."""
    if cpp.shape != ref.shape:
        print(f"{name:28s} shape {tuple(cpp.shape)} in the file, {tuple(ref.shape)} in the model  FAIL")
        return False
    diff = (cpp - ref).abs()
    big = (ref.abs() >= 1e-3 * ref.abs().max()) & (ref != 0)  # the tensor's top three decades
    rel = (diff[big] / ref.abs()[big]).max().item() if big.any() else 0.0
    ok = bool(torch.isfinite(cpp).all() and torch.isfinite(ref).all() and (diff <= ATOL + RTOL * ref.abs()).all())
    print(f"{name:28s} scale {ref.abs().max().item():9.2e}  max abs {diff.max().item():9.2e}  "
          f"max rel {rel:9.2e}  {'ok' if ok else 'FAIL'}")
    return ok


def adamw_step_matches(params, shapes, tensors, after_path, lr, wd):
    """Whether torch.optim.AdamW's first step from the dumped parameters and gradients gives the
    parameters of the checkpoint at after_path (see the module's docstring)."""
    after, after_meta = read_safetensors(after_path)
    rule = after_meta.get("weight_decay_on", "all")
    groups = {"decayed": [], "not decayed": []}
    for name in shapes:
        p = params[name].detach().clone().requires_grad_()
        p.grad = tensors["grad." + name].clone()
        params[name] = p
        matrix = len(shapes[name]) == 2 and name != "wpe" and not name.endswith("attn.mask")
        decayed = not name.endswith("attn.mask") and (rule == "all" or matrix)
        groups["decayed" if decayed else "not decayed"].append(p)
    optimizer = torch.optim.AdamW([{"params": groups["decayed"], "weight_decay": wd},
                                   {"params": groups["not decayed"], "weight_decay": 0.0}],
                                  lr=lr, betas=(0.9, 0.999), eps=1e-8)
    optimizer.step()
    ok = True
    for name in shapes:
        ref = params[name].detach()
        diff = (after[name] - ref).abs()
        good = bool(torch.isfinite(after[name]).all() and (diff <= 1e-6 + 1e-5 * ref.abs()).all())
        print(f"{'step.' + name:28s} max abs {diff.max().item():9.2e}  {'ok' if good else 'FAIL'}")
        ok &= good
    print(f"{'PASS' if ok else 'FAIL'}: one AdamW step (lr {lr:g}, weight decay {wd:g} on {rule}: "
          f"{len(groups['decayed'])} tensors decayed, {len(groups['not decayed'])} not) against torch.optim.AdamW")
    return ok


def check_state(path, corrupt=None, adamw=None):
    """Checks one --dump-state file: the loss and every gradient against autograd (after adding to
    tensor `corrupt` first, when named), then with adamw = (AFTER, LR, WD) one AdamW step. True when
    everything matches."""
    tensors, meta = read_safetensors(path)
    numbers = ("width", "layers", "heads", "head_size", "mlp", "seq_len", "vocab", "out", "causal")
    cfg = {key: int(meta[key]) for key in numbers}
    cfg.update(mask=meta["mask"], head_type=meta["head_type"], mask_layers=meta.get("mask_layers", "all"),
               encoding=meta.get("encoding", "token"), loss=meta.get("loss", "mse"),
               image=tuple(int(d) for d in meta["image"].split("x")) if meta.get("image", "none") != "none" else None,
               patch=int(meta.get("patch", "0")), pool=meta.get("pool", "cls"),
               label_smoothing=float(meta.get("label_smoothing", "0")))
    if cfg["encoding"] == "scalar" and "token_values" not in tensors:
        sys.exit(f"{path}: scalar encoding, but no token_values table")
    if corrupt is not None:
        if corrupt not in tensors:
            sys.exit(f"{path}: no tensor {corrupt} to corrupt")
        target = tensors[corrupt]
        target.view(-1)[0] += 1e-2 + 0.1 * target.abs().max()

    shapes = parameter_shapes(cfg)
    for name, shape in shapes.items():
        if name not in tensors or tensors[name].shape != shape:
            sys.exit(f"{path}: parameter {name} {shape} is missing or has another shape")
    params = {name: tensors[name].clone().requires_grad_() for name in shapes}
    inputs = tensors["batch.inputs"] if cfg["image"] else tensors["batch.inputs"].long()
    loss = model_loss(params, cfg, inputs, tensors["batch.targets"], tensors.get("token_values"),
                      tensors.get("batch.loss_mask"))
    loss.backward()

    ok = compare("loss", tensors["loss"], loss.detach().reshape(1))
    for name in shapes:
        if "grad." + name not in tensors:
            print(f"{'grad.' + name:28s} missing from the file  FAIL")
            ok = False
        else:
            expected = params[name].grad
            if name.endswith("attn.mask") and meta.get("freeze_mask") == "1":
                expected = torch.zeros_like(expected)  # --freeze-mask: a constant, no gradient
            ok &= compare("grad." + name, tensors["grad." + name], expected)
    for name in sorted(set(tensors) - {"grad." + n for n in shapes}):
        if name.startswith("grad."):
            print(f"{name:28s} in the file, but the model has no parameter {name[5:]}  FAIL")
            ok = False
    input_kind = (f"image {meta['image']} patch {cfg['patch']} pool {cfg['pool']}" if cfg["image"]
                  else f"{cfg['encoding']} encoding")
    print(f"{'PASS' if ok else 'FAIL'}: {path} ({meta['mask']} mask, causal {cfg['causal']}, {cfg['head_type']} head, "
          f"{input_kind}, "
          f"{cfg['loss'] if cfg['head_type'] == 'regression' else 'cross-entropy'} loss, {len(shapes)} parameter tensors) "
          f"against PyTorch float64")
    if adamw and ok:
        ok = adamw_step_matches(params, shapes, tensors, adamw[0], float(adamw[1]), float(adamw[2]))
    return ok


USAGE = """usage: torch_reference.py STATE.safetensors [--corrupt NAME[,NAME...] |
                                             --adamw-step AFTER.safetensors LR WD] [STATE.safetensors ...]
Checks each state (a pass each); or, with --corrupt, that the check fails with each named tensor
corrupted in turn (a pass when every corruption is caught); or one AdamW step after the state.
Exit 0 when every state passes."""

# a state's check: the flag after it and how many arguments that flag takes
CHECK_FLAGS = {"--corrupt": 1, "--adamw-step": 3}


def check_corruptions(path, names):
    """True when the check of state `path` fails with each named tensor corrupted in turn."""
    caught = []
    for name in names.split(","):
        caught.append(not check_state(path, corrupt=name))
        print(f"{'caught' if caught[-1] else 'MISSED'}: {path} with {name} corrupted")
    return all(caught)


def main(argv):
    args, results = argv[1:], []
    if not args:
        sys.exit(USAGE)
    while args:
        path, flag = args[0], args[1] if len(args) > 1 and args[1].startswith("--") else None
        if path.startswith("--") or (flag and (flag not in CHECK_FLAGS or len(args) < 2 + CHECK_FLAGS[flag])):
            sys.exit(USAGE)
        if flag == "--corrupt":
            results.append(check_corruptions(path, args[2]))
        elif flag == "--adamw-step":
            results.append(check_state(path, adamw=args[2:5]))
        else:
            results.append(check_state(path))
        args = args[2 + CHECK_FLAGS[flag]:] if flag else args[1:]
    return 0 if all(results) else 1


if __name__ == "__main__":
    sys.exit(main(sys.argv))
