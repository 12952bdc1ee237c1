"""Attention alone, forward + backward with the mask gradient dM: ours against PyTorch.

    python3 tools/bench_attention.py        # tools/bench_gpu.py --attention; tests/gpu_check.py's step bench-attention
    /usr/bin/python3 tools/bench_attention.py --device cpu --small   # a check of the script, no GPU

The layer: y = softmax(q k^T / sqrt(HS) + log σ(M)) v per (b, h), M a learnable (T,T) mask shared
by the heads or one per head, causal or not; fp32, TF32 off. Two cases:
  T 64:  B 128, NH 6, HS 64, one mask shared by the heads (an image model's size)
  T 256: B 64, NH 6, HS 64, one mask per head, causal (a language model with the ALiBi prior)
Rows, each timed on the same inputs and upstream gradient dy:
  - maskprior kernel 1, 2, ...: every version (./maskprior --list attention-kernels), through
    dev/attention_forward and dev/attention_backward with --shape
    (CUDA events over 20 calls each, after a warm-up; the forward also writes A, which this model
    keeps for its metrics, and log σ(M); the backward gives dq, dk, dv and dM). They check
    every result against the CPU and say whether two runs give the same bits;
  - PyTorch eager: F.scaled_dot_product_attention with the float mask log σ(M) (-inf above the
    diagonal when causal), which takes a mask that requires grad;
  - torch.compile: the same attention written out (q k^T, softmax, A v), compiled;
  - FlexAttention: flex_attention compiled, with score_mod adding log σ(M)[h, i, j] read from a
    tensor that requires grad (so dM flows through it), and a block mask when causal.
For the torch rows: fwd+bwd time is the median over windows of torch.cuda.Event timings after
warm-up; "same bits" runs forward and backward twice from the same inputs and compares dq, dk,
dv and dM bit for bit (torch.equal). "ours / this" is this row's time over kernel 3's: above 1
means kernel 3 is faster. The last line is the summary that tests/gpu_check.py puts in its table.
"""
import argparse
import os
import re
import statistics
import subprocess
import sys
import time

import torch
import torch.nn.functional as F

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
CASES = [  # name, B, T, NH, HS, mask heads, causal
    ("T64, shared mask", 128, 64, 6, 64, 1, False),
    ("T256, per-head mask, causal", 64, 256, 6, 64, 6, True),
]
SMALL_CASES = [("T16, shared mask", 4, 16, 2, 16, 1, False), ("T40, per-head, causal", 2, 40, 2, 8, 2, True)]


def ours(case, version, device):
    """(fwd+bwd ms, same bits) of our kernel `version` from the dev programs, or (None, why)."""
    _, B, T, NH, HS, heads, causal = case
    suffix = "" if device == "cuda" else "-emulated"  # the CPU emulation: a check of the parsing only
    shape = "%d,%d,%d,%d,%d,%d" % (B, T, NH, HS, heads, int(causal))
    total, same = 0.0, True
    for program in ("attention_forward", "attention_backward"):
        path = os.path.join(ROOT, "dev", program + suffix)
        if not os.path.exists(path):
            return None, "no %s: make dev%s" % (os.path.relpath(path, ROOT), "" if device == "cuda" else "-emulated")
        run = subprocess.run([path, str(version), "--shape", shape], capture_output=True, text=True)
        rows = [line.split("|") for line in run.stdout.splitlines() if re.match(r"\| given ", line)]
        if run.returncode != 0 or len(rows) != 1:
            return None, "%s %d failed: %s" % (program, version, (run.stdout + run.stderr).strip()[-200:])
        cells = [c.strip() for c in rows[0]]  # | shape | v | idea | time ms | H200 bound | GB/s | ... | same bits |
        if cells[3].startswith("skipped"):
            return None, cells[3]
        total += float(cells[4])
        same = same and cells[9] == "yes"
    return total, same


def versions():
    """The attention kernel versions of the build, from ./maskprior --list attention-kernels."""
    run = subprocess.run([os.path.join(ROOT, "maskprior"), "--list", "attention-kernels"], capture_output=True,
                         text=True)
    if run.returncode != 0:
        sys.exit("bench_attention.py: ./maskprior --list attention-kernels failed (make maskprior)")
    return [int(line.split()[0]) for line in run.stdout.splitlines() if line.strip()]


def inputs(case, device):
    """q, k, v (B,NH,T,HS) and M (heads,T,T) that require grad, and dy, from a fixed seed."""
    _, B, T, NH, HS, heads, _ = case
    g = torch.Generator().manual_seed(1)

    def uniform(*shape, scale=1.0):
        return ((torch.rand(*shape, generator=g) * 2 - 1) * scale).to(device)
    q, k, v = (uniform(B, NH, T, HS).requires_grad_() for _ in range(3))
    M = uniform(heads, T, T, scale=4.0).requires_grad_()
    return q, k, v, M, uniform(B, NH, T, HS)


def mask_bias(M, causal):
    """log σ(M) as a (1, heads, T, T) additive mask, -inf above the diagonal when causal."""
    bias = F.logsigmoid(M)
    if causal:
        T = M.shape[-1]
        bias = bias.masked_fill(torch.ones(T, T, dtype=torch.bool, device=M.device).triu(1), float("-inf"))
    return bias.unsqueeze(0)


def eager(q, k, v, M, causal):
    return F.scaled_dot_product_attention(q, k, v, attn_mask=mask_bias(M, causal))


def written_out(q, k, v, M, causal):
    scores = q @ k.transpose(-1, -2) / q.shape[-1] ** 0.5 + mask_bias(M, causal)
    return torch.softmax(scores, dim=-1) @ v


