"""CPU speed of ./maskprior against the same model in PyTorch (eager), on the `make run` model.

Configuration (the binary's defaults plus --task maj3 --init mask): B 64, T 16, vocab 3,
C 32, L 2, NH 2, HS 16, MLP 32, one (T,T) mask per layer shared by the heads, scalar
regression head on CLS, MSE loss, AdamW lr 1e-3, weight decay 1e-3 (mask 0), float32.

Method
- maskprior: a short probe run estimates the speed; then one run of N steps (N chosen for
  about BENCH_SECONDS, default 10 s) with a progress line every N/10 steps. Those lines time
  training steps only (evaluation is excluded by the program). The first two windows are
  dropped as warm-up; steps/s = steps / time over the remaining windows.
- PyTorch: Debian's python3-torch, eager mode, torch.set_num_threads(OMP_NUM_THREADS), the
  same OMP_NUM_THREADS the binary gets. An equivalent module (token + position embedding,
  pre-LN blocks with a qkv Linear of 3*NH*HS, logsigmoid(M) added to the scores, proj, GELU
  tanh MLP, final LN on position 0, Linear head, MSE) and torch.optim.AdamW, trained on
  random ±1 token batches made inside the loop (as the binary makes its batches inside its
  loop); BENCH_WARMUP_S of warm-up, then as many steps as fit in BENCH_SECONDS.
- GFLOP/s = analytic FLOPs of one step / seconds per step. Counted: every matmul, 2*N*K*M
  forward and 4*N*K*M backward (dX and dW), and attention's QK^T and AV per head
  (2*B*NH*T*T*HS each forward; backward dA, dV, dQ, dK = 2x the forward). Not counted:
  elementwise work (LayerNorm, softmax, logsigmoid, GELU, residuals, AdamW), a few percent.
"""
import ctypes
import os
import re
import subprocess
import sys
import time

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
THREADS = int(os.environ.get("OMP_NUM_THREADS") or os.cpu_count())
os.environ["OMP_NUM_THREADS"] = str(THREADS)  # before torch loads: OpenMP and OpenBLAS read it
SECONDS = float(os.environ.get("BENCH_SECONDS", "10"))
WARMUP_S = float(os.environ.get("BENCH_WARMUP_S", "2"))
B, T, V, C, L, NH, HS, MLP, OUT = 64, 16, 3, 32, 2, 2, 16, 32, 1
LR, WD, MASK_C = 1e-3, 1e-3, 6.0


def step_flops():
    n = B * T
    linears = [(n, C, 3 * NH * HS), (n, NH * HS, C), (n, C, MLP), (n, MLP, C)]  # per layer
    per_layer = sum(2 * a * b * c for a, b, c in linears) + 2 * (2 * B * NH * T * T * HS)
    fwd = L * per_layer + 2 * B * C * OUT  # + the head on CLS
    return 3 * fwd  # forward + backward (2x forward)


def run_maskprior(steps, log_every, out):
    cmd = [os.path.join(ROOT, "maskprior"), "--task", "maj3", "--init", "mask", "--device", "cpu",
           "--steps", str(steps), "--eval-every", str(steps), "--log-every", str(log_every), "--out", out]
    res = subprocess.run(cmd, capture_output=True, text=True, env=dict(os.environ, OMP_NUM_THREADS=str(THREADS)))
    if res.returncode != 0:
        sys.exit("bench: %s failed (%d):\n%s%s" % (" ".join(cmd), res.returncode, res.stdout, res.stderr))
    lines = re.findall(r"^step +(\d+)/\d+ \|.*?\| +([\d.]+) ms/step \|", res.stdout, re.M)
    first = res.stdout.splitlines()[0] if res.stdout else ""
    return [(int(s), float(ms)) for s, ms in lines], first


