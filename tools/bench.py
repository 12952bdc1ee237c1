"""CPU speed of ./maskprior against the same model in PyTorch (eager), on the `make run` model.

Model: --task maj3 --init mask with the binary's defaults: B 64, T 16, vocab 3, C 32, L 2,
NH 2, HS 16, MLP 32, one (T,T) mask per layer shared by the heads, scalar regression head
on CLS, MSE loss, AdamW lr 1e-3, weight decay 1e-3 (mask 0), float32.

Method
- maskprior: one run printing a progress line every 50 steps; each line times its window of
  training steps only (the program excludes evaluation). The first two windows are warm-up;
  once BENCH_SECONDS (default 10) of windows are in, the run is stopped (by its pid).
- PyTorch: Debian's python3-torch under /usr/bin/python3, eager mode, torch.set_num_threads
  = OMP_NUM_THREADS, the value the binary gets. The model is tests/torch_reference.py's
  (model_loss over a dict of parameter tensors, the one the gradient cross-check uses), in
  float32, its leaf tensors drawn like the C++ default init (prior/init.cuh) with the mask ±6 from
  G, and torch.optim.AdamW, trained on random ±1 token batches made inside the loop, as the
  binary makes its own; BENCH_WARMUP_S (default 2) of warm-up, then 10 windows filling
  BENCH_SECONDS. (bench_maskprior, torch_step, time_windows serve tools/bench_gpu.py too.)
  Main row: OpenBLAS held to 1 thread, so the process runs OMP_NUM_THREADS threads in all,
  like the binary. Short extra rows: OpenBLAS's own pool of OMP_NUM_THREADS pthreads on top
  of torch's OpenMP pool (what a plain `import torch` gets), and 1 thread in all.
- Rates are medians over windows (shared CPUs are noisy; a window can stall); the spread
  column gives the slowest and the fastest window. Other processes' CPU use during the run
  is measured from /proc/stat and printed, with a warning when it is not negligible.
- GFLOP/s = analytic FLOPs of one step / seconds per step. Counted: every matmul, 2*N*K*M
  forward and 4*N*K*M backward (dX and dW), and attention's QK^T and AV per head
  (2*B*NH*T*T*HS each forward; backward dA, dV, dQ, dK = 2x the forward). Not counted:
  elementwise work (LayerNorm, softmax, logsigmoid, GELU, residuals, AdamW), a few percent.
"""
import ctypes
import os
import re
import shutil
import statistics
import subprocess
import sys
import tempfile
import time

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, os.path.join(ROOT, "tests"))  # torch_reference, imported only once torch may load
THREADS = int(os.environ.get("OMP_NUM_THREADS") or os.cpu_count())
os.environ["OMP_NUM_THREADS"] = str(THREADS)  # before torch loads
SECONDS = float(os.environ.get("BENCH_SECONDS", "10"))
WARMUP_S = float(os.environ.get("BENCH_WARMUP_S", "2"))
B, T, V, C, L, NH, HS, MLP, OUT = 64, 16, 3, 32, 2, 2, 16, 32, 1
LR, WD, MASK_C = 1e-3, 1e-3, 6.0
# tests/torch_reference.py's configuration of a model (the keys of a checkpoint's metadata)
CFG = {"width": C, "layers": L, "heads": NH, "head_size": HS, "mlp": MLP, "seq_len": T, "vocab": V,
       "out": OUT, "causal": 0, "mask": "layer", "head_type": "regression"}
# Boolean GOTU tasks (tasks/boolean.h): the size of the group [CLS, x0, ...] that G links all
# pairs of (besides every token with itself), and f of the ±1 bits x (B, 15)
TASKS = {"2parity": (3, lambda x: x[:, 0] * x[:, 1]),
         "maj3": (4, lambda x: x[:, :3].sum(1).sign())}


def step_flops():
    n = B * T
    linears = [(n, C, 3 * NH * HS), (n, NH * HS, C), (n, C, MLP), (n, MLP, C)]  # per layer
    per_layer = sum(2 * a * b * c for a, b, c in linears) + 2 * (2 * B * NH * T * T * HS)
    fwd = L * per_layer + 2 * B * C * OUT  # + the head on CLS
    return 3 * fwd  # forward + backward (2x forward)


