"""The plan of make gpu-check (tests/gpu_check.py): its stages and steps, each step's estimate of its
GPU time (an estimate, with where it comes from), its limit, what it runs, the binaries it runs
(a binary that fails the preflight blocks it) and the switches of the defaults it can block.

Stages, in the order of what they decide (the quick tier's speed stage last: it decides nothing):
  quick tier (make gpu-check), 495 s of limits:
    a correctness: a short run of each task family; the GPU test cases (the cases that skip
      themselves without a GPU, a process per file); make run's model GPU vs CPU, deciding on its
      first DECIDING steps, the default kernels, then each faster choice alone
    c the kernel lab (every version checked and timed) and the per-kernel profiles
    d compute-sanitizer's four tools on the kernel tests, attention's first
    b speed: the paper-size and make-run steps against PyTorch eager, torch.compile, reduce-overhead
  full tier (make gpu-check-full), 540 s:
    e the paper's Boolean table at GOTU's size, as many runs as its limit holds
    f arithmetic at Lee et al.'s size: add3 at 0.4% of the pairs, mul2 at 3%
    g ViT-Tiny and a language model, 300 steps each
    h the logits' kernels past 2^31 floats
  speed tier (--stages i), 420 s:
    i the rest of the speed tables: both mask variants, each flag alone, the attention layer alone

A step is a function step(check) that runs its commands through check.run (each under the step's
limit, every process it starts stopped at it) and returns its rows (check.row), each naming the
switches it blocks when it fails (SWITCHES; DEFAULTS: the default kernels themselves). In a
rehearsal (no GPU: tests/test_gpu_check.sh) a step either runs the same command lines on the
emulation (check.cmd names the emulated programs, the shapes are small), or, where the emulation
would take minutes or has no peer (PyTorch on a GPU), is a stand-in that sleeps its estimate, scaled.
"""
import os
import re

from gpu_check_paper import TINY, image_task, text_task, paper_boolean, paper_arithmetic, paper_vision, \
    paper_language, large_logits
from gpu_check_read import metrics, compare_logs, lab_table, parts

# The sources of the estimates (none of them a measurement of this version on a GPU):
FIRST_GPU = ("the first GPU session (2026-11-30, one H200, the first kernels): the paper-size 2parity step "
             "59 ms, a 20-epoch run 129 s; PyTorch eager 18 ms, torch.compile 12.4 ms")
START = ("a process's start on a GPU (CUDA context, cuBLAS handle): about 2 s, from CUDA's usual costs; the "
         "first one's cold start is the preflight's warm-up, outside the limits")
CPU_PART = ("the CPU part as timed on the 2-core AMD EPYC that builds it (the emulated GPU cases: 50 s, "
            "kernels emulated); the GPU machine has 16 cores")
COMPILE = "tools/bench_gpu.py's own estimate: its compiles capped at 30 s each (COMPILE_CAP)"
SANITIZER = ("compute-sanitizer slows kernels 10-100x (NVIDIA's documentation); what does not finish in the "
             "limit is a row of its own, the rest still reported")

# What the verdict weighs: each faster choice that could become a default, by key: (its flag, what
# is kept without it). A row names the keys it blocks when it fails; DEFAULTS, the default kernels.
SWITCHES = {"attention 3": ("attention kernel 3", "attention kernel 1"),
            "fast": ("--fast-kernels", "the first versions of the other layers"),
            "matmul 2": ("--matmul-kernel 2", "matmul kernel 1"),
            "graph": ("--cuda-graph", "call by call")}
DEFAULTS = "defaults"

# the paper-size 2parity model (GOTU's); the short runs' tiny model (TINY, gpu_check_paper.py)
PAPER = ("--task 2parity --device cuda --width 256 --layers 12 --heads 6 --head-size 64 --mlp 256 "
         "--optimizer adam --lr 1e-5 --wd 1e-3 --batch 256").split()
