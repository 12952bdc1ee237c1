"""GPU speed of ./maskprior against the same training step in PyTorch: eager, torch.compile and
torch.compile's reduce-overhead mode, at two model sizes, one table each.

    python3 tools/bench_gpu.py                    # both sizes (time: below)
    python3 tools/bench_gpu.py --quick            # both sizes, the mask variant, three maskprior rows:
                                                  # make gpu-check's speed stage (tests/gpu_check.py)
    python3 tools/bench_gpu.py --paper            # the paper size only
    python3 tools/bench_gpu.py --small            # the make-run size only
    /usr/bin/python3 tools/bench_gpu.py --device cpu --small   # a check of the script, no GPU
    python3 tools/bench_gpu.py --attention        # the attention layer alone against PyTorch eager,
                                                  # torch.compile and FlexAttention (tools/bench_attention.py)

Sizes, one after the other in the same run (--paper: the first only; --small: the second only):
- paper: the paper-size GOTU model on 2parity: B 256, T 16, vocab 3, C 256, L 12, NH 6, HS 64,
  MLP 256, scalar regression head on CLS, MSE, AdamW lr 1e-5; 2 s of windows after 1 s of warm-up.
- make-run: the `make run` model (C 32, L 2, NH 2, HS 16, MLP 32, B 64, lr 1e-3) on 2parity;
  shorter windows, 1 s after 0.5 s of warm-up.
Both with weight decay 1e-3 (mask 0), fp32 with TF32 off on both sides, in two variants: no mask
(--init default) and one (T,T) mask per layer shared by the heads (--init mask, ±6 from G).

Rows, for each variant
- maskprior: the default kernels, the reference of "ours / this" (its steps/s over the row's)
- maskprior, faster kernels: --attention-kernel 3 --fast-kernels
- maskprior, --cuda-graph: the training step captured once as a CUDA graph and replayed
- maskprior, --matmul-kernel 2: cuBLASLt, the bias, GELU and bias gradient fused as epilogues
- maskprior, faster + graph + matmul 2: the three above together
  (these four exist only on a GPU: --device cpu leaves them out). A --matmul-kernel 2 row whose run
  says on stderr that cuBLASLt turned a product down and matmul version 1 ran it (layers/matmul_lt.cuh)
  is not timed: it would be version 1's time under version 2's name. The row says FAILED, the
  tables and the summary are printed without it, and a last line "FAILED: ..." names each such row
  and quotes the first note; the script then exits 1 (tests/gpu_check.py puts that line in its table).
- PyTorch eager
- torch.compile: the default mode
- torch.compile reduce-overhead: the same compiled step, its forward and backward launched as
  CUDA graphs by PyTorch (the fair peer of --cuda-graph); --device cpu prints the row as skipped

Method (tools/bench.py's helpers)
- maskprior: ./maskprior --device cuda printing a progress line every 20 steps (make-run: 50); each
  line times its window of training steps only (the program syncs the GPU before it reads the
  clock, and excludes evaluation). Two warm-up windows, then the size's seconds of windows, then
  it is stopped. A failing ./maskprior ends this script with its output and a non-zero exit.
- PyTorch eager: tests/torch_reference.py's model_loss over a dict of leaf tensors drawn like
  the C++ default init, torch.optim.AdamW (its default implementation), a batch from 32 random
  ±1 batches made on the device before any clock starts (the binary makes one every step). The
  size's warm-up, then 10 windows filling its seconds, each closed by torch.cuda.synchronize().
- torch.compile: the same step with model_loss compiled (forward and backward go through
  inductor, AdamW stays eager). torch._dynamo.reset() first, so no row runs another's compiled
  code (inductor's caches on disk may still make the later compiles shorter). Three warm-up
  steps compile it, stopped after COMPILE_CAP seconds (the row then says so); the compile time
  is printed, not counted; then windows as for eager.
- torch.compile(mode="reduce-overhead"): the same, PyTorch's CUDAGraph Trees running the
  compiled forward and backward as CUDA graphs (AdamW stays eager, launched outside the
  graphs). Its own warm-up is in the same three steps, under the same COMPILE_CAP: the
  first runs the compiled code without a graph, the second records the graphs, the third
  replays them; the printed time covers all three. Each step marks a new iteration first
  (bench.torch_step).
- Rates are medians over the windows. Each size's table is printed when its rows are done; the
  last line is the summary that tests/gpu_check.py puts in its table: per size and variant, the
  fastest maskprior row, its ms/step and its speed over eager, compile and reduce-overhead.
- --quick, the one GPU call's speed stage: both sizes, the mask variant alone (the method's
  step), and three of maskprior's rows: the default kernels, the faster ones, and the faster ones
  with --cuda-graph and --matmul-kernel 2; PyTorch's three rows as above.
- Time, an estimate (not yet timed on a GPU) from the first GPU session's paper-size steps
  (59 ms maskprior, 18 ms eager) and COMPILE_CAP: about 3 minutes for both sizes, 2 for
  --paper, 1 for --small; up to about 6 (--paper: 3.5, --small: 2.5) when every compile, four
  a size, runs to COMPILE_CAP. --quick: about 1.5 minutes, up to 2.5 when its four compiles
  run to COMPILE_CAP.
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
# each size: (model, seconds of windows, seconds of warm-up, maskprior's steps per progress line)
SIZES = {"paper": (PAPER, 2.0, 1.0, 20), "make-run": (SMALL, 1.0, 0.5, 50)}
WD, COMPILE_CAP = 1e-3, 30
FASTEST = ("--attention-kernel", "3", "--fast-kernels")  # the faster kernels, in a row of their own
GRAPH, MATMUL2 = ("--cuda-graph",), ("--matmul-kernel", "2")
# maskprior's rows: (name, summary word, flags); the first is the reference, the others need a GPU
OURS = [("maskprior", "default", ()),
        ("maskprior, faster kernels", "faster", FASTEST),
        ("maskprior, --cuda-graph", "graph", GRAPH),
        ("maskprior, --matmul-kernel 2", "matmul 2", MATMUL2),
        ("maskprior, faster + graph + matmul 2", "faster + graph + matmul 2", FASTEST + GRAPH + MATMUL2)]
QUICK_ROWS = (0, 1, 4)  # --quick's rows of OURS: default, faster, faster + graph + matmul 2
PEERS = ("eager", "compile", "reduce-overhead")  # PyTorch's rows, by summary word
VARIANTS = {"none": "default", "layer": "mask"}  # torch_reference's mask kind: maskprior's --init
NAME_WIDTH = 48  # the implementation column


def maskprior_rate(m, init, device, seconds, log_every, extra=()):
    """(steps/s, first line) of ./maskprior with the flags `extra`; bench.Refused where a product
    fell back from matmul version 2 to version 1 (bench.MATMUL_FALLBACK_NOTE)."""
    args = ["--task", "2parity", "--init", init, "--device", device, "--wd", str(WD)] + list(extra)
    for key in ("width", "layers", "heads", "head_size", "mlp", "batch", "lr"):
        args += ["--" + key.replace("_", "-"), str(m[key])]
    rates, _, first = bench.bench_maskprior(args, seconds, log_every, refuse=bench.MATMUL_FALLBACK_NOTE)
    return statistics.median(rates), first


def compiled_rate(make_step, seconds, warmup_s, sync, label):
    """(steps/s, row name) of the step that make_step() builds with torch.compile, `label` naming
    the mode in the row; steps/s is None when torch.compile is missing, fails or takes more than
    COMPILE_CAP seconds for its three warm-up steps."""
    if not hasattr(torch, "compile"):
        return None, "%s: no torch.compile in torch %s" % (label, torch.__version__)
    torch._dynamo.reset()
    step, t0 = make_step(), time.perf_counter()

    def give_up(signum, frame):
        raise TimeoutError("compiling took more than %d s" % COMPILE_CAP)
    signal.signal(signal.SIGALRM, give_up)
    signal.setitimer(signal.ITIMER_REAL, COMPILE_CAP, 1)  # again every second, should one be swallowed
    try:
        for _ in range(3):  # reduce-overhead: the compiled code's run, the graphs' recording, a replay
            step()
        sync()
    except Exception as e:  # the TimeoutError, maybe wrapped by dynamo, or a failure to compile
        if time.perf_counter() - t0 >= COMPILE_CAP:
            return None, "%s: gave up after %d s of compiling" % (label, COMPILE_CAP)
        why = (str(e).strip().splitlines() or [type(e).__name__])[0]
        return None, ("%s failed: %s" % (label, why))[:NAME_WIDTH + 34]  # the row's width
    finally:
        signal.setitimer(signal.ITIMER_REAL, 0)
    compile_s = time.perf_counter() - t0
    rates, _ = bench.time_windows(step, seconds, warmup_s, sync=sync)
    return statistics.median(rates), "%s (%.0f s to compile)" % (label, compile_s)


def measure(m, device, seconds, warmup_s, log_every, sync, variants, ours):
    """One size's rows: {variant: [(name, summary word, steps/s or None)]} for the `variants` (keys
    of VARIANTS), maskprior's first (the rows `ours`, of OURS), then PyTorch's (PEERS order); the
    first line of maskprior's first run (its device); and the maskprior rows that fell back to
    matmul version 1: [(row, its first note)]."""
    rows, first, fell_back = {v: [] for v in variants}, "", []
    for name, word, flags in ours if device == "cuda" else ours[:1]:  # the CPU has no other kernels
        for v in variants:
            init = VARIANTS[v]
            try:
                rate, line = maskprior_rate(m, init, device, seconds, log_every, flags)
                rows[v].append((name, word, rate))
                first = first or line
            except bench.Refused as note:
                rows[v].append(("%s: FAILED, matmul version 1 ran" % name, word, None))
                fell_back.append(("%s (%s)" % (name, "mask" if v == "layer" else "no mask"), str(note)))
    cfg = {"width": m["width"], "layers": m["layers"], "heads": m["heads"], "head_size": m["head_size"],
           "mlp": m["mlp"], "seq_len": 16, "vocab": 3, "out": 1, "causal": 0, "head_type": "regression"}

    def make_step(variant, compile=False):
        return bench.torch_step("2parity", dict(cfg, mask=variant), m["batch"], m["lr"], WD, device, compile)
    for v in variants:
        rates, _ = bench.time_windows(make_step(v), seconds, warmup_s, sync=sync)
        rows[v].append(("PyTorch eager", "eager", statistics.median(rates)))
    # after every eager row: a compile cut short may leave workers behind
    for label, word, mode in (("torch.compile", "compile", True),
                              ("torch.compile reduce-overhead", "reduce-overhead", "reduce-overhead")):
        for v in variants:
            if mode == "reduce-overhead" and device == "cpu":
                rate, name = None, label + ": skipped, its CUDA graphs need a GPU"
            else:
                rate, name = compiled_rate(lambda: make_step(v, mode), seconds, warmup_s, sync, label)
            rows[v].append((name, word, rate))
    return rows, first, fell_back


def print_table(size, m, device, rows):
    print("maskprior GPU benchmark, %s size: task 2parity, B %d T 16 C %d L %d NH %d HS %d MLP %d, AdamW, "
          "fp32 (TF32 off), %s" % (size, m["batch"], m["width"], m["layers"], m["heads"], m["head_size"],
                                   m["mlp"], device))
    bar = "+---------+%s+---------+---------+-------------+" % ("-" * (NAME_WIDTH + 2))
    print(bar + "\n| mask    | %-*s | steps/s | ms/step | ours / this |\n" % (NAME_WIDTH, "implementation") + bar)
    for v in rows:
        reference = rows[v][0][2]  # maskprior with the default kernels
        for name, _, rate in rows[v]:
            if rate is None:
                print("| %-7s | %-*s |" % (v, NAME_WIDTH + 34, name))
            else:
                print("| %-7s | %-*s | %7.1f | %7.3f | %10.2fx |" % (v, NAME_WIDTH, name, rate, 1000 / rate,
                                                                     reference / rate))
    print(bar)


def fastest_summary(rows):
    """Per variant: maskprior's fastest row, its ms/step, and its speed over each of PyTorch's rows."""
    ours_words = [word for _, word, _ in OURS]
    parts = []
    for v in rows:
        _, word, rate = max((row for row in rows[v] if row[1] in ours_words and row[2]), key=lambda row: row[2])
        rate_of = {w: r for _, w, r in rows[v]}
        ratios = ["%.2fx %s" % (rate / rate_of[w], w) if rate_of.get(w) else w + " n/a" for w in PEERS]
        parts.append("%s: %s at %.2f ms/step, %s" % ("mask" if v == "layer" else "no mask", word, 1000 / rate,
                                                      ", ".join(ratios)))
    return "; ".join(parts)


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--device", default="cuda", choices=("cuda", "cpu"))
    ap.add_argument("--small", action="store_true", help="only the make-run size (short windows)")
    ap.add_argument("--paper", action="store_true", help="only the paper size")
    ap.add_argument("--quick", action="store_true",
                    help="both sizes, the mask variant, maskprior's default, faster and all-three rows")
    ap.add_argument("--attention", action="store_true", help="the attention layer alone (tools/bench_attention.py)")
    opt = ap.parse_args()
    if opt.attention:
        import bench_attention
        return bench_attention.main(["--device", opt.device] + (["--small"] if opt.small else []))
    sizes = ["make-run"] if opt.small else ["paper"] if opt.paper else ["paper", "make-run"]
    variants = ["layer"] if opt.quick else list(VARIANTS)
    ours = [OURS[i] for i in QUICK_ROWS] if opt.quick else OURS
    torch.backends.cuda.matmul.allow_tf32 = False
    torch.backends.cudnn.allow_tf32 = False
    sync = torch.cuda.synchronize if opt.device == "cuda" else (lambda: None)
    if opt.device == "cpu":  # as bench.py's main row: OpenBLAS on 1 thread under torch's OpenMP pool
        bench.blas_threads(bench.torch_sgemm_library(torch), 1)
    t_start = time.perf_counter()
    summaries, first, failures = [], "", []
    for size in sizes:
        m, seconds, warmup_s, log_every = SIZES[size]
        rows, first, fell_back = measure(m, opt.device, seconds, warmup_s, log_every, sync, variants, ours)
        print_table(size, m, opt.device, rows)  # now, so that a run stopped later still shows it
        summaries.append("%s size, %s" % (size, fastest_summary(rows)))
        failures += [("%s size, %s" % (size, row), note) for row, note in fell_back]
    device = torch.cuda.get_device_name() if opt.device == "cuda" else "CPU, %d threads" % bench.THREADS
    print("device:    %s" % device)
    print("maskprior: %s" % first.split(": ", 1)[-1])
    print("PyTorch:   %s; the whole benchmark took %.0f s" % (torch.__version__, time.perf_counter() - t_start))
    print("maskprior's fastest row over PyTorch: " + "; ".join(summaries))
    if failures:
        print("FAILED: not timed, as cuBLASLt turned products down and matmul version 1 ran them: %s; the first "
              "note: %s" % ("; ".join(row for row, _ in failures), failures[0][1]))
        sys.exit(1)


if __name__ == "__main__":
    main()