def bench_maskprior(args, seconds=SECONDS, log_every=50, expect=""):
    """Runs ./maskprior ARGS for very many steps, reads its progress lines as they come, and
    stops it (by its pid) once `seconds` of windows are in after two warm-up windows. Returns
    the windows' steps/s, their step count and the program's first line (its device); exits
    with the program's output when it fails, or when its first line does not match `expect`."""
    out_dir = tempfile.mkdtemp(prefix="maskprior-bench-")  # in $TMPDIR; its own, so runs at once never collide
    cmd = [os.path.join(ROOT, "maskprior")] + args + [
        "--steps", "1000000", "--eval-every", "1000000", "--log-every", str(log_every), "--out", out_dir]
    try:
        proc = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True,
                                env=dict(os.environ, OMP_NUM_THREADS=str(THREADS)))
    except OSError as e:
        sys.exit("bench: cannot run %s (%s): build it first with make maskprior" % (cmd[0], e))
    first, out, rates, t0 = proc.stdout.readline().strip(), [], [], None
    for line in proc.stdout if re.search(expect, first) else []:
        out.append(line)
        m = re.match(r"step +\d+/\d+ \|.*?\| +([\d.]+) ms/step \|", line)
        if m:
            rates.append(1000.0 / float(m.group(1)))
            t0 = time.perf_counter() if len(rates) == 2 else t0  # the first two are warm-up
            if len(rates) >= 5 and time.perf_counter() - t0 >= seconds:
                break
    failed = len(rates) < 5 or proc.poll() is not None  # still running: it is we who stop it
    proc.terminate()
    proc.wait()
    shutil.rmtree(out_dir, ignore_errors=True)
    if failed:
        why = "exit %s" % proc.returncode if re.search(expect, first) else "first line not matching %r" % expect
        sys.exit("bench: maskprior failed (%s): %s\n%s\n%s" % (why, " ".join(cmd), first, "".join(out)))
    return rates[2:], log_every * (len(rates) - 2), first


def torch_step(task, cfg, batch, lr, wd, device="cpu", compile=False):
    """One training step of tests/torch_reference.py's model on a fresh random batch of a
    Boolean task, as a function returning the loss. Parameters: leaf float32 tensors drawn
    like the C++ default init (prior/init.cuh), a mask (cfg["mask"] not "none") ±MASK_C from the
    task's G; torch.optim.AdamW with weight decay wd, the mask's 0. compile: the loss under
    torch.compile (forward and backward; the optimizer stays eager)."""
    import torch
    from torch_reference import model_loss, parameter_shapes
    torch.manual_seed(1)
    group, f = TASKS[task]
    G = torch.eye(cfg["seq_len"])
    G[:group, :group] = 1
    shapes, p = parameter_shapes(cfg), {}
    for name, shape in shapes.items():
        if name in ("wte", "wpe"):
            t = torch.randn(shape)
        elif name.endswith(".mask"):
            t = (MASK_C * (2 * G - 1)).expand(shape).clone()
        elif name.split(".")[-2].startswith("ln"):  # ln1, ln2, ln_f: weight 1, bias 0
            t = torch.full(shape, float(name.endswith(".weight")))
        else:  # a Linear weight (out, in) or its bias: U(±1/sqrt(in))
            bound = shapes[name.replace(".bias", ".weight")][1] ** -0.5
            t = torch.empty(shape).uniform_(-bound, bound)
        p[name] = t.to(device).requires_grad_()
    groups = [{"params": [t for n, t in p.items() if n.endswith(".mask") == is_mask],
               "weight_decay": 0.0 if is_mask else wd} for is_mask in (False, True)]
    opt = torch.optim.AdamW([g for g in groups if g["params"]], lr=lr)
    loss_fn = torch.compile(model_loss) if compile else model_loss

    def step():
        bits = torch.randint(0, 2, (batch, cfg["seq_len"] - 1), device=device)
        tokens = torch.cat([torch.full((batch, 1), 2, device=device), bits], 1)  # CLS = 2, bit b is token (b+1)/2
        loss = loss_fn(p, cfg, tokens, f(2.0 * bits - 1))
        opt.zero_grad(set_to_none=True)
        loss.backward()
        opt.step()
        return loss
    return step


def time_windows(step, seconds, warmup_s, windows=10, sync=lambda: None):
    """Steps/s of `windows` windows filling `seconds`, after warmup_s of warm-up; sync() (e.g.
    torch.cuda.synchronize) closes the warm-up and every window before the clock is read."""
    t0 = time.perf_counter()
    while time.perf_counter() - t0 < warmup_s:
        step()
    sync()
    rates = []
    for _ in range(windows):
        n, t0 = 0, time.perf_counter()
        while time.perf_counter() - t0 < seconds / windows:
            loss, n = step(), n + 1
        sync()
        rates.append(n / (time.perf_counter() - t0))
    if not loss.isfinite():
        sys.exit("bench: the PyTorch loss is %s" % loss.item())
    return rates, round(sum(rates) * seconds / windows)