SHORT = ["--device", "cuda"] + TINY + ["--steps", "5", "--eval-every", "5"]
FASTEST = ["--attention-kernel", "3", "--fast-kernels"]
ALL_FAST = FASTEST + ["--matmul-kernel", "2", "--cuda-graph"]
# the note a --matmul-kernel 2 run prints where cuBLASLt turned a product down (layers/matmul_lt.cuh)
FALLBACK_NOTE = re.compile(r"maskprior: note: cuBLASLt .* matmul version 1 runs it")

# The GPU cases: the cases of tests/unit_tests that skip themselves without a GPU (--gpu-cases), a
# process per test file. A family's failure blocks what its file checks (the rest: the defaults).
FAMILY_BLOCKS = {"tests/test_gpu_matmul.cu": ["matmul 2"], "tests/test_gpu_graph.cu": ["graph"],
                 "tests/test_gpu_fused.cu": ["attention 3", "fast"], "tests/test_gpu_profile.cu": []}
# a rehearsal's GPU cases: two small families of tests/emulated_tests
REHEARSAL_CASES = "GPU AdamW: each range*,GPU matmul version 2 (*"
# the sanitizers: the kernel tests (the GPU cases named "GPU ..."), attention's first
SANITIZER_CASES, SANITIZER_FIRST = "GPU *", "GPU attention*"
TOOLS = ("memcheck", "racecheck", "synccheck", "initcheck")
# the tools no GPU has run gpu-check's cases under yet: their rows report and decide nothing until
# a GPU's summary shows them run (memcheck and racecheck ran on the H200 of 2026-11-30; docs/gpu.md)
UNPROVEN_TOOLS = ("synccheck", "initcheck")

# make run's model GPU vs CPU. Adam's first steps move every weight by about lr whatever its
# gradient's size, so where a gradient is rounding noise its sign, and the step, depend on the order
# of the sums: the runs of two correct orders part within a few steps. So the comparison decides on a
# run of DECIDING (steps, evaluated every) at TOLERANCE, |gpu - cpu| <= abs + rel |cpu| (the tests'
# tolerance for reductions), and reports a LONG run's largest difference beside, deciding nothing.
# Measured on the emulation (docs/gpu.md), --fast-kernels against the CPU, whose sums run in other
# orders, as a GPU's do: at the qk-svd init 0.05 of the tolerance after 2 steps, 0.17 after 4, 1.6
# after 10; at qk-opt, whose fit runs on the device, 0.12 at step 0; the default and mask inits 2.5e-4
# after 20 steps. Deciding at steps 0, 2 and 4 leaves a margin of about 6.
DECIDING, LONG = (4, 2), (250, 50)
TOLERANCE = (1e-4, 1e-3)
MEASURED = ("the tolerance: on the emulation, --fast-kernels (sums in other orders) against the CPU reach 0.17 "
            "of it by step 4 at the qk-svd init, 1.6 by step 10 (docs/gpu.md)")


class Step:
    def __init__(self, stage, key, name, estimate, limit, source, run, uses, blocks, rehearse=True):
        self.stage, self.key, self.name = stage, key, name
        self.estimate, self.limit, self.source = estimate, limit, source  # seconds; estimate is an estimate
        self.run = run            # run(check) -> [rows]
        self.uses = uses          # the binaries it runs (gpu_check_preflight's keys; "cpu": ./maskprior on the CPU)
        # what is left unchecked when it does not run or finish, and what its rows block by default
        # (DEFAULTS: everything); a row may block more (a lab's version 1 missing: the defaults)
        self.blocks = blocks
        self.rehearse = rehearse  # False: a stand-in in a rehearsal


# ---- stage a: correctness ----------------------------------------------------------------------

