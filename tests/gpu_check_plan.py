"""The plan of make gpu-check (tests/gpu_check.py): its stages and steps, each step's estimate of its
GPU time (an estimate, with where it comes from), its limit, and what it runs.

Stages, in the order of what they decide:
  quick tier (make gpu-check), 480 s:
    a correctness: a short run of each task family, the GPU test cases, make run's model GPU vs CPU
    b speed: the paper-size and make-run steps against PyTorch eager, torch.compile, reduce-overhead
    c the kernel lab (every version checked and timed) and the per-kernel profiles
    d compute-sanitizer's four tools on the kernel tests
  full tier (make gpu-check-full), 540 s:
    e the paper's Boolean table at GOTU's size, as many runs as its limit holds
    f arithmetic at Lee et al.'s size: add3 at 0.4% of the pairs, mul2 at 3%
    g ViT-Tiny and a language model, 300 steps each
    h the logits' kernels past 2^31 floats
  speed tier (--stages i), 420 s:
    i the rest of the speed tables: both mask variants, each flag alone, the attention layer alone

A step is a function step(check) that runs its commands through check.run (each under the step's
limit, the process group killed at it) and returns its rows (check.row). In a rehearsal (no GPU:
tests/test_gpu_check.sh) a step either runs the same command lines on the emulation (check.bin names
the emulated programs, check.size the small shapes), or, where the emulation would take minutes or
has no peer (PyTorch on a GPU), is a stand-in that sleeps its estimate, scaled down.
"""
import json
import os
import re

# The sources of the estimates (none of them a measurement of this version on a GPU):
FIRST_GPU = ("the first GPU session (2026-11-30, one H200, the first kernels): the paper-size 2parity step "
             "59 ms, a 20-epoch run 129 s; PyTorch eager 18 ms, torch.compile 12.4 ms")
START = "a process's start on a GPU (CUDA context, cuBLAS handle): about 2 s, from CUDA's usual costs"
CPU_PART = ("the CPU part as timed on the 2-core AMD EPYC that builds it (the emulated GPU cases: 50 s, "
            "kernels emulated); the GPU machine has 16 cores")
COMPILE = "tools/bench_gpu.py's own estimate: its compiles capped at 30 s each (COMPILE_CAP)"
SANITIZER = ("compute-sanitizer slows kernels 10-100x (NVIDIA's documentation); what does not finish in the "
             "limit is a row of its own, the rest still reported")

# the paper-size 2parity model (GOTU's), and the tiny model of the short runs and of the rehearsal
PAPER = ("--task 2parity --device cuda --width 256 --layers 12 --heads 6 --head-size 64 --mlp 256 "
         "--optimizer adam --lr 1e-5 --wd 1e-3 --batch 256").split()
TINY = "--width 16 --layers 1 --heads 2 --head-size 8 --mlp 16 --batch 32".split()
SHORT = ["--device", "cuda"] + TINY + ["--steps", "5", "--eval-every", "5"]
FASTEST = ["--attention-kernel", "3", "--fast-kernels"]
ALL_FAST = FASTEST + ["--matmul-kernel", "2", "--cuda-graph"]
# the note a --matmul-kernel 2 run prints where cuBLASLt turned a product down (layers/matmul_lt.cuh)
FALLBACK_NOTE = re.compile(r"maskprior: note: cuBLASLt .* matmul version 1 runs it")
# the GPU cases a rehearsal runs: two families, a process each (tests/test_gpu_tests_isolated.sh's)
REHEARSAL_CASES = "emulation: MASKPRIOR_EMU_SCHEDULE*,GPU matmul version 2 (*"


class Step:
    def __init__(self, stage, key, name, estimate, limit, source, run, rehearse=True):
        self.stage, self.key, self.name = stage, key, name
        self.estimate, self.limit, self.source = estimate, limit, source  # seconds; estimate is an estimate
        self.run = run            # run(check) -> [rows]
        self.rehearse = rehearse  # False: a stand-in in a rehearsal


