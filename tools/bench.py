"""CPU speed of ./maskprior against the same model in PyTorch (eager), on the `make run` model.

Configuration (the binary's defaults plus --task maj3 --init mask): B 64, T 16, vocab 3,
C 32, L 2, NH 2, HS 16, MLP 32, one (T,T) mask per layer shared by the heads, scalar
regression head on CLS, MSE loss, AdamW lr 1e-3, weight decay 1e-3 (mask 0), float32.

Method
- maskprior: one run with a progress line every 50 steps; each line times its window of
  training steps only (the program excludes evaluation). The first two windows are warm-up;
  once BENCH_SECONDS (default 10 s) of windows are in, the run is stopped.
- PyTorch: Debian's python3-torch (run by /usr/bin/python3), eager mode, torch.set_num_threads
  = OMP_NUM_THREADS, the value the binary gets. An equivalent module (token + position
  embedding, pre-LN blocks with a qkv Linear of 3*NH*HS, logsigmoid(M) added to the scores,
  proj, GELU tanh MLP, final LN on position 0, Linear head, MSE) and torch.optim.AdamW,
  trained on random ±1 token batches made inside the loop (as the binary makes its batches
  inside its loop); BENCH_WARMUP_S of warm-up, then 10 windows filling BENCH_SECONDS.
  Main row: OpenBLAS held to 1 thread, so the process runs OMP_NUM_THREADS threads in all,
  as the binary does. Second row (short): OpenBLAS's own default pool of OMP_NUM_THREADS
  pthreads on top of torch's OpenMP pool, which is what a plain `import torch` gets.
- The reported rate is the median over windows (this runs on shared, noisy CPUs where a
  window can stall); the spread column gives the slowest and fastest window.
- GFLOP/s = analytic FLOPs of one step / seconds per step. Counted: every matmul, 2*N*K*M
  forward and 4*N*K*M backward (dX and dW), and attention's QK^T and AV per head
  (2*B*NH*T*T*HS each forward; backward dA, dV, dQ, dK = 2x the forward). Not counted:
  elementwise work (LayerNorm, softmax, logsigmoid, GELU, residuals, AdamW), a few percent.
"""
import ctypes
import os
import re
import statistics
import subprocess
import sys
import time

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
THREADS = int(os.environ.get("OMP_NUM_THREADS") or os.cpu_count())
os.environ["OMP_NUM_THREADS"] = str(THREADS)  # before torch loads
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


def bench_maskprior():
    """Runs ./maskprior with many steps, reads its progress lines as they come, and stops it
    (by its pid) once SECONDS of training windows are in, so no final evaluation is waited for."""
    log_every = 50
    cmd = [os.path.join(ROOT, "maskprior"), "--task", "maj3", "--init", "mask", "--device", "cpu",
           "--steps", "1000000", "--eval-every", "1000000", "--log-every", str(log_every),
           "--out", "/tmp/maskprior-bench"]
    proc = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True,
                            env=dict(os.environ, OMP_NUM_THREADS=str(THREADS)))
    first, out, rates, t0 = proc.stdout.readline().strip(), [], [], None
    m = re.search(r"(\d+) threads", first)
    if not m or int(m.group(1)) != THREADS:
        proc.kill()
        sys.exit("bench: maskprior does not run %d threads: %s" % (THREADS, first))
    for line in proc.stdout:
        out.append(line)
        m = re.match(r"step +\d+/\d+ \|.*?\| +([\d.]+) ms/step \|", line)
        if not m:
            continue
        rates.append(1000.0 / float(m.group(1)))
        if len(rates) == 2:  # the first two windows are warm-up
            t0 = time.perf_counter()
        if t0 and len(rates) >= 5 and time.perf_counter() - t0 >= SECONDS:
            break
    proc.terminate()
    proc.wait()
    if len(rates) < 5:
        sys.exit("bench: maskprior stopped early (%s):\n%s%s" % (proc.returncode, first, "".join(out)))
    return rates[2:], log_every * (len(rates) - 2), first