def short_run(family):
    """A five-step run of a tiny model of one task family on the GPU, in a process of its own; its
    row fails where the metric it reports is not a number."""
    def step(check):
        name = "short run: " + family
        if family == "Boolean":
            task, key = ["--task", "maj3"], "acc_cube"
        elif family == "arithmetic":
            task, key = ["--task", "add3", "--max-test", "32"], "seq_acc"
        elif family == "images":
            task, key = image_task(check), "acc"
        else:
            task, key = text_task(check), "val_loss"
        if not task:
            return [check.row(name, "skipped", "no data: neither installed nor written here")]
        out, log = check.path("short-" + family), "short-%s.log" % family
        rc = check.run(check.cmd("maskprior", task + SHORT + ["--out", out]), log)
        name = "%s (%s)" % (name, task[1])
        if rc != 0:
            return [check.failed(name, rc, log)]
        text, not_numbers = metrics(check, out, key)
        if not_numbers:
            return [check.row(name, "FAILED", "not a number: %s (%s)" % (text, log))]
        return [check.row(name, "ok", text)]
    return step


def gpu_cases(check):
    """The GPU test cases (every kernel at every version against the CPU, whole steps GPU vs CPU,
    graph replays, matmul version 2, --profile's records, a short run that learns), a process per
    test file (tests/gpu_tests_isolated.sh --gpu-cases); a row per file."""
    narrow = [REHEARSAL_CASES] if check.rehearse else []
    rc = check.run(["sh", "tests/gpu_tests_isolated.sh", "--gpu-cases", "--each", "80", "--total",
                    str(max(1, int(check.limit) - 5)), "--logs", check.path("tests-gpu"),
                    check.binary("tests/unit_tests")] + narrow, "tests-gpu.log")
    found = parts(check.read("tests-gpu.log"))
    if not found:
        return [check.isolated_row("GPU cases", "tests-gpu.log", rc)]
    rows = [check.row("GPU cases: " + os.path.basename(family), status, rest,
                      blocks=FAMILY_BLOCKS.get(family, [DEFAULTS])) for status, family, rest in found]
    if rc in (124, 137):
        rows.append(check.failed("GPU cases", rc, "tests-gpu.log"))
    return rows


def schedules(check):
    """make run's model's two runs: (the deciding one's flags, the long one's); in a rehearsal a tiny add3
    model (the emulation evaluates the whole maj3 cube in about 13 s)"""
    model = ["--task", "add3", "--max-test", "32"] + TINY if check.rehearse else \
        ["--task", "maj3", "--optimizer", "adam", "--seed", "1"]
    (steps, every), (long_steps, long_every) = ((4, 2), (6, 3)) if check.rehearse else (DECIDING, LONG)
    return [model + ["--steps", str(n), "--eval-every", str(e)] for n, e in ((steps, every), (long_steps, long_every))]


def run_pair(check, init, flags, base, run):
    """make run's model at `init` on the GPU with `flags`, and on the CPU (once, by the first step that
    needs it); run: "" or "-long". (exit status, the log of the run that failed or of the GPU's, the
    GPU's log.jsonl, the CPU's)"""
    gpu = "make-run-gpu-" + init + "".join("-" + f.strip("-") for f in flags) + run
    rc = check.run(check.cmd("maskprior", ["--device", "cuda", "--init", init] + base + flags +
                             ["--out", check.path(gpu)]), gpu + ".log")
    cpu = "make-run-cpu-" + init + run
    if rc == 0 and not os.path.exists(check.path(cpu + "/log.jsonl")):
        rc = check.run([check.binary("cpu"), "--device", "cpu", "--init", init] + base + ["--out", check.path(cpu)],
                       cpu + ".log")
        if rc != 0:
            return rc, cpu + ".log", None, None
    return rc, gpu + ".log", check.path(gpu + "/log.jsonl"), check.path(cpu + "/log.jsonl")


def make_run_vs_cpu(runs, long=False):
    """make run's model (maj3, seed 1, experiments/headline.sh's flags) on the GPU and on the CPU, a row
    for each of `runs` [(label, its inits, its flags, what it blocks)]: every evaluation of the first
    DECIDING steps within TOLERANCE decides; with `long`, a LONG run's largest difference is reported
    beside, deciding nothing. With --matmul-kernel 2, cuBLASLt's turning a product down (its note)
    fails the row: version 1 ran the product."""
    def step(check):
        return [compared(check, "make run's model, GPU vs CPU: " + label, inits, flags, blocks, long)
                for label, inits, flags, blocks in runs]
    return step