def metrics(folder, *keys):
    """The run's final `keys` from its metrics.json (a list: one value a layer), and its time."""
    m = json.load(open(os.path.join(folder, "metrics.json")))
    value = lambda v: " ".join("%.2f" % x for x in v) if isinstance(v, list) else "%.4f" % v
    return ", ".join("%s %s" % (k, value(m[k])) for k in keys if k in m) + ", %.0f s" % m["seconds"]


def last_eval(folder, *keys):
    """The last evaluation a run logged (log.jsonl), for one that did not finish."""
    try:
        lines = open(os.path.join(folder, "log.jsonl")).read().split("\n")
        last = json.loads([line for line in lines if line.strip()][-1])
    except (OSError, IndexError, ValueError):
        return "no evaluation logged"
    return "step %d: " % last["step"] + ", ".join("%s %.4f" % (k, last[k]) for k in keys if k in last)


# ---- stage a: correctness ----------------------------------------------------------------------

def short_run(family):
    """A five-step run of a tiny model of one task family on the GPU, in a process of its own."""
    def step(check):
        name = "short run: " + family
        if family == "Boolean":
            task, key = ["--task", "maj3"], "acc_cube"
        elif family == "arithmetic":
            task, key = ["--task", "add3", "--max-test", "32"], "seq_acc"
        elif family == "images":
            task, key = check.image_task(), "acc"
        else:
            task, key = check.text_task(), "val_loss"
        if not task:
            return [check.row(name, "skipped", "no data: neither installed nor written here")]
        out = check.path("short-" + family)
        rc = check.run([check.bin("maskprior")] + task + SHORT + ["--out", out], "short-%s.log" % family)
        if rc == 0:
            return [check.row("%s (%s)" % (name, task[1]), "ok", metrics(out, key))]
        return [check.failed("%s (%s)" % (name, task[1]), rc, "short-%s.log" % family)]
    return step


def gpu_cases(check):
    """The GPU test cases (every kernel at every version against the CPU, whole steps GPU vs CPU, a
    short run that learns), a process per test file (tests/gpu_tests_isolated.sh)."""
    binary, cases = ("tests/emulated_tests", REHEARSAL_CASES) if check.rehearse else ("tests/unit_tests", "*GPU*")
    rc = check.run(["sh", "tests/gpu_tests_isolated.sh", "--each", "80", "--total", str(check.limit - 5),
                    "--logs", check.path("tests-gpu"), binary, cases], "tests-gpu.log")
    return [check.isolated_row("unit tests (GPU cases)", "tests-gpu.log", rc)]


def compare_logs(gpu_log, cpu_log):
    """(None, worst) when every value of every evaluation of two log.jsonl files agrees within the
    tests' tolerance for reductions (1e-4 absolute + 1e-3 relative), else (the first disagreement,
    worst); worst: the largest difference seen, relative to the tolerance."""
    gpu = [json.loads(line) for line in open(gpu_log) if line.strip()]
    cpu = [json.loads(line) for line in open(cpu_log) if line.strip()]
    if len(gpu) != len(cpu) or not cpu:
        return "%d evaluations on the GPU, %d on the CPU" % (len(gpu), len(cpu)), 0.0
    worst = 0.0
    for g, c in zip(gpu, cpu):
        if sorted(g) != sorted(c):
            return "step %s: other keys" % c.get("step"), worst
        for key in c:
            gv, cv = g[key], c[key]
            pairs = list(zip(gv, cv)) if isinstance(cv, list) else [(gv, cv)]
            if isinstance(cv, list) and len(gv) != len(cv):
                return "step %s: %s has %d values, %d on the CPU" % (c["step"], key, len(gv), len(cv)), worst
            for a, b in pairs:
                if a is None or b is None:
                    if a is not b:
                        return "step %s: %s %s, %s on the CPU" % (c["step"], key, a, b), worst
                    continue
                ratio = abs(a - b) / (1e-4 + 1e-3 * abs(b)) if a == a else float("inf")  # NaN never agrees
                worst = max(worst, ratio)
                if not ratio <= 1.0:
                    return "step %s: %s %.6g, %.6g on the CPU" % (c["step"], key, a, b), worst
    return None, worst


