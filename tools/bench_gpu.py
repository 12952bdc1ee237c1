"""GPU speed of ./maskprior against the same training step in PyTorch, eager and torch.compile.

    python3 tools/bench_gpu.py                    # tests/gpu_check.sh, step 4; about 90 s at most
    /usr/bin/python3 tools/bench_gpu.py --device cpu --small   # a check of the script, no GPU
    python3 tools/bench_gpu.py --attention        # the attention layer alone against PyTorch eager,
                                                  # torch.compile and FlexAttention (tools/bench_attention.py)

Model: the paper-size GOTU model on 2parity: B 256, T 16, vocab 3, C 256,
L 12, NH 6, HS 64, MLP 256, scalar regression head on CLS, MSE, AdamW lr 1e-5, weight decay
1e-3 (mask 0), fp32 with TF32 off on both sides. Two variants: no mask (--init default) and
one (T,T) mask per layer shared by the heads (--init mask, ±6 from G). --small: the `make run`
model (C 32, L 2, NH 2, HS 16, MLP 32, B 64, lr 1e-3) and shorter windows. On a GPU, maskprior
also runs with its faster kernel versions (--attention-kernel 3 --fast-kernels), a row of its
own; "ours / this" stays the default kernels' rate over each row's.

Method (tools/bench.py's helpers)
- maskprior: ./maskprior --device cuda printing a progress line every LOG_EVERY steps; each
  line times its window of training steps only (the program syncs the GPU before it reads the
  clock, and excludes evaluation). Two warm-up windows, then SECONDS of windows, then it is
  stopped. A failing ./maskprior ends this script with its output and a non-zero exit.
- PyTorch eager: tests/torch_reference.py's model_loss over a dict of leaf tensors drawn like
  the C++ default init, torch.optim.AdamW (its default implementation), a random ±1 batch
  made on the device in every step, as the binary makes one every step. WARMUP_S of warm-up,
  then 10 windows filling SECONDS, each closed by torch.cuda.synchronize().
- torch.compile: the same step with model_loss compiled (default mode; forward and backward
  go through inductor, AdamW stays eager). Three warm-up steps compile it, stopped after
  COMPILE_CAP seconds (the row then says so); the compile time is printed, not counted.
- Rates are medians over the windows; "ours / this" = maskprior's steps/s / the row's. The
  last line is the summary that gpu_check.sh puts in its table.
"""
import argparse
import os
import signal
import statistics
import sys
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import bench  # noqa: E402  (sets OMP_NUM_THREADS before torch loads)
import torch  # noqa: E402

PAPER = {"width": 256, "layers": 12, "heads": 6, "head_size": 64, "mlp": 256, "batch": 256, "lr": 1e-5}
SMALL = {"width": 32, "layers": 2, "heads": 2, "head_size": 16, "mlp": 32, "batch": 64, "lr": 1e-3}
WD, COMPILE_CAP = 1e-3, 30
FASTEST = ("--attention-kernel", "3", "--fast-kernels")  # the faster kernels, in a row of their own
VARIANTS = {"none": "default", "layer": "mask"}  # torch_reference's mask kind: maskprior's --init


def maskprior_rate(m, init, device, seconds, log_every, extra=()):
    args = ["--task", "2parity", "--init", init, "--device", device, "--wd", str(WD)] + list(extra)
    for key in ("width", "layers", "heads", "head_size", "mlp", "batch", "lr"):
        args += ["--" + key.replace("_", "-"), str(m[key])]
    rates, _, first = bench.bench_maskprior(args, seconds, log_every)
    return statistics.median(rates), first


