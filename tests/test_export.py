"""tools/export.py's state dicts loaded into the models they are for, which must then give the
checkpoint's own loss on a batch.

    sh tests/test_export.sh nanogpt | timm     (timm: makes the environment first, then runs this)
    PYTHON tests/test_export.py nanogpt | timm BINARY FOLDER

nanogpt: the causal LM and add3 (per-head mask) models of tests/maskprior_files.py, in the GPT
class below: nanoGPT's model.py (karpathy/nanoGPT) as it defines it, module names and all, but for
what maskprior's model has that nanoGPT's does not: the attention adds the exported
attn.mask_bias = log sigmoid(M) to its logits before the causal mask, the GELU is the tanh form
(maskprior's, layers/gelu), lm_head has a bias and its own weight (not tied to wte), and the
explicit attention always (nanoGPT takes PyTorch 2's fused one where there is one, which has no
room for the bias). The targets of positions the loss mask leaves out become nanoGPT's ignore_index
-1, so its mean cross-entropy is maskprior's.
timm: the image models (CLS readout with label smoothing, mean pooling with the mask in the first
layer alone) in timm's VisionTransformer, built from the export's model_args with LayerNorm eps
1e-5 and the tanh GELU (its layer_args), its blocks run as its forward_features runs them but with
block N's forward(x, attn_mask=blocks.N.attn.mask_bias).
For each model: the export of its checkpoint loads with no parameter missing and nothing left
over but the mask biases (and nanoGPT's causal buffers, attn.bias, which it makes itself); the
model, in float64, gives the --dump-state file's loss on its batch (the checkpoint resumed: its
parameters the checkpoint's, bit for bit, which is checked too) within 1e-5. And export.py refuses
with one line and exit status 2 a Boolean model (no next-token head), heads * head_size other than
the width, nanoGPT with an MLP other than 4 * width (both from 1-step runs made here), and a file
that is not safetensors. Exit 0 when all holds, 1 when not.
"""
import functools
import math
import os
import subprocess
import sys
from dataclasses import dataclass

import torch
import torch.nn as nn
from torch.nn import functional as F

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import torch_reference as ref  # noqa: E402
from maskprior_files import ROOT, SMALL, make_files, run  # noqa: E402

TOLERANCE = 1e-5
failures = []


def check(holds, what):
    print(f"{'ok  ' if holds else 'FAIL'} {what}")
    if not holds:
        failures.append(what)


# nanoGPT's model.py, with maskprior's differences marked "maskprior:"
class LayerNorm(nn.Module):
    """ LayerNorm but with an optional bias. PyTorch doesn't support simply bias=False """

    def __init__(self, ndim, bias):
        super().__init__()
        self.weight = nn.Parameter(torch.ones(ndim))
        self.bias = nn.Parameter(torch.zeros(ndim)) if bias else None

    def forward(self, input):
        return F.layer_norm(input, self.weight.shape, self.weight, self.bias, 1e-5)