def compared(check, name, inits, flags, blocks, long):
    """The row of one comparison of make run's model (make_run_vs_cpu): a run that fails is that init's
    finding, and the inits compared before it keep theirs; one stopped at the limit ends the row."""
    deciding, long_run = schedules(check)
    steps = int(deciding[deciding.index("--steps") + 1])
    findings, compared_inits, worst, after, unfinished = [], [], 0.0, (0.0, None, None), False
    for init in inits:
        for base, run, decides in [(deciding, "", steps)] + ([(long_run, "-long", -1)] if long else []):
            rc, log, gpu_log, cpu_log = run_pair(check, init, flags, base, run)
            if rc != 0:
                failed = check.failed(name, rc, log)
                unfinished = failed["status"] == "did not finish"
                findings.append("%s: %s" % (init, failed["detail"]))
                break
            if "--matmul-kernel" in flags and FALLBACK_NOTE.search(check.read(log)):
                findings.append("%s: cuBLASLt turned products down and matmul version 1 ran them (%s)" % (init, log))
            finding, w, a = compare_logs(check, gpu_log, cpu_log, decides, TOLERANCE)
            worst, after = max(worst, w), max(after, a, key=lambda x: x[0])
            if finding:
                findings.append("%s%s: %s" % (init, " (the long run)" if decides < 0 else "", finding))
        else:
            compared_inits.append(init)
        if unfinished:
            break
    detail = "%s compared: every evaluation of the first %d steps within %g + %g |CPU| (the largest difference " \
        "%.2f of it)" % (" ".join(compared_inits) or "none", steps, TOLERANCE[0], TOLERANCE[1], worst)
    if after[1] is not None:
        detail += "; %s steps, deciding nothing: the largest %.1f times it (step %s, %s)" % (
            (long_run[long_run.index("--steps") + 1],) + after)
    failing = len(findings) > (1 if unfinished else 0)
    status = "FAILED" if failing else "did not finish" if unfinished else "ok"
    return check.row(name, status, "; ".join(findings + [detail]), blocks=blocks)


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
    """A lab program: every version against the CPU. A missing version 1 blocks the defaults, version
    3 of attention attention kernel 3, version 2 of the matmul matmul kernel 2 (so does a row that
    fell back to version 1: dev/matmul's exit 3)."""
    candidate = {"matmul": (2, "matmul 2")}.get(program, (3, "attention 3"))
    def step(check):
        log = "dev-%s.txt" % program
        rc = check.run(check.cmd("dev/" + program, ["--quick"] if check.rehearse else []), log)
        check.speed_tables(log)
        failing, fell_back = lab_table(check.read(log))
        name = "dev/" + program
        if rc == 0:
            return [check.row(name, "ok", "every version matches the CPU (its table in speed.txt)")]
        if rc == 3 and not failing:
            return [check.row(name, "FAILED", "cuBLASLt turned down %d rows' products and version 1 ran them (FELL "
                              "BACK in speed.txt): version 2 not checked on this GPU" % fell_back, blocks=["matmul 2"])]
        blocks = [DEFAULTS] if 1 in failing or not failing else []
        blocks += [candidate[1]] if candidate[0] in failing else []
        row = check.failed(name, rc, log)
        if failing:
            row["detail"] = "version %s misses the CPU; " % " and ".join(map(str, sorted(failing))) + row["detail"]
        row["blocks"] = blocks
        return [row]
    return step


PROFILES = {"default": ("the default kernels", [], [DEFAULTS]),
            "fastest": ("the fastest kernels", FASTEST, ["attention 3", "fast"]),
            "graph": ("the fastest, matmul 2, as one CUDA graph", ALL_FAST, ["matmul 2", "graph"])}