def make_run_vs_cpu(check):
    """make run's model (maj3, seed 1, each init, experiments/headline.sh's flags) for 250 steps on the
    GPU and on the CPU, every evaluation's values within the tests' tolerance; the mask init again
    with every faster kernel."""
    base = ["--task", "maj3", "--optimizer", "adam", "--seed", "1", "--steps", "250", "--eval-every", "50"]
    if check.rehearse:  # the emulation evaluates the whole cube in about 13 s: a tiny add3 model instead
        base = ["--task", "add3", "--max-test", "32"] + TINY + ["--steps", "4", "--eval-every", "2"]
    runs = [(init, []) for init in ("default", "qk-svd", "qk-opt", "mask")] + [("mask", ALL_FAST)]
    failures, worst = [], 0.0
    for init, extra in runs:
        label = init + (" (fastest kernels)" if extra else "")
        tag = init + ("-fast" if extra else "")
        gpu_out, cpu_out = check.path("make-run-gpu-" + tag), check.path("make-run-cpu-" + init)
        rc = check.run([check.bin("maskprior"), "--device", "cuda", "--init", init] + base + extra +
                       ["--out", gpu_out], "make-run-gpu-%s.log" % tag)
        if rc == 0 and not os.path.exists(os.path.join(cpu_out, "log.jsonl")):
            rc = check.run(["./maskprior", "--device", "cpu", "--init", init] + base + ["--out", cpu_out],
                           "make-run-cpu-%s.log" % init)
        if rc != 0:
            return [check.failed("make run's model, GPU vs CPU", rc, "make-run-gpu-%s.log" % tag)]
        disagreement, w = compare_logs(os.path.join(gpu_out, "log.jsonl"), os.path.join(cpu_out, "log.jsonl"))
        worst = max(worst, w)
        if disagreement:
            failures.append("%s: %s" % (label, disagreement))
    detail = "%d runs; the largest difference %.2f of the tolerance (1e-4 + 1e-3 |CPU|)" % (len(runs), worst)
    if failures:
        return [check.row("make run's model, GPU vs CPU", "FAILED", "; ".join(failures) + "; " + detail)]
    return [check.row("make run's model, GPU vs CPU", "ok", "every evaluation agrees: " + detail)]


# ---- stage b: speed ------------------------------------------------------------------------------

def bench(args, log, name):
    """tools/bench_gpu.py with `args`: its tables go to the returned speed tables, its last line to the row."""
    def step(check):
        rc = check.run([check.python, "tools/bench_gpu.py"] + args, log)
        check.speed_tables(log)
        return [check.bench_row(name, log, rc)]
    return step


def attention_bench(check):
    rc = check.run([check.python, "tools/bench_attention.py"], "bench-attention.log")
    check.speed_tables("bench-attention.log")
    return [check.bench_row("attention vs PyTorch", "bench-attention.log", rc)]


# ---- stage c: the kernel lab and the profiles ------------------------------------------------------

def lab(program):
    def step(check):
        cmd = ["./dev/%s-emulated" % program, "--quick"] if check.rehearse else ["./dev/" + program]
        rc = check.run(cmd, "dev-%s.txt" % program)
        check.speed_tables("dev-%s.txt" % program)
        if rc == 0:
            return [check.row("dev/" + program, "ok", "every version matches the CPU (its table in speed.txt)")]
        return [check.failed("dev/" + program, rc, "dev-%s.txt" % program)]
    return step


PROFILES = {"default": ("the default kernels", []), "fastest": ("the fastest kernels", FASTEST),
            "graph": ("the fastest, matmul 2, as one CUDA graph", ALL_FAST)}


def profile(kernels):
    """The paper-size 2parity model under --profile 2: a warm-up, two steps, a table by kernel."""
    def step(check):
        model = PAPER if not check.rehearse else ["--task", "2parity", "--device", "cuda"] + TINY
        log = "profile-%s.txt" % kernels
        rc = check.run([check.bin("maskprior")] + model + PROFILES[kernels][1] + ["--profile", "2"], log)
        check.speed_tables(log)
        name = "profile: " + PROFILES[kernels][0]
        if rc != 0:
            return [check.failed(name, rc, log)]
        if FALLBACK_NOTE.search(check.read(log)):
            return [check.row(name, "FAILED", "cuBLASLt turned products down and version 1 ran them (its note)",
                              blocks="matmul 2")]
        return [check.row(name, "ok", "its table in speed.txt")]
    return step