def compiled_rate(make_step, seconds, sync):
    """(steps/s, row name) of the step that make_step() builds with torch.compile; steps/s is
    None when torch.compile is missing, fails or takes more than COMPILE_CAP seconds."""
    if not hasattr(torch, "compile"):
        return None, "torch.compile: not in torch %s" % torch.__version__
    torch._dynamo.reset()
    step, t0 = make_step(), time.perf_counter()

    def give_up(signum, frame):
        raise TimeoutError("compiling took more than %d s" % COMPILE_CAP)
    signal.signal(signal.SIGALRM, give_up)
    signal.setitimer(signal.ITIMER_REAL, COMPILE_CAP, 1)  # again every second, should one be swallowed
    try:
        for _ in range(3):
            step()
        sync()
    except Exception as e:  # the TimeoutError, maybe wrapped by dynamo, or a failure to compile
        if time.perf_counter() - t0 >= COMPILE_CAP:
            return None, "torch.compile: gave up after %d s of compiling" % COMPILE_CAP
        return None, "torch.compile failed: %s" % (str(e).strip().splitlines() or [type(e).__name__])[0][:45]
    finally:
        signal.setitimer(signal.ITIMER_REAL, 0)
    compile_s = time.perf_counter() - t0
    rates, _ = bench.time_windows(step, seconds, 0.5, sync=sync)
    return statistics.median(rates), "torch.compile (%.0f s to compile)" % compile_s


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--device", default="cuda", choices=("cuda", "cpu"))
    ap.add_argument("--small", action="store_true", help="the make-run model and short windows")
    ap.add_argument("--attention", action="store_true", help="the attention layer alone (tools/bench_attention.py)")
    opt = ap.parse_args()
    if opt.attention:
        import bench_attention
        return bench_attention.main(["--device", opt.device] + (["--small"] if opt.small else []))
    m = SMALL if opt.small else PAPER
    seconds, warmup_s, log_every = (1.0, 0.5, 10) if opt.small else (2.0, 1.0, 20)
    torch.backends.cuda.matmul.allow_tf32 = False
    torch.backends.cudnn.allow_tf32 = False
    sync = torch.cuda.synchronize if opt.device == "cuda" else (lambda: None)
    if opt.device == "cpu":  # as bench.py's main row: OpenBLAS on 1 thread under torch's OpenMP pool
        bench.blas_threads(bench.torch_sgemm_library(torch), 1)
    cfg = {"width": m["width"], "layers": m["layers"], "heads": m["heads"], "head_size": m["head_size"],
           "mlp": m["mlp"], "seq_len": 16, "vocab": 3, "out": 1, "causal": 0, "head_type": "regression"}
    t_start = time.perf_counter()

    ours = {v: maskprior_rate(m, init, opt.device, seconds, log_every) for v, init in VARIANTS.items()}
    rows = {v: [("maskprior", "", ours[v][0])] for v in VARIANTS}  # (name, summary word, steps/s)
    if opt.device == "cuda":  # the faster kernel versions (README: Kernels for learners); the CPU has none
        for v, init in VARIANTS.items():
            rate = maskprior_rate(m, init, opt.device, seconds, log_every, FASTEST)[0]
            rows[v].append(("maskprior, faster kernels", "faster", rate))

    def make_step(variant, compile=False):
        return bench.torch_step("2parity", dict(cfg, mask=variant), m["batch"], m["lr"], WD, opt.device, compile)
    for v in VARIANTS:
        rates, _ = bench.time_windows(make_step(v), seconds, warmup_s, sync=sync)
        rows[v].append(("PyTorch eager", "eager", statistics.median(rates)))
    for v in VARIANTS:  # after every eager row: a compile cut short may leave workers behind
        rate, name = compiled_rate(lambda: make_step(v, compile=True), seconds, sync)
        rows[v].append((name, "compile", rate))

    print("maskprior GPU benchmark: task 2parity, B %d T 16 C %d L %d NH %d HS %d MLP %d, AdamW, fp32 (TF32 off), %s"
          % (m["batch"], m["width"], m["layers"], m["heads"], m["head_size"], m["mlp"], opt.device))
    bar = "+---------+-----------------------------------+---------+---------+-------------+"
    print(bar + "\n| mask    | implementation                    | steps/s | ms/step | ours / this |\n" + bar)
    for v in VARIANTS:
        for name, _, rate in rows[v]:
            if rate is None:
                print("| %-7s | %-67s |" % (v, name))
            else:
                print("| %-7s | %-33s | %7.1f | %7.3f | %10.2fx |" % (v, name, rate, 1000 / rate, ours[v][0] / rate))
    print(bar)
    print("device:    %s" % (torch.cuda.get_device_name() if opt.device == "cuda" else "CPU, %d threads" % bench.THREADS))
    print("maskprior: %s" % ours["layer"][1].split(": ", 1)[-1])
    print("PyTorch:   %s; the whole benchmark took %.0f s" % (torch.__version__, time.perf_counter() - t_start))
    summary = []
    for v in VARIANTS:
        rate_of = {word: rate for _, word, rate in rows[v]}  # "" is ours with the default kernels
        for label, word in (("", ""), ("faster kernels ", "faster")):
            if word in rate_of:
                ratios = ["%.2fx %s" % (rate_of[word] / rate_of[w], w) if rate_of[word] and rate_of[w] else w + " n/a"
                          for w in ("eager", "compile")]
                summary.append("%s%s (%s)" % (label, ", ".join(ratios), "mask" if v == "layer" else "no mask"))
    print("maskprior " + "; ".join(summary))


if __name__ == "__main__":
    main()