class DlInfo(ctypes.Structure):  # glibc's Dl_info, for dladdr
    _fields_ = [("fname", ctypes.c_char_p), ("fbase", ctypes.c_void_p), ("sname", ctypes.c_char_p),
                ("saddr", ctypes.c_void_p)]


def torch_sgemm_library(torch):
    """The resolved path of the library whose sgemm_ libtorch_cpu calls (dlsym, then dladdr)."""
    info = DlInfo()
    try:
        lib = ctypes.CDLL(os.path.join(os.path.dirname(torch.__file__), "lib", "libtorch_cpu.so"))
        ok = ctypes.CDLL(None).dladdr(ctypes.cast(lib.sgemm_, ctypes.c_void_p), ctypes.byref(info))
    except (OSError, AttributeError):  # another build of torch (MKL, a wheel): no sgemm_ to follow
        ok = 0
    return os.path.realpath(info.fname.decode()) if ok else "unknown"


def blas_threads(path, n):
    """Sets OpenBLAS's thread count to n and returns it; None when path is not OpenBLAS."""
    try:
        lib = ctypes.CDLL(path)
        lib.openblas_set_num_threads(n)
    except (OSError, AttributeError):
        return None
    return lib.openblas_get_num_threads()


def cpu_snapshot():  # (busy ticks of all CPUs, this process and its children's CPU seconds, time)
    f = [int(x) for x in open("/proc/stat").readline().split()[1:8]]
    return sum(f) - f[3] - f[4], sum(os.times()[:4]), time.perf_counter()


def main():
    flops, start = step_flops(), cpu_snapshot()
    ours, our_steps, first = bench_maskprior(["--task", "maj3", "--init", "mask", "--device", "cpu"],
                                             expect=" %d threads" % THREADS)
    import torch
    torch.set_num_threads(THREADS)
    step = torch_step("maj3", CFG, B, LR, WD)
    blas = torch_sgemm_library(torch)
    blas_kind = "OpenBLAS" if blas_threads(blas, 1) else "reference BLAS" if "/blas/" in blas else "?"
    rows = [("maskprior", ours, our_steps),
            ("PyTorch eager (%s)" % ("OpenBLAS 1 thr" if blas_kind == "OpenBLAS" else blas_kind),)
            + time_windows(step, SECONDS, WARMUP_S)]
    if THREADS > 1 and blas_kind == "OpenBLAS":
        n = blas_threads(blas, THREADS)
        rows.append(("PyTorch eager (OpenBLAS %d thr)" % n,) + time_windows(step, SECONDS / 3, 0.5, 5))
    if THREADS > 1:
        blas_threads(blas, 1)
        torch.set_num_threads(1)
        rows.append(("PyTorch eager, 1 thread in all",) + time_windows(step, SECONDS / 3, 0.5, 5))
    end = cpu_snapshot()
    others = ((end[0] - start[0]) / os.sysconf("SC_CLK_TCK") - (end[1] - start[1])) / (end[2] - start[2])

    print("maskprior CPU benchmark: task maj3, init mask, B %d T %d C %d L %d NH %d HS %d MLP %d, AdamW, fp32"
          % (B, T, C, L, NH, HS, MLP))
    print("FLOPs per training step (matmuls + attention QK^T, AV; forward + backward): %d = %.1f MFLOP"
          % (flops, flops / 1e6))
    bar = "+--------------------------------+---------+---------+---------+---------------+-------+"
    print(bar + "\n| implementation                 | steps/s | ms/step | GFLOP/s | spread step/s | steps |\n" + bar)
    for name, rates, n in rows:
        r = statistics.median(rates)
        print("| %-30s | %7.1f | %7.3f | %7.2f | %6.1f-%-6.1f | %5d |"
              % (name, r, 1000 / r, r * flops / 1e9, min(rates), max(rates), n))
    print(bar)
    print("ratio (maskprior / %s, steps/s): %.2fx" % (rows[1][0], statistics.median(ours) / statistics.median(rows[1][1])))
    print("threads:   %d (OMP_NUM_THREADS; maskprior and torch.set_num_threads)" % THREADS)
    cpu = re.search(r"^model name\s*: (.*)$", open("/proc/cpuinfo").read(), re.M)
    print("CPU:       %s, %d cores; other processes used %.2f of them during the run%s"
          % (cpu.group(1) if cpu else "unknown", os.cpu_count(), max(0.0, others),
             " (WARNING: a busy machine, the numbers are not reliable)" if others > 0.2 else ""))
    print("maskprior: %s" % first.split(": ", 1)[-1])
    print("PyTorch:   %s (%s)" % (torch.__version__, torch.__file__))
    print("BLAS:      %s (%s; the sgemm_ that libtorch_cpu calls)" % (blas, blas_kind))


if __name__ == "__main__":
    main()