def flex_factory(causal, T, device):
    """FlexAttention with the learnable bias, or a string saying why it is not there."""
    try:
        from torch.nn.attention.flex_attention import create_block_mask, flex_attention
    except ImportError:
        return "FlexAttention: not in torch %s" % torch.__version__
    flex = torch.compile(flex_attention)
    block_mask = None
    if causal:
        block_mask = create_block_mask(lambda b, h, i, j: i >= j, None, None, T, T, device=device)

    def attend(q, k, v, M, _causal):
        log_sigma = F.logsigmoid(M)  # (heads, T, T): dM flows back through score_mod's reads
        if log_sigma.shape[0] == 1:  # shared by the heads (score_mod indexes with tensors only)
            shared = log_sigma[0]

            def score_mod(score, b, h, i, j):
                return score + shared[i, j]
        else:
            def score_mod(score, b, h, i, j):
                return score + log_sigma[h, i, j]
        return flex(q, k, v, score_mod=score_mod, block_mask=block_mask)
    return attend


def step(attend, tensors, causal):
    """Forward and backward; the gradients dq, dk, dv, dM."""
    q, k, v, M, dy = tensors
    for t in (q, k, v, M):
        t.grad = None
    attend(q, k, v, M, causal).backward(dy)
    return [t.grad for t in (q, k, v, M)]


def timed(attend, tensors, causal, device, seconds):
    """(median fwd+bwd ms, same bits) of one torch attention, or (None, why it failed)."""
    try:
        for _ in range(3):  # warm-up (and compiling)
            first = [g.clone() for g in step(attend, tensors, causal)]
        again = step(attend, tensors, causal)
    except Exception as e:  # a backend that refuses the case, or a compile failure
        lines = [line.strip() for line in str(e).splitlines() if line.strip() and not line.strip().endswith(":")]
        return None, "failed: " + (lines[0] if lines else type(e).__name__)
    same = all(torch.equal(a, b) for a, b in zip(first, again))
    windows, end = [], time.perf_counter() + seconds
    while time.perf_counter() < end or len(windows) < 3:
        if device == "cuda":
            start, stop = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
            start.record()
            for _ in range(5):
                step(attend, tensors, causal)
            stop.record()
            torch.cuda.synchronize()
            windows.append(start.elapsed_time(stop) / 5)
        else:
            t0 = time.perf_counter()
            step(attend, tensors, causal)
            windows.append((time.perf_counter() - t0) * 1000)
    return statistics.median(windows), same


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--device", default="cuda", choices=("cuda", "cpu"))
    ap.add_argument("--small", action="store_true", help="small cases and short windows (a check of the script)")
    opt = ap.parse_args(argv)
    torch.backends.cuda.matmul.allow_tf32 = False
    torch.backends.cudnn.allow_tf32 = False
    seconds = 0.3 if opt.small else 1.0
    t_start = time.perf_counter()
    summary = []
    print("attention forward + backward with dM, fp32 (TF32 off), %s; PyTorch %s" % (
        torch.cuda.get_device_name() if opt.device == "cuda" else "CPU", torch.__version__))
    bar = "+------------------------------+---------------------------+-------------+-------------+-----------+"
    for case in SMALL_CASES if opt.small else CASES:
        name, B, T, NH, HS, heads, causal = case
        rows = [("maskprior kernel %d" % v,) + ours(case, v, opt.device) for v in versions()]
        tensors = inputs(case, opt.device)
        missing = "not in torch %s" % torch.__version__
        rows.append(("PyTorch eager (SDPA)",) + (
            timed(eager, tensors, causal, opt.device, seconds) if hasattr(F, "scaled_dot_product_attention")
            else (None, missing)))
        if hasattr(torch, "compile"):
            torch._dynamo.reset()
            rows.append(("torch.compile",) + timed(torch.compile(written_out), tensors, causal, opt.device, seconds))
        else:
            rows.append(("torch.compile", None, missing))
        flex = flex_factory(causal, T, opt.device)
        rows.append(("FlexAttention, learnable bias",) + (
            (None, flex) if isinstance(flex, str) else timed(flex, tensors, causal, opt.device, seconds)))
        kernel3 = rows[2][1]
        print("\n%s: B %d T %d NH %d HS %d\n%s" % (name, B, T, NH, HS, bar))
        print("| %-28s | %-25s | %11s | %11s | %-9s |" % ("case", "implementation", "fwd+bwd ms", "ours / this",
                                                          "same bits"))
        print(bar)
        for label, ms, same in rows:
            if ms is None:
                print("| %-28s | %-25s | %-49s |" % (name[:28], label[:25], str(same)[:49]))
            else:
                ratio = "%10.2fx" % (ms / kernel3) if kernel3 else "%11s" % "-"
                print("| %-28s | %-25s | %11.3f | %s | %-9s |" % (name[:28], label[:25], ms, ratio,
                                                                 "yes" if same else "NO"))
        print(bar)
        flex_ms, flex_same = rows[-1][1], rows[-1][2]
        if kernel3 and flex_ms:
            summary.append("T%d: kernel 3 %.2fx FlexAttention's speed, bits %s vs %s" % (
                T, flex_ms / kernel3, "same" if rows[2][2] else "DIFFER", "same" if flex_same else "differ"))
        else:
            summary.append("T%d: kernel 3 %s, FlexAttention %s" % (
                T, "%.3f ms" % kernel3 if kernel3 else "n/a", "%.3f ms" % flex_ms if flex_ms else "n/a"))
    print("\nthe attention benchmark took %.0f s" % (time.perf_counter() - t_start))
    print("attention " + "; ".join(summary))


if __name__ == "__main__":
    sys.exit(main())