def bench_maskprior():
    probe, first = run_maskprior(100, 50, "/tmp/maskprior-bench-probe")
    m = re.search(r"(\d+) threads", first)
    if m and int(m.group(1)) != THREADS:
        sys.exit("bench: maskprior runs %s threads, expected %d" % (m.group(1), THREADS))
    rate = 1000.0 / probe[-1][1]
    log_every = max(10, int(rate * SECONDS / 10) // 10 * 10)
    windows, _ = run_maskprior(10 * log_every, log_every, "/tmp/maskprior-bench")
    kept = windows[2:]  # the rest are warm-up
    ms = sum(w for _, w in kept) / len(kept)  # equal windows: mean of ms/step
    return 1000.0 / ms, 10 * log_every, first


def bench_torch():
    import torch
    import torch.nn as nn
    import torch.nn.functional as F
    torch.set_num_threads(THREADS)
    torch.manual_seed(1)

    class Block(nn.Module):
        def __init__(self, G):
            super().__init__()
            self.ln1, self.ln2 = nn.LayerNorm(C), nn.LayerNorm(C)
            self.qkv, self.proj = nn.Linear(C, 3 * NH * HS), nn.Linear(NH * HS, C)
            self.mask = nn.Parameter(torch.where(G > 0, MASK_C, -MASK_C))  # (T,T) shared by heads
            self.fc, self.fcproj = nn.Linear(C, MLP), nn.Linear(MLP, C)

        def forward(self, x):
            q, k, v = self.qkv(self.ln1(x)).split(NH * HS, dim=-1)
            q, k, v = (t.view(B, T, NH, HS).transpose(1, 2) for t in (q, k, v))  # (B,NH,T,HS)
            s = q @ k.transpose(-1, -2) * HS ** -0.5 + F.logsigmoid(self.mask)
            y = (s.softmax(-1) @ v).transpose(1, 2).reshape(B, T, NH * HS)
            x = x + self.proj(y)
            return x + self.fcproj(F.gelu(self.fc(self.ln2(x)), approximate="tanh"))

    class Net(nn.Module):
        def __init__(self):
            super().__init__()
            G = torch.eye(T)
            G[:4, :4] = 1  # maj3: CLS, x0, x1, x2 all pairs; every token with itself
            self.wte, self.wpe = nn.Parameter(torch.randn(V, C)), nn.Parameter(torch.randn(T, C))
            self.blocks = nn.ModuleList(Block(G) for _ in range(L))
            self.ln_f, self.head = nn.LayerNorm(C), nn.Linear(C, OUT)

        def forward(self, tokens):
            x = self.wte[tokens] + self.wpe
            for blk in self.blocks:
                x = blk(x)
            return self.head(self.ln_f(x[:, 0])).squeeze(-1)

    net = Net()
    masks = [p for n, p in net.named_parameters() if n.endswith(".mask")]
    rest = [p for n, p in net.named_parameters() if not n.endswith(".mask")]
    opt = torch.optim.AdamW([{"params": rest, "weight_decay": WD}, {"params": masks, "weight_decay": 0.0}], lr=LR)

    def step():
        bits = torch.randint(0, 2, (B, T - 1))
        tokens = torch.cat([torch.full((B, 1), 2), bits], 1)  # CLS = 2, bit b is token (b+1)/2
        x = 2.0 * bits[:, :3].float() - 1.0
        target = torch.sign(x.sum(1))
        loss = F.mse_loss(net(tokens), target)
        opt.zero_grad(set_to_none=True)
        loss.backward()
        opt.step()
        return loss

    t0 = time.perf_counter()
    while time.perf_counter() - t0 < WARMUP_S:
        step()
    n, t0 = 0, time.perf_counter()
    while time.perf_counter() - t0 < SECONDS:
        loss = step()
        n += 1
    rate = n / (time.perf_counter() - t0)
    if not torch.isfinite(loss):
        sys.exit("bench: PyTorch loss is %s" % loss.item())
    return rate, n, loss.item()


def loaded_blas():
    """Resolved paths of the BLAS libraries mapped into this process, and OpenBLAS's threads."""
    paths = []
    with open("/proc/self/maps") as f:
        for line in f:
            p = line.split()[-1]
            if "blas" in os.path.basename(p).lower() and p.startswith("/") and p not in paths:
                paths.append(os.path.realpath(p))
    info = []
    for p in paths:
        try:
            n = ctypes.CDLL(p).openblas_get_num_threads()
            info.append("%s (OpenBLAS, %d threads)" % (p, n))
        except (OSError, AttributeError):
            info.append("%s (%s)" % (p, "reference BLAS" if "blas/libblas" in p else "no openblas_* symbols"))
    return info or ["none mapped"]


def cpu_model():
    with open("/proc/cpuinfo") as f:
        for line in f:
            if line.startswith("model name"):
                return line.split(":", 1)[1].strip()
    return "unknown"


def main():
    flops = step_flops()
    ours, our_steps, first = bench_maskprior()
    theirs, their_steps, their_loss = bench_torch()
    import torch
    print("maskprior CPU benchmark: task maj3, init mask, B %d T %d C %d L %d NH %d HS %d MLP %d, AdamW, fp32"
          % (B, T, C, L, NH, HS, MLP))
    print("FLOPs per training step (matmuls + attention QK^T, AV; forward + backward): %d (%.1f MFLOP)"
          % (flops, flops / 1e6))
    print("+-----------------+-----------+---------+----------+--------+")
    print("| implementation  |   steps/s | ms/step | GFLOP/s  |  steps |")
    print("+-----------------+-----------+---------+----------+--------+")
    for name, rate, n in (("maskprior", ours, our_steps), ("PyTorch eager", theirs, their_steps)):
        print("| %-15s | %9.1f | %7.3f | %8.2f | %6d |" % (name, rate, 1000 / rate, rate * flops / 1e9, n))
    print("+-----------------+-----------+---------+----------+--------+")
    print("ratio (maskprior / PyTorch steps/s): %.2fx" % (ours / theirs))
    print("threads:  %d (OMP_NUM_THREADS; torch.get_num_threads() = %d)" % (THREADS, torch.get_num_threads()))
    print("CPU:      %s" % cpu_model())
    print("maskprior: %s" % first.split(": ", 1)[-1])
    print("PyTorch:  %s, final loss %.4g" % (torch.__version__, their_loss))
    for b in loaded_blas():
        print("BLAS:     %s" % b)


if __name__ == "__main__":
    main()