# ---- stage d: compute-sanitizer ------------------------------------------------------------------

TOOLS = ("memcheck", "racecheck", "synccheck", "initcheck")


def sanitizers(check):
    """The kernel tests (the cases named "GPU ...") under each tool, the four at once, 4 threads each for
    the CPU references; a runtime that refuses a tool is "refused", a tool that runs out of time "did
    not finish" with what it checked."""
    sanitizer = check.sanitizer()
    if not sanitizer:
        return [check.row("compute-sanitizer " + tool, "not run", "no compute-sanitizer here") for tool in TOOLS]
    binary, cases = ("tests/emulated_tests", REHEARSAL_CASES) if check.rehearse else ("tests/unit_tests", "GPU *")
    jobs = []
    for tool in TOOLS:
        wrap = "env" if check.rehearse else "%s --tool %s --error-exitcode 9" % (sanitizer, tool)
        jobs.append((["sh", "tests/gpu_tests_isolated.sh", "--each", "60", "--total", str(check.limit - 5),
                      "--logs", check.path("sanitizer-" + tool), "--wrap", wrap, binary, cases],
                     "sanitizer-%s.log" % tool))
    codes = check.run_parallel(jobs, env={"OMP_NUM_THREADS": "4"})
    rows = []
    for tool, (_, log), rc in zip(TOOLS, jobs, codes):
        name = "compute-sanitizer " + tool + (" (rehearsal: no tool, env)" if check.rehearse else "")
        if rc != 0 and re.search(r"Device not supported|not supported on this|is not supported", check.read(log)):
            rows.append(check.row(name, "refused", "refused by this machine's runtime (not a failure)"))
        else:
            rows.append(check.isolated_row(name, log, rc))
    return rows


# ---- stages e-h: the paper-size runs -------------------------------------------------------------

def table_runs(lines, root, check, jobs):
    """Runs the table's `lines` ("FOLDER FLAGS", experiments/run_many.sh's) under root, JOBS at once,
    in their order, until the step's limit; in a rehearsal each at the tiny size for 6 steps."""
    out = []
    for line in lines:
        folder, flags = line.split(" ", 1)
        if check.rehearse:
            flags = re.sub(r"--(epochs|steps) \d+", "", flags) + " " + " ".join(TINY) + " --steps 6 --eval-every 6"
        out.append(os.path.join(root, os.path.basename(folder)) + " " + flags)
    with open(check.path(os.path.basename(root) + "-runs.txt"), "w") as f:
        f.write("\n".join(out) + "\n")
    return check.run(["sh", "-c", "sh experiments/run_many.sh < '%s'" % f.name], os.path.basename(root) + ".log",
                     env={"JOBS": str(jobs)})


def paper_boolean(check):
    """make table-boolean BOOLEAN_ARGS=--paper's runs, 2parity and maj3 first, mask and default first,
    seeds 1-3, three at once on the one GPU (docs/gpu.md says why three), for as long as the limit
    holds; then the table from the runs that finished (tools/boolean_table.py)."""
    listed = check.output(["sh", "experiments/boolean_table.sh", "--paper"], env={"SCHEDULER": "list"}).split("\n")
    rank = lambda line: (("2parity" not in line and "maj3" not in line),
                         not re.search(r"-(mask|default)-s", line), int(line.rsplit("--seed ", 1)[1]),
                         "maj3" in line, "-default-" in line)
    lines = sorted([line for line in listed if line.strip()], key=rank)
    if check.rehearse:
        lines = lines[:6]
    root = check.path("table-boolean-paper")
    rc = table_runs(lines, root, check, jobs=3)
    finished = [d for d in sorted(os.listdir(root)) if os.path.exists(os.path.join(root, d, "metrics.json"))] \
        if os.path.isdir(root) else []
    table = check.output([check.python, "tools/boolean_table.py", root]) if finished else ""
    check.tables("the Boolean table at GOTU's size: the %d runs that finished of %d" % (len(finished), len(lines)),
                 table)
    detail = "%d of %d runs finished (%s); the table in tables.txt" % (len(finished), len(lines),
                                                                      " ".join(finished) or "none")
    if rc not in (0, 124):
        return [check.failed("Boolean table, GOTU's size", rc, os.path.basename(root) + ".log")]
    return [check.row("Boolean table, GOTU's size", "ok" if finished else "did not finish", detail)]