class CausalSelfAttention(nn.Module):

    def __init__(self, config):
        super().__init__()
        assert config.n_embd % config.n_head == 0
        self.c_attn = nn.Linear(config.n_embd, 3 * config.n_embd, bias=config.bias)
        self.c_proj = nn.Linear(config.n_embd, config.n_embd, bias=config.bias)
        self.attn_dropout = nn.Dropout(config.dropout)
        self.resid_dropout = nn.Dropout(config.dropout)
        self.n_head = config.n_head
        self.n_embd = config.n_embd
        self.dropout = config.dropout
        self.register_buffer("bias", torch.tril(torch.ones(config.block_size, config.block_size))
                             .view(1, 1, config.block_size, config.block_size))
        self.mask_bias = None  # maskprior: log sigmoid(M), (T,T) or (n_head,T,T), set after loading

    def forward(self, x):
        B, T, C = x.size()
        q, k, v = self.c_attn(x).split(self.n_embd, dim=2)
        k = k.view(B, T, self.n_head, C // self.n_head).transpose(1, 2)  # (B, nh, T, hs)
        q = q.view(B, T, self.n_head, C // self.n_head).transpose(1, 2)  # (B, nh, T, hs)
        v = v.view(B, T, self.n_head, C // self.n_head).transpose(1, 2)  # (B, nh, T, hs)
        att = (q @ k.transpose(-2, -1)) * (1.0 / math.sqrt(k.size(-1)))
        if self.mask_bias is not None:  # maskprior: the mask's bias, before the causal mask
            att = att + self.mask_bias[..., :T, :T]
        att = att.masked_fill(self.bias[:, :, :T, :T] == 0, float('-inf'))
        att = F.softmax(att, dim=-1)
        att = self.attn_dropout(att)
        y = att @ v  # (B, nh, T, T) x (B, nh, T, hs) -> (B, nh, T, hs)
        y = y.transpose(1, 2).contiguous().view(B, T, C)
        y = self.resid_dropout(self.c_proj(y))
        return y


class MLP(nn.Module):

    def __init__(self, config):
        super().__init__()
        self.c_fc = nn.Linear(config.n_embd, 4 * config.n_embd, bias=config.bias)
        self.gelu = nn.GELU(approximate="tanh")  # maskprior: the tanh form (nanoGPT: nn.GELU(), erf)
        self.c_proj = nn.Linear(4 * config.n_embd, config.n_embd, bias=config.bias)
        self.dropout = nn.Dropout(config.dropout)

    def forward(self, x):
        x = self.c_fc(x)
        x = self.gelu(x)
        x = self.c_proj(x)
        x = self.dropout(x)
        return x


class Block(nn.Module):

    def __init__(self, config):
        super().__init__()
        self.ln_1 = LayerNorm(config.n_embd, bias=config.bias)
        self.attn = CausalSelfAttention(config)
        self.ln_2 = LayerNorm(config.n_embd, bias=config.bias)
        self.mlp = MLP(config)

    def forward(self, x):
        x = x + self.attn(self.ln_1(x))
        x = x + self.mlp(self.ln_2(x))
        return x


@dataclass
class GPTConfig:
    block_size: int = 1024
    vocab_size: int = 50304
    n_layer: int = 12
    n_head: int = 12
    n_embd: int = 768
    dropout: float = 0.0
    bias: bool = True


class GPT(nn.Module):

    def __init__(self, config):
        super().__init__()
        self.config = config
        self.transformer = nn.ModuleDict(dict(
            wte=nn.Embedding(config.vocab_size, config.n_embd),
            wpe=nn.Embedding(config.block_size, config.n_embd),
            drop=nn.Dropout(config.dropout),
            h=nn.ModuleList([Block(config) for _ in range(config.n_layer)]),
            ln_f=LayerNorm(config.n_embd, bias=config.bias),
        ))
        # maskprior: a bias, and no weight tying (nanoGPT: bias=False, wte.weight = lm_head.weight)
        self.lm_head = nn.Linear(config.n_embd, config.vocab_size, bias=True)

    def forward(self, idx, targets=None):
        device = idx.device
        b, t = idx.size()
        assert t <= self.config.block_size, f"Cannot forward sequence of length {t}"
        pos = torch.arange(0, t, dtype=torch.long, device=device)  # shape (t)
        tok_emb = self.transformer.wte(idx)  # (b, t, n_embd)
        pos_emb = self.transformer.wpe(pos)  # (t, n_embd)
        x = self.transformer.drop(tok_emb + pos_emb)
        for block in self.transformer.h:
            x = block(x)
        x = self.transformer.ln_f(x)
        if targets is not None:
            logits = self.lm_head(x)
            loss = F.cross_entropy(logits.view(-1, logits.size(-1)), targets.view(-1), ignore_index=-1)
        else:
            logits = self.lm_head(x[:, [-1], :])
            loss = None
        return logits, loss


def export(checkpoint, out):
    """tools/export.py on checkpoint; the loaded export, or None when it failed."""
    result = subprocess.run([sys.executable, os.path.join(ROOT, "tools/export.py"), checkpoint, out],
                            capture_output=True, text=True)
    check(result.returncode == 0, f"export.py {os.path.basename(os.path.dirname(checkpoint))}: "
                                  f"{(result.stdout + result.stderr).strip()}")
    return torch.load(out) if result.returncode == 0 else None


def load(model, exported, allowed_missing):
    """Loads the export's state dict; {layer: mask bias}; checks what is missing and left over."""
    sd = exported["model"]
    result = model.load_state_dict(sd, strict=False)
    missing = [k for k in result.missing_keys if not allowed_missing(k)]
    masks = {k: v for k, v in sd.items() if k.endswith(".attn.mask_bias")}
    check(not missing and sorted(result.unexpected_keys) == sorted(masks),
          f"state dict loads: {len(sd)} tensors, missing {missing}, left over {sorted(result.unexpected_keys)}")
    return {int(k.split(".")[-3]): v.double() for k, v in masks.items()}


def same_parameters(exported_from, dump):
    """Whether the dump's parameters are the checkpoint's, bit for bit."""
    ck, _ = ref.read_safetensors(exported_from)
    return all(torch.equal(ck[k], dump[k]) for k in ck if not k.startswith("opt.")) and "wpe" in ck


def nanogpt_loss(exported, batch):
    model = GPT(GPTConfig(**exported["model_args"])).double().eval()
    biases = load(model, exported, lambda k: k.endswith(".attn.bias"))
    for layer, bias in biases.items():
        model.transformer.h[layer].attn.mask_bias = bias
    mask = batch.get("batch.loss_mask", torch.ones_like(batch["batch.targets"]))
    check(bool(((mask == 0) | (mask == 1)).all()), "the loss mask is 0/1, so ignore_index -1 can carry it")
    targets = batch["batch.targets"].long().masked_fill(mask == 0, -1)
    with torch.no_grad():
        return model(batch["batch.inputs"].long(), targets)[1].item(), len(biases)


def timm_loss(exported, batch, label_smoothing):
    from timm.models.vision_transformer import VisionTransformer
    args = exported["layer_args"]
    model = VisionTransformer(**exported["model_args"],
                              norm_layer=functools.partial(nn.LayerNorm, eps=args["layer_norm_eps"]),
                              act_layer=functools.partial(nn.GELU, approximate=args["gelu"])).double().eval()
    biases = load(model, exported, lambda k: False)
    with torch.no_grad():  # VisionTransformer.forward_features, with block N's mask bias
        x = model.patch_embed(batch["batch.inputs"])
        x = model.norm_pre(model.patch_drop(model._pos_embed(x)))
        for layer, block in enumerate(model.blocks):
            x = block(x, attn_mask=biases.get(layer))
        logits = model.forward_head(model.norm(x))
        return F.cross_entropy(logits, batch["batch.targets"].long(), label_smoothing=label_smoothing).item(), \
            len(biases)


def expect_refusal(args, words, what):
    result = subprocess.run([sys.executable, os.path.join(ROOT, "tools/export.py")] + args, capture_output=True,
                            text=True)
    lines = result.stderr.strip().splitlines()
    check(result.returncode == 2 and len(lines) == 1 and words in lines[0], f"{what}: exit {result.returncode}, "
                                                                           f"{result.stderr.strip()!r}")


def main(argv):
    if len(argv) != 4 or argv[1] not in ("nanogpt", "timm"):
        sys.exit(f"usage: {argv[0]} nanogpt|timm BINARY FOLDER")
    which, binary, folder = argv[1:]
    if which == "timm":
        import timm
        print(f"timm {timm.__version__}, torch {torch.__version__}")
    families = ("arithmetic", "language", "Boolean") if which == "nanogpt" else ("image",)
    for name, family, checkpoint, dump in make_files(binary, folder, families):
        if family == "Boolean":  # only to be refused
            continue
        exported = export(checkpoint, os.path.join(folder, name + ".pt"))
        if exported is None:
            continue
        batch, meta = ref.read_safetensors(dump)
        check(same_parameters(checkpoint, batch), f"{name}: the dump's parameters are the checkpoint's")
        if which == "nanogpt":
            loss, masks = nanogpt_loss(exported, batch)
        else:
            loss, masks = timm_loss(exported, batch, float(meta.get("label_smoothing", "0")))
        want = batch["loss"].item()
        check(abs(loss - want) <= TOLERANCE and masks > 0,
              f"{name} ({family}) in {exported['kind']}: loss {loss:.8f}, maskprior's {want:.8f}, "
              f"|diff| {abs(loss - want):.1e} (<= {TOLERANCE:g}), {masks} mask biases")
        if which == "nanogpt" and name == "lm":
            expect_refusal([checkpoint.replace("run-lm", "run-maj3"), os.path.join(folder, "x.pt")],
                           "nanoGPT's GPT is a causal next-token model", "a Boolean model refused")
            for flags, words in ((["--heads", "2", "--head-size", "4"], "heads * head_size = 8, not the width 16"),
                                 (["--mlp", "32"], "nanoGPT's MLP is 4 * width = 64 wide; this one's is 32")):
                out = os.path.join(folder, "run-odd" + flags[-1])
                run([binary] + SMALL + ["--task", "lm", "--data-dir", os.path.join(folder, "text"), "--seq-len", "16",
                                        "--eval-windows", "4", "--steps", "1", "--out", out] + flags, "an odd lm run")
                expect_refusal([os.path.join(out, "model.safetensors"), os.path.join(folder, "x.pt")], words,
                               f"{' '.join(flags)} refused")
            expect_refusal([os.path.join(ROOT, "tests/fixtures/text/tiny.txt"), os.path.join(folder, "x.pt")],
                           "not a safetensors file maskprior wrote", "a text file refused")
    print(f"{'PASS' if not failures else 'FAIL'}: tools/export.py into "
          f"{'nanoGPT' if which == 'nanogpt' else 'timm'}" + (f", {len(failures)} checks failed" if failures else ""))
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