def make_torch_step():
    import torch
    import torch.nn as nn
    import torch.nn.functional as F
    torch.manual_seed(1)

    class Block(nn.Module):
        def __init__(self, G):
            super().__init__()
            self.ln1, self.ln2 = nn.LayerNorm(C), nn.LayerNorm(C)
            self.qkv, self.proj = nn.Linear(C, 3 * NH * HS), nn.Linear(NH * HS, C)
            self.mask = nn.Parameter(MASK_C * (2 * G - 1))  # (T,T) shared by the heads
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
        target = torch.sign((2.0 * bits[:, :3] - 1.0).sum(1))  # maj3 = sign(x0 + x1 + x2)
        loss = F.mse_loss(net(tokens), target)
        opt.zero_grad(set_to_none=True)
        loss.backward()
        opt.step()
        return loss
    return step


def time_windows(step, seconds, warmup_s, windows=10):
    t0 = time.perf_counter()
    while time.perf_counter() - t0 < warmup_s:
        step()
    rates, total = [], 0
    for _ in range(windows):
        n, t0 = 0, time.perf_counter()
        while time.perf_counter() - t0 < seconds / windows:
            loss = step()
            n += 1
        rates.append(n / (time.perf_counter() - t0))
        total += n
    if not loss.isfinite():
        sys.exit("bench: the PyTorch loss is %s" % loss.item())
    return rates, total


def openblas_libs():
    """Resolved paths of the BLAS libraries mapped into this process (from /proc/self/maps)."""
    paths = []
    with open("/proc/self/maps") as f:
        for line in f:
            p = os.path.realpath(line.split()[-1])
            if "blas" in os.path.basename(p).lower() and p.startswith("/") and p not in paths:
                paths.append(p)
    return paths


def blas_threads(paths, n=None):
    """Sets (n given) and returns OpenBLAS's thread count; None when no OpenBLAS is loaded."""
    for p in paths:
        lib = ctypes.CDLL(p)
        if hasattr(lib, "openblas_get_num_threads"):
            if n is not None:
                lib.openblas_set_num_threads(n)
            return lib.openblas_get_num_threads()
    return None


def cpu_model():
    with open("/proc/cpuinfo") as f:
        for line in f:
            if line.startswith("model name"):
                return line.split(":", 1)[1].strip()
    return "unknown"


def main():
    flops = step_flops()
    ours, our_steps, first = bench_maskprior()
    import torch
    torch.set_num_threads(THREADS)
    step = make_torch_step()
    blas = openblas_libs()
    blas_threads(blas, 1)
    theirs, their_steps = time_windows(step, SECONDS, WARMUP_S)
    default_blas = blas_threads(blas, THREADS)
    pool, pool_steps = time_windows(step, SECONDS / 3, 0.5, windows=5) if default_blas else (None, 0)

    print("maskprior CPU benchmark: task maj3, init mask, B %d T %d C %d L %d NH %d HS %d MLP %d, AdamW, fp32"
          % (B, T, C, L, NH, HS, MLP))
    print("FLOPs per training step (matmuls + attention QK^T, AV; forward + backward): %d = %.1f MFLOP"
          % (flops, flops / 1e6))
    bar = "+--------------------------------+---------+---------+---------+---------------+-------+"
    print(bar)
    print("| implementation                 | steps/s | ms/step | GFLOP/s | spread step/s | steps |")
    print(bar)
    rows = [("maskprior", ours, our_steps),
            ("PyTorch eager (OpenBLAS 1 thr)", theirs, their_steps)]
    if pool:
        rows.append(("PyTorch eager (OpenBLAS %d thr)" % default_blas, pool, pool_steps))
    for name, rates, n in rows:
        r = statistics.median(rates)
        print("| %-30s | %7.1f | %7.3f | %7.2f | %6.1f-%-6.1f | %5d |"
              % (name, r, 1000 / r, r * flops / 1e9, min(rates), max(rates), n))
    print(bar)
    print("ratio (maskprior / PyTorch eager, steps/s): %.2fx" % (statistics.median(ours) / statistics.median(theirs)))
    print("threads:   %d (OMP_NUM_THREADS; maskprior and torch.set_num_threads)" % THREADS)
    print("CPU:       %s" % cpu_model())
    print("maskprior: %s" % first.split(": ", 1)[-1])
    print("PyTorch:   %s (%s)" % (torch.__version__, torch.__file__))
    for p in blas or ["none mapped"]:
        kind = "OpenBLAS" if "openblas" in p else "reference BLAS" if "/blas/" in p else "BLAS"
        print("BLAS:      %s (%s)" % (p, kind))


if __name__ == "__main__":
    main()