ADD3 = "--task add3 --data-frac 0.004 --steps 300 --eval-every 300"
MUL2 = "--task mul2 --data-frac 0.03 --steps 5000 --eval-every 500 --max-test 10000"
LEE = "--width 384 --layers 6 --heads 6 --head-size 64 --mlp 1536 --batch 256 --lr 1e-3 --wd 1e-3 --seed 1"


def paper_arithmetic(check):
    """Lee et al.'s size: add3 at 0.4% of the pairs for 300 steps, then mul2 at 3% for the paper's
    5000 steps (the scorecard's "does not" for mul2 was measured at C 64, L 2), default and mask,
    two at once; a mul2 run cut by the limit reports its last evaluation."""
    runs = [("add3-" + init, ADD3, init) for init in ("default", "mask")] + \
           [("mul2-" + init, MUL2, init) for init in ("default", "mask")]
    root = check.path("arithmetic-lee")
    rc = table_runs(["%s %s %s --init %s" % (name, task, LEE, init) for name, task, init in runs], root, check, 2)
    rows = []
    for name, _, _ in runs:
        folder = os.path.join(root, name)
        if os.path.exists(os.path.join(folder, "metrics.json")):
            rows.append(check.row("%s at Lee et al.'s size" % name, "ok",
                                  metrics(folder, "seq_acc", "digit_acc", "prior_mass")))
        elif rc in (0, 124):
            rows.append(check.row("%s at Lee et al.'s size" % name, "did not finish",
                                  last_eval(folder, "seq_acc", "digit_acc")))
        else:
            rows.append(check.failed("%s at Lee et al.'s size" % name, rc, "arithmetic-lee.log"))
    return rows


def paper_vision(check):
    """ViT-Tiny (C 192, L 12, NH 3, HS 64, MLP 768, patch 4), mask init, batch 128, 300 steps."""
    task = check.vision_task()
    size = TINY + ["--patch", "7", "--steps", "6", "--eval-every", "6"] if check.rehearse else \
        "--width 192 --layers 12 --heads 3 --head-size 64 --mlp 768 --patch 4 --batch 128 --steps 300 --eval-every 300 " \
        "--log-every 100".split()
    out = check.path("vit-tiny-mask")
    rc = check.run([check.bin("maskprior")] + task + ["--device", "cuda", "--init", "mask"] + size + ["--out", out],
                   "vit.log")
    name = "ViT-Tiny mask (%s)" % task[1]
    return [check.row(name, "ok", metrics(out, "acc", "train_acc", "prior_mass")) if rc == 0 else
            check.failed(name, rc, "vit.log")]


def paper_language(check):
    """A language model (C 384, L 6, NH 6, HS 64, MLP 1536, T 256, batch 64), the ALiBi-shaped mask,
    300 steps, then 100 sampled tokens."""
    task = check.text_task(real=True)
    if not task:
        return [check.row("LM mask-alibi", "skipped", "no token folder (data/prepare_text.py)")]
    size = TINY + ["--seq-len", "16", "--eval-windows", "8", "--steps", "6", "--eval-every", "6"] if check.rehearse \
        else ("--width 384 --layers 6 --heads 6 --head-size 64 --mlp 1536 --seq-len 256 --batch 64 --steps 300 "
              "--eval-every 300 --eval-windows 128 --log-every 100").split()
    out = check.path("lm-alibi")
    rc = check.run([check.bin("maskprior")] + task + ["--device", "cuda", "--init", "mask", "--mask-prior", "alibi"] +
                   size + ["--out", out], "lm.log")
    if rc != 0:
        return [check.failed("LM mask-alibi", rc, "lm.log")]
    sample = check.run([check.bin("maskprior"), "--generate", os.path.join(out, "model.safetensors"), "--prompt",
                        "Once upon a time", "--sample-tokens", "100", "--top-k", "40", "--temperature", "0.8"],
                       "lm-sample.txt")
    return [check.row("LM mask-alibi", "ok", metrics(out, "val_loss", "bits_per_byte", "prior_mass") +
                      ("; 100 tokens sampled (lm-sample.txt)" if sample == 0 else "; sampling FAILED"))]