def profile(kernels):
    """The paper-size 2parity model under --profile 2: a warm-up, two steps, a table by kernel."""
    def step(check):
        model = PAPER if not check.rehearse else ["--task", "2parity", "--device", "cuda"] + TINY
        log = "profile-%s.txt" % kernels
        rc = check.run(check.cmd("maskprior", model + PROFILES[kernels][1] + ["--profile", "2"]), log)
        check.speed_tables(log)
        name = "profile: " + PROFILES[kernels][0]
        if rc != 0:
            return [check.failed(name, rc, log, blocks=PROFILES[kernels][2])]
        if FALLBACK_NOTE.search(check.read(log)):
            return [check.row(name, "FAILED", "cuBLASLt turned products down and version 1 ran them (its note)",
                              blocks=["matmul 2"])]
        return [check.row(name, "ok", "its table in speed.txt", blocks=PROFILES[kernels][2])]
    return step


# ---- stage d: compute-sanitizer ------------------------------------------------------------------

def sanitizers(check):
    """The kernel tests (the GPU cases named "GPU ...", attention's first) under each tool, the four
    at once, 4 threads each for the CPU references; a runtime that refuses a tool is "refused", a tool
    that runs out of time "did not finish" with what it checked; UNPROVEN_TOOLS report, not decide."""
    sanitizer = check.sanitizer()
    if not sanitizer:
        return [check.row("compute-sanitizer " + tool, "not run", "no compute-sanitizer here") for tool in TOOLS]
    cases = REHEARSAL_CASES if check.rehearse else SANITIZER_CASES
    jobs = []
    for tool in TOOLS:
        wrap = "env" if check.rehearse else "%s --tool %s --error-exitcode 9" % (sanitizer, tool)
        jobs.append((["sh", "tests/gpu_tests_isolated.sh", "--gpu-cases", "--first", SANITIZER_FIRST, "--each", "60",
                      "--total", str(max(1, int(check.limit) - 5)), "--logs", check.path("sanitizer-" + tool),
                      "--wrap", wrap, check.binary("tests/unit_tests"), cases], "sanitizer-%s.log" % tool))
    codes = check.run_parallel(jobs, env={"OMP_NUM_THREADS": "4"})
    rows = []
    for tool, (_, log), rc in zip(TOOLS, jobs, codes):
        name = "compute-sanitizer " + tool + (" (rehearsal: no tool, env)" if check.rehearse else "")
        if rc != 0 and re.search(r"Device not supported|not supported on this|is not supported", check.read(log)):
            row = check.row(name, "refused", "refused by this machine's runtime (not a failure)")
        else:
            row = check.isolated_row(name, log, rc)
        if row["status"] == "did not finish":  # a slow tool is not a finding: what it checked is in its row
            row["decides"] = False
        if tool in UNPROVEN_TOOLS:
            row.update(decides=False, detail=row["detail"] + " (reported, not deciding: no GPU has run gpu-check's "
                       "cases under %s yet; docs/gpu.md)" % tool)
        rows.append(row)
    return rows


STAGES = {"a": "correctness", "c": "the kernel lab and the profiles", "d": "compute-sanitizer", "b": "speed",
          "e": "the Boolean table at GOTU's size", "f": "arithmetic at Lee et al.'s size",
          "g": "ViT-Tiny and a language model", "h": "the logits past 2^31 floats",
          "i": "the rest of the speed tables"}
# the tiers: their stages, in the order they run, and budget (seconds of step limits; a device call
# adds the preflight, the stop margin, the machine's start and the transfers: docs/gpu.md)
TIERS = {"quick": ("acdb", 495), "full": ("efgh", 540), "speed": ("i", 420)}
MODEL = ["maskprior"]
BINARY = MODEL + ["cpu"]
INITS = ["default", "qk-svd", "qk-opt", "mask"]
# each faster choice alone on the mask init, blocking itself alone
FLAG_RUNS = [("attention kernel 3", ["mask"], ["--attention-kernel", "3"], ["attention 3"]),
             ("--fast-kernels", ["mask"], ["--fast-kernels"], ["fast"]),
             ("--cuda-graph", ["mask"], ["--cuda-graph"], ["graph"]),
             ("--matmul-kernel 2", ["mask"], ["--matmul-kernel", "2"], ["matmul 2"])]