def large_logits(check):
    rc = check.run(["./tests/unit_tests", "--no-intro=true", "-tc=*past 2^31*"], "large.log",
                   env={"MASKPRIOR_LARGE_TESTS": "1"})
    return [check.doctest_row("logits past 2^31 floats", "large.log", rc)]


STAGES = {"a": "correctness", "b": "speed", "c": "the kernel lab and the profiles", "d": "compute-sanitizer",
          "e": "the Boolean table at GOTU's size", "f": "arithmetic at Lee et al.'s size",
          "g": "ViT-Tiny and a language model", "h": "the logits past 2^31 floats",
          "i": "the rest of the speed tables"}
# the tiers: their stages and budget (seconds of step limits; a device call adds the start and the transfers)
TIERS = {"quick": ("abcd", 480), "full": ("efgh", 540), "speed": ("i", 420)}

STEPS = [Step("a", "short-" + family.lower(), "short run: " + family, 4, 10, START + "; 5 steps of a tiny model",
              short_run(family)) for family in ("Boolean", "arithmetic", "images", "language")] + [
    Step("a", "gpu-cases", "unit tests (GPU cases)", 45, 90, CPU_PART + "; about 15 test files, a process each",
         gpu_cases),
    Step("a", "make-run", "make run's model, GPU vs CPU", 25, 45,
         START + "; 5 GPU runs of 250 small steps (launch-bound, about 2 ms a step) and 4 CPU runs of 1 s",
         make_run_vs_cpu),
    Step("b", "bench", "speed vs PyTorch (--quick)", 110, 150, FIRST_GPU + "; " + COMPILE,
         bench(["--quick"], "bench-quick.log", "speed vs PyTorch (--quick)"), rehearse=False)] + [
    Step("c", "dev-" + p, "dev/" + p, 5, 12, START + "; the lab's shapes, every version checked and timed", lab(p))
    for p in ("attention_forward", "attention_backward", "matmul")] + [
    Step("c", "profile-" + k, "profile: " + PROFILES[k][0], 6, 12, FIRST_GPU + "; a warm-up and two steps",
         profile(k)) for k in PROFILES] + [
    Step("d", "sanitizers", "compute-sanitizer (four tools at once)", 80, 80, SANITIZER, sanitizers),
    Step("e", "boolean", "Boolean table, GOTU's size", 240, 240,
         FIRST_GPU + "; three runs at once: 130 s (2parity) to 195 s (maj3) each alone, a share of that together",
         paper_boolean),
    Step("f", "arithmetic", "arithmetic at Lee et al.'s size", 150, 150,
         "Lee et al.'s step (C 384, L 6, batch 256) taken as half the paper-size 2parity step by FLOPs: add3 300 "
         "steps about 10 s, mul2 5000 steps about 150 s, two at once", paper_arithmetic),
    Step("g", "vit", "ViT-Tiny mask, 300 steps", 40, 60, START + "; ViT-Tiny's step about 3x the paper-size "
         "2parity step by FLOPs", paper_vision),
    Step("g", "lm", "LM mask-alibi, 300 steps", 40, 60, START + "; the LM's step about 3x the paper-size 2parity "
         "step by FLOPs, 100 tokens sampled", paper_language),
    Step("h", "large", "logits past 2^31 floats", 15, 30, START + "; ~18 GB of logits written and read twice",
         large_logits),
    Step("i", "bench-full", "speed vs PyTorch (both variants, every row)", 240, 330, FIRST_GPU + "; " + COMPILE,
         bench([], "bench-full.log", "speed vs PyTorch (every row)"), rehearse=False),
    Step("i", "bench-attention", "attention vs PyTorch", 60, 90, START + "; torch.compile and FlexAttention's "
         "compiles, about 20 s each", attention_bench, rehearse=False),
]