STEPS = [Step("a", "short-" + family.lower(), "short run: " + family, 4, 10, START + "; 5 steps of a tiny model",
              short_run(family), MODEL, [DEFAULTS]) for family in ("Boolean", "arithmetic", "images", "language")] + [
    Step("a", "gpu-cases", "GPU cases, a process per file", 60, 100, CPU_PART + "; 14 test files, a process each",
         gpu_cases, ["tests/unit_tests"] + MODEL, [DEFAULTS]),
    Step("a", "make-run", "make run's model, GPU vs CPU: the default kernels", 25, 40,
         START + "; 4 GPU runs of 4 steps and 4 of 250 small steps (launch-bound, about 2 ms a step), and "
         "their CPU runs of 1-2 s; " + MEASURED,
         make_run_vs_cpu([("the default kernels", INITS, [], [DEFAULTS])], long=True),
         BINARY, [DEFAULTS]),
    Step("a", "make-run-flags", "make run's model, GPU vs CPU: each faster choice alone", 14, 30,
         START + "; 4 GPU runs of 4 steps, the mask init; " + MEASURED, make_run_vs_cpu(FLAG_RUNS), BINARY,
         list(SWITCHES))] + [
    Step("c", "dev-" + p, "dev/" + p, 5, 12, START + "; the lab's shapes, every version checked and timed", lab(p),
         ["dev/" + p], ["matmul 2" if p == "matmul" else "attention 3"])
    for p in ("attention_forward", "attention_backward", "matmul")] + [
    Step("c", "profile-" + k, "profile: " + PROFILES[k][0], 6, 12, FIRST_GPU + "; a warm-up and two steps",
         profile(k), MODEL, []) for k in PROFILES] + [
    Step("d", "sanitizers", "compute-sanitizer (four tools at once)", 80, 80, SANITIZER, sanitizers,
         ["tests/unit_tests"], [DEFAULTS]),
    Step("b", "bench", "speed vs PyTorch (--quick)", 110, 130, FIRST_GPU + "; " + COMPILE,
         bench(["--quick"], "bench-quick.log", "speed vs PyTorch (--quick)"), MODEL, ["matmul 2"], rehearse=False),
    Step("e", "boolean", "Boolean table, GOTU's size", 240, 240,
         FIRST_GPU + "; three runs at once: 130 s (2parity) to 195 s (maj3) each alone, a share of that together",
         paper_boolean, MODEL, []),
    Step("f", "arithmetic", "arithmetic at Lee et al.'s size", 150, 150,
         "Lee et al.'s step (C 384, L 6, batch 256) taken as half the paper-size 2parity step by FLOPs: add3 300 "
         "steps about 10 s, mul2 5000 steps about 150 s, two at once", paper_arithmetic, MODEL, []),
    Step("g", "vit", "ViT-Tiny mask, 300 steps", 40, 60, START + "; ViT-Tiny's step about 3x the paper-size "
         "2parity step by FLOPs", paper_vision, MODEL, []),
    Step("g", "lm", "LM mask-alibi, 300 steps", 40, 60, START + "; the LM's step about 3x the paper-size 2parity "
         "step by FLOPs, 100 tokens sampled", paper_language, MODEL, []),
    Step("h", "large", "logits past 2^31 floats", 15, 30, START + "; ~18 GB of logits written and read twice",
         large_logits, ["tests/unit_tests"], []),
    Step("i", "bench-full", "speed vs PyTorch (both variants, every row)", 240, 330, FIRST_GPU + "; " + COMPILE,
         bench([], "bench-full.log", "speed vs PyTorch (every row)"), MODEL, ["matmul 2"], rehearse=False),
    Step("i", "bench-attention", "attention vs PyTorch", 60, 90, START + "; torch.compile and FlexAttention's "
         "compiles, about 20 s each", attention_bench, ["dev/attention_forward", "dev/attention_backward"], [],
         rehearse=False),
]
STEPS.sort(key=lambda s: "acdbefghi".index(s.stage))  # the order they run: what they decide first
