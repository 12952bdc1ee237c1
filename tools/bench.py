"""CPU speed of ./maskprior against the same training step in PyTorch eager, and both against
this machine's peak float rates (make bench).

    tools/bench.py [MODEL ...]     the models named (default: all of them, in the order below)

Models, with the mask init, AdamW lr 1e-3, float32:
  make-run  maj3, the `make run` model: B 64, T 16, C 32, L 2, NH 2, HS 16, MLP 32; weight decay 1e-3
  wide      maj3, B 256, T 16, C 128, L 4, NH 4, HS 32, MLP 512: the matmuls dominate
  vit       Fashion-MNIST, the vision table's ViT: B 128, patch 4 (T 50), C 64, L 4, NH 4, HS 16,
            MLP 128; weight decay 0.05, label smoothing 0.1, gradient clipping at 1 on both sides
            (the binary's schedule and augmentation cost next to nothing; PyTorch's batches are
            random pixels made before the clock starts)
  lm        the language table's causal LM on data/tinystories-sample-bpe1024 (V from its
            tokenizer): B 32, T 64, C 64, L 2, NH 4, HS 16, MLP 256, the head on every position;
            the mask init of the causal window of 16 keys; weight decay 0.1, gradient clipping at
            1 on both sides (PyTorch's batches are random token ids). Skipped, with a one-line
            note, when the token folder is missing (data/README.md says how to make it).

Method
- Same weights, same batch: ./maskprior --dump-state writes its initial parameters, its first
  training batch and that batch's loss; PyTorch loads the parameters (float32) and computes the
  loss of the same batch. Both losses are printed; they agree to float32 rounding.
- maskprior: one run per thread count printing a progress line every LOG_EVERY steps; each line
  times its window of training steps (forward, backward, AdamW), the program leaving out the
  time it makes batches and evaluates. Two warm-up windows, then BENCH_SECONDS (default 6) of
  windows, then the run is stopped.
- The vector width: ./maskprior runs the instructions of its build (HOST_MARCH), and so does
  tools/fma_peak (make bench builds both). Where the binary is built for AVX2 (make bench
  HOST_MARCH=x86-64-v3) on a CPU that has AVX-512, PyTorch is held to AVX2 too, before it loads
  (AVX2_HOLD: OpenBLAS's Haswell kernels, ATen's avx2 kernels, oneDNN's AVX2), so that both sides
  run the instructions of a learner's AVX2 machine; on a CPU without AVX-512 both run AVX2
  anyway, and PyTorch is left to its own choice. Each run prints what PyTorch's three libraries
  report they run, held or not (pytorch_kernels).
- PyTorch: tests/torch_reference.py's model_loss over those parameters as leaf tensors,
  torch.optim.AdamW, cycling through 32 random batches made before the clock starts. Three
  thread settings, each timed: 1 thread in all; OMP_NUM_THREADS threads in torch's pool with
  OpenBLAS on 1; and OpenBLAS's own pool of OMP_NUM_THREADS on top. The ratio compares the
  fastest maskprior row with the fastest PyTorch row, whatever their thread counts.
- Peaks: tools/fma_peak, built for the same -march as ./maskprior, at 1 thread and at
  OMP_NUM_THREADS: the FMA peak (independent fused multiply-adds on registers), and the mul+add
  ceiling (independent multiplies and adds, as many of each), which is ./maskprior's as built:
  it multiplies and adds separately, for the same bits on every CPU (cpu_fast/gemm.h). Before
  they are used, the loops' instructions are read back from tools/fma_peak's disassembly
  (objdump): the loop of fma_loop holds exactly its chains' vfmadd and the loop of mul_add_loop
  half as many vmulps and vaddps each, every one on registers (fma_peak_checked): a chain the
  compiler dropped would make the peak too high. Every rate is printed as a share of its
  ceiling at its own thread count: maskprior's of the mul+add ceiling, PyTorch's (whose BLAS
  fuses) of the FMA peak.
  A share above 100% is not printed: the line says the peak is wrong instead.
- OpenMP's waiting threads: both programs' OpenMP (libgomp; torch's own pool of threads is one)
  reads OMP_WAIT_POLICY and GOMP_SPINCOUNT as it starts. make bench runs under the Makefile's
  OMP_WAIT_POLICY=passive (threads sleep between parallel loops, as a shared machine needs); the
  multi-thread rows are timed once more with a short spin before the sleep (SPIN: the policy
  unset, GOMP_SPINCOUNT=10000), maskprior in its own run and PyTorch in a child process of this
  script (--pytorch-rows), and marked "spin". On a quiet machine that was PyTorch's fastest
  setting (docs/speed.md), and the ratio takes the fastest row of each side, whichever setting.
- Rates are medians over windows (shared CPUs are noisy); the spread column gives the slowest
  and the fastest window. Other processes' CPU use during the run is measured from /proc/stat
  and printed, with a warning when it is not negligible.
- GFLOP/s = analytic FLOPs of one step / seconds per step. Counted: every matmul, 2*N*K*M
  forward and 4*N*K*M backward (dX and dW), and attention's QK^T and AV per head
  (2*B*NH*T*T*HS each forward; backward dA, dV, dQ, dK = 2x the forward). Not counted:
  elementwise work (LayerNorm, softmax, GELU, residuals, AdamW), a few percent.
(bench_maskprior, torch_step, time_windows and blas_threads serve tools/bench_gpu.py too.)
"""
import ctypes
import json
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
SECONDS = float(os.environ.get("BENCH_SECONDS", "6"))
# the program timed: ./maskprior, or $MASKPRIOR_BENCH_BINARY (the emulated tests time ./maskprior-emulated)
BINARY = os.environ.get("MASKPRIOR_BENCH_BINARY") or os.path.join(ROOT, "maskprior")
# what it prints where cuBLASLt turns a product down and matmul version 1 runs it
# (layers/matmul_lt.cuh): a --matmul-kernel 2 run that says it times version 1
MATMUL_FALLBACK_NOTE = r"maskprior: note: cuBLASLt .* matmul version 1 runs it"
WARMUP_S = float(os.environ.get("BENCH_WARMUP_S", "1"))
V, LR, MASK_C = 3, 1e-3, 6.0  # V: the Boolean tasks' vocabulary (-1, +1, CLS)
LM_DATA = os.path.join("data", "tinystories-sample-bpe1024")  # relative to ROOT, where the binary runs
BOOLEAN = {"task": "maj3", "T": 16, "out": 1, "wd": 1e-3}
MODELS = {"make-run": dict(BOOLEAN, width=32, layers=2, heads=2, head_size=16, mlp=32, batch=64, log_every=50),
          "wide": dict(BOOLEAN, width=128, layers=4, heads=4, head_size=32, mlp=512, batch=256, log_every=5),
          "vit": {"task": "fashion-mnist", "T": 50, "out": 10, "wd": 0.05, "patch": 4, "width": 64, "layers": 4,
                  "heads": 4, "head_size": 16, "mlp": 128, "batch": 128, "log_every": 5},
          # out (= V) is filled in from the token folder's tokenizer.bin (token_vocab)
          "lm": {"task": "lm", "T": 64, "out": None, "wd": 0.1, "data_dir": LM_DATA, "width": 64, "layers": 2,
                 "heads": 4, "head_size": 16, "mlp": 256, "batch": 32, "log_every": 10}}
# Boolean GOTU tasks (tasks/boolean.h): the size of the group [CLS, x0, ...] that G links all
# pairs of (besides every token with itself), and f of the ±1 bits x (B, 15)
TASKS = {"2parity": (3, lambda x: x[:, 0] * x[:, 1]),
         "maj3": (4, lambda x: x[:, :3].sum(1).sign())}


def token_vocab(folder):
    """The vocabulary size V of a token folder (tokenizer.bin's header: tasks/token_file.h), or
    None when the folder has no tokenizer.bin."""
    path = os.path.join(ROOT, folder, "tokenizer.bin")
    if not os.path.exists(path):
        return None
    with open(path, "rb") as f:
        header = f.read(16)
    return int.from_bytes(header[12:16], "little")  # after the magic MPVOCAB1 and the version


def torch_config(m):
    """tests/torch_reference.py's configuration of model m (the keys of a checkpoint's metadata)."""
    cfg = {"width": m["width"], "layers": m["layers"], "heads": m["heads"], "head_size": m["head_size"],
           "mlp": m["mlp"], "seq_len": m["T"], "vocab": V, "out": m["out"], "causal": 0, "mask": "layer",
           "head_type": "regression"}
    if m["task"] == "lm":  # causal, a next-token head on every position over the text's V tokens
        cfg.update(vocab=m["out"], causal=1, head_type="next_token")
    if "patch" in m:  # Fashion-MNIST's 28 x 28 grey images
        cfg.update(vocab=0, head_type="class", image=(1, 28, 28), patch=m["patch"], pool="cls", label_smoothing=0.1)
    return cfg


def step_flops(m):
    B, C, L, NH, HS, MLP, T = m["batch"], m["width"], m["layers"], m["heads"], m["head_size"], m["mlp"], m["T"]
    n = B * T
    linears = [(n, C, 3 * NH * HS), (n, NH * HS, C), (n, C, MLP), (n, MLP, C)]  # per layer
    per_layer = sum(2 * a * b * c for a, b, c in linears) + 2 * (2 * B * NH * T * T * HS)
    head_rows = B * T if m["task"] == "lm" else B  # the LM's head reads every position, the others CLS
    fwd = L * per_layer + 2 * head_rows * C * m["out"]
    if "patch" in m:  # + the patch embedding: B·(T-1) patches of P·P pixels (no gradient for the pixels)
        return 3 * fwd + 4 * B * (T - 1) * m["patch"] ** 2 * C
    return 3 * fwd  # forward + backward (2x forward)


def maskprior_args(m):
    args = ["--task", m["task"], "--init", "mask", "--device", "cpu", "--wd", str(m["wd"])]
    if "patch" in m:
        args += ["--patch", str(m["patch"])]
    if m["task"] == "lm":  # few evaluation windows: the step-0 evaluation runs before any timing
        args += ["--data-dir", m["data_dir"], "--seq-len", str(m["T"]), "--eval-windows", "64"]
    for key in ("width", "layers", "heads", "head_size", "mlp", "batch"):
        args += ["--" + key.replace("_", "-"), str(m[key])]
    return args


class Refused(Exception):
    """bench_maskprior's answer when a line of the program's output (stdout or stderr) matches its
    `refuse` pattern: the run is not timing what its flags ask for. The exception's text is the line."""


# the short spin of the rows marked "spin": OpenMP's default policy (a spin, then sleep) with a
# spin of 10000 turns; libgomp's own default, 300000, made PyTorch with OpenBLAS's own 2 threads
# 1.7-2.3x slower on 2 cores, its two spinning threads beside OpenBLAS's (docs/speed.md)
SPIN = {"GOMP_SPINCOUNT": "10000"}


def spin_environment():
    env = {k: v for k, v in os.environ.items() if k != "OMP_WAIT_POLICY"}
    env.update(SPIN)
    return env


def bench_maskprior(args, seconds=SECONDS, log_every=50, expect="", threads=THREADS, refuse=None, env=None):
    """Runs ./maskprior ARGS for very many steps at `threads` OpenMP threads, reads its progress
    lines as they come, and stops it (by its pid) once `seconds` of windows are in after two
    warm-up windows. Returns the windows' steps/s, their step count and the program's first line
    (its device); exits with the program's output when it fails, or when its first line does not
    match `expect`; raises Refused, the program stopped, at the first line matching `refuse`. `env`:
    the program's environment, if not this script's."""
    out_dir = tempfile.mkdtemp(prefix="maskprior-bench-")  # in $TMPDIR; its own, so runs at once never collide
    cmd = [BINARY] + args + [
        "--steps", "1000000", "--eval-every", "1000000", "--log-every", str(log_every), "--out", out_dir]
    try:
        proc = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True,
                                env=dict(env or os.environ, OMP_NUM_THREADS=str(threads)))
    except OSError as e:
        sys.exit("bench: cannot run %s (%s): build it first with make maskprior" % (cmd[0], e))
    first, out, rates, t0 = proc.stdout.readline().strip(), [], [], None
    refused = first if refuse and re.search(refuse, first) else None
    for line in proc.stdout if re.search(expect, first) and not refused else []:
        out.append(line)
        if refuse and re.search(refuse, line):
            refused = line.strip()
            break
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
    if refused:
        raise Refused(refused)
    if failed:
        why = "exit %s" % proc.returncode if re.search(expect, first) else "first line not matching %r" % expect
        sys.exit("bench: maskprior failed (%s): %s\n%s\n%s" % (why, " ".join(cmd), first, "".join(out)))
    return rates[2:], log_every * (len(rates) - 2), first


def torch_step(task, cfg, batch, lr, wd, device="cpu", compile=False, params=None):
    """One training step of tests/torch_reference.py's model on a Boolean task (or, for an image
    config, on random pixels and classes; for a next-token config, on random token ids and
    targets; both with the gradient norm clipped at 1 as the binary's recipes for them do), as a
    function returning the loss. Parameters: `params` (name -> float32 tensor, e.g. from a dump),
    or leaf float32 tensors drawn like the C++ default init (prior/init.cuh) with a mask
    (cfg["mask"] not "none") ±MASK_C from the task's G; torch.optim.AdamW with weight decay wd,
    the mask's 0. The step cycles through 32 random batches made here, before
    any clock starts. compile: the loss under torch.compile (forward and backward; the optimizer
    stays eager), True for its default mode or the name of a mode ("reduce-overhead": CUDA graphs,
    on a GPU only)."""
    import torch
    from torch_reference import model_loss, parameter_shapes
    torch.manual_seed(1)
    p = {}
    if params is not None:
        p = {name: t.detach().clone().to(device).requires_grad_() for name, t in params.items()}
    else:
        group, _ = TASKS[task]
        G = torch.eye(cfg["seq_len"])
        G[:group, :group] = 1
        shapes = parameter_shapes(cfg)
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
    loss_fn = torch.compile(model_loss, mode=None if compile is True else compile) if compile else model_loss
    # reduce-overhead: PyTorch's CUDAGraph Trees replay the compiled forward and backward as CUDA
    # graphs whose outputs (the loss, the gradients) live in the graphs' memory pool. From their notes:
    # a new iteration, after which the previous one's outputs may be overwritten, starts at a call of
    # the compiled function with no backward pending; where that heuristic could be wrong, mark it with
    # torch.compiler.cudagraph_mark_step_begin(), or clone what must outlive the iteration. Each step
    # here marks its start, so nothing rests on the heuristic, and nothing needs a clone: AdamW reads
    # the gradients in their own step, zero_grad drops the last step's unread, and time_windows reads
    # a loss only after the last step. A caller keeping a loss past the next step must clone it.
    mark_step = getattr(getattr(torch, "compiler", None), "cudagraph_mark_step_begin", None)
    mark_step = mark_step if compile == "reduce-overhead" else None
    batches = []
    next_token = cfg["head_type"] == "next_token"
    for _ in range(32):
        if next_token:
            tokens = torch.randint(0, cfg["vocab"], (batch, cfg["seq_len"]), device=device)
            batches.append((tokens, torch.randint(0, cfg["vocab"], (batch, cfg["seq_len"]), device=device).float()))
            continue
        if cfg.get("image"):
            pixels = torch.randn((batch,) + tuple(cfg["image"]), device=device)
            batches.append((pixels, torch.randint(0, cfg["out"], (batch,), device=device).float()))
            continue
        bits = torch.randint(0, 2, (batch, cfg["seq_len"] - 1), device=device)
        tokens = torch.cat([torch.full((batch, 1), 2, device=device), bits], 1)  # CLS = 2, bit b is token (b+1)/2
        batches.append((tokens, TASKS[task][1](2.0 * bits - 1)))
    count = [0]

    def step():
        if mark_step:
            mark_step()
        tokens, targets = batches[count[0] % len(batches)]
        count[0] += 1
        loss = loss_fn(p, cfg, tokens, targets)
        opt.zero_grad(set_to_none=True)
        loss.backward()
        if cfg.get("image") or next_token:
            torch.nn.utils.clip_grad_norm_(list(p.values()), 1.0)
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


# PyTorch held to AVX2, set in the environment before torch loads; each library reads its variable
# once, when it starts
AVX2_HOLD = (("OPENBLAS_CORETYPE", "Haswell"),  # OpenBLAS (the matmuls): its Haswell kernels, AVX2 and FMA
             ("ATEN_CPU_CAPABILITY", "avx2"),   # ATen's own kernels (elementwise, softmax, LayerNorm, AdamW)
             ("ONEDNN_MAX_CPU_ISA", "AVX2"))    # oneDNN (the ViT's patch convolution)
# oneDNN's dnnl_cpu_isa_t values (dnnl_types.h), for what dnnl_get_effective_cpu_isa returns
ONEDNN_ISAS = {0x1: "sse41", 0x3: "avx", 0x7: "avx2", 0x407: "avx2_vnni", 0x27: "avx512_core",
               0x67: "avx512_core_vnni", 0xe7: "avx512_core_bf16", 0x3e7: "avx512_core_amx"}


def binary_march():
    """The binary's HOST_MARCH, from its --version ("... HOST_MARCH=x86-64-v3 ..."); None when it
    does not say (or does not run: bench_maskprior says why later)."""
    try:
        out = subprocess.run([BINARY, "--version"], capture_output=True, text=True).stdout
    except OSError:
        return None
    m = re.search(r"HOST_MARCH=(\S+)", out)
    return m.group(1) if m else None


def hold_pytorch(march):
    """Holds PyTorch to AVX2 (AVX2_HOLD) where the binary is built for x86-64-v3 on a CPU with
    AVX-512; must run before torch loads. Returns the header's line that says which instructions
    each side runs."""
    flags = re.search(r"^flags\s*: (.*)$", open("/proc/cpuinfo").read(), re.M)
    avx512 = bool(flags) and "avx512f" in flags.group(1).split()
    if march != "x86-64-v3":
        return "instructions: the binary's HOST_MARCH=%s; PyTorch its own choice" % march
    if not avx512:
        return "instructions: AVX2 on both sides (the binary's HOST_MARCH=x86-64-v3; this CPU has no AVX-512)"
    if "torch" in sys.modules:
        sys.exit("bench: torch was loaded before it could be held to AVX2")
    os.environ.update(AVX2_HOLD)
    return ("instructions: AVX2 on both sides on this AVX-512 CPU: the binary's HOST_MARCH=x86-64-v3, PyTorch "
            "held to AVX2 (%s)" % ", ".join("%s=%s" % kv for kv in AVX2_HOLD))


def pytorch_kernels(torch, blas):
    """What PyTorch's libraries report they run: OpenBLAS's core, ATen's CPU capability, oneDNN's ISA."""
    found = []
    try:
        lib = ctypes.CDLL(blas)
        lib.openblas_get_corename.restype = ctypes.c_char_p
        found.append("OpenBLAS core %s" % lib.openblas_get_corename().decode())
    except (OSError, AttributeError):
        found.append("OpenBLAS core unknown")
    capability = re.search(r"CPU capability usage: (\S+)", torch.__config__.show())
    found.append("ATen %s" % (capability.group(1) if capability else "unknown"))
    try:  # Debian's torch links oneDNN as libdnnl.so.2; a wheel's own copy is not to be found
        isa = ctypes.CDLL("libdnnl.so.2").dnnl_get_effective_cpu_isa()
        found.append("oneDNN %s" % ONEDNN_ISAS.get(isa, hex(isa)))
    except (OSError, AttributeError):
        found.append("oneDNN unknown")
    return ", ".join(found)


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


def fma_peak(threads):
    """{"fma": GFLOP/s, "mul_add": GFLOP/s, "bits": vector bits} of tools/fma_peak at `threads` threads."""
    path = os.path.join(ROOT, "tools", "fma_peak")
    try:
        out = subprocess.run([path, str(threads)], capture_output=True, text=True, check=True).stdout
    except (OSError, subprocess.CalledProcessError) as e:
        sys.exit("bench: %s failed (%s): build it with make bench" % (path, e))
    found = re.findall(r"^fma_peak threads \d+ vector_bits (\d+) kind (fma|mul_add) gflops ([\d.]+)", out, re.M)
    if len(found) != 2:
        sys.exit("bench: unexpected output of %s: %s" % (path, out))
    return dict({kind: float(g) for _, kind, g in found}, bits=int(found[0][0]))


def fma_peak_checked(path=os.path.join(ROOT, "tools", "fma_peak")):
    """How tools/fma_peak's loops were checked in its disassembly: the loop of fma_loop (from its
    backward jump's target to the jump) holds exactly CHAINS vfmadd, and the loop of mul_add_loop
    CHAINS / 2 vmulps and CHAINS / 2 vaddps (CHAINS: 24 at 512 bits, 12 at 256), every one on
    registers. An operand in memory would time the cache, not the units; a chain the compiler
    worked out and dropped would be counted as done, and the peak would be too high. The width is
    read from the loop's registers (zmm: 512 bits). The line that says so, or exits naming what is
    wrong."""
    try:
        text = subprocess.run(["objdump", "-d", "--no-show-raw-insn", path], capture_output=True, text=True,
                              check=True).stdout
    except (OSError, subprocess.CalledProcessError) as e:
        return "its loops not checked: objdump failed (%s)" % e
    if "<fma_loop>:" not in text:  # built for a CPU without FMA: it prints zeros, and nothing is shared
        return "its loops not checked: this build has none"
    found = []
    for function, ops in (("fma_loop", ("vfmadd",)), ("mul_add_loop", ("vmulps", "vaddps"))):
        body = re.search(r"<%s>:\n(.*?)\n\n" % function, text, re.S)
        if not body:
            sys.exit("bench: no %s in tools/fma_peak's disassembly" % function)
        chains = 24 if "%zmm" in body.group(1) else 12
        expected = {op: chains // len(ops) for op in ops}
        lines = [(int(m.group(1), 16), m.group(2)) for m in
                 (re.match(r"\s*([0-9a-f]+):\s*(.*)", line) for line in body.group(1).split("\n")) if m]
        jumps = [(at, int(m.group(1), 16)) for at, code in lines
                 for m in [re.match(r"j(?!mp)\w+\s+([0-9a-f]+)", code)] if m and int(m.group(1), 16) < at]
        if not jumps:
            sys.exit("bench: tools/fma_peak's %s has no loop; its peak would be wrong" % function)
        jump_at, loop_start = jumps[-1]
        loop = [code for at, code in lines if loop_start <= at <= jump_at]
        for op, count in expected.items():
            ops = [code for code in loop if code.startswith(op)]
            in_memory = [code for code in ops if "(" in code]
            if len(ops) != count or in_memory:
                sys.exit("bench: tools/fma_peak's %s: its loop holds %d %s (%d reading memory), not %d on registers; "
                         "its peak would be wrong" % (function, len(ops), op, len(in_memory), count))
        found.append("%s in %s's" % (" and ".join("%d %s" % (n, op) for op, n in expected.items()), function))
    return "checked in its disassembly: %s loop, every one on registers" % ", ".join(found)


def first_batch_losses(m, torch):
    """The loss of the binary's first batch at its initial weights, from ./maskprior and from
    PyTorch on the same parameters (float32); and those parameters, for PyTorch's timing."""
    from torch_reference import model_loss, parameter_shapes, read_safetensors
    cfg = torch_config(m)
    with tempfile.TemporaryDirectory(prefix="maskprior-bench-") as tmp:
        path = os.path.join(tmp, "state.safetensors")
        r = subprocess.run([os.path.join(ROOT, "maskprior")] + maskprior_args(m) + ["--dump-state", path],
                           capture_output=True, text=True, env=dict(os.environ, OMP_NUM_THREADS=str(THREADS)))
        if r.returncode != 0:
            sys.exit("bench: maskprior --dump-state failed:\n" + r.stdout + r.stderr)
        tensors, _ = read_safetensors(path)
    params = {name: tensors[name].float() for name in parameter_shapes(cfg)}
    inputs = tensors["batch.inputs"].float() if cfg.get("image") else tensors["batch.inputs"].long()
    with torch.no_grad():
        theirs = model_loss(params, cfg, inputs, tensors["batch.targets"].float()).item()
    return tensors["loss"].item(), theirs, params


def pytorch_rows(m, torch, blas, blas_kind, params, one_thread=True):
    """PyTorch's rows for model m, each (label, threads, rates, steps): 1 thread in all (unless not
    one_thread); THREADS threads in torch's pool with OpenBLAS on 1; and OpenBLAS on THREADS too."""
    settings = [(1, 1, "PyTorch eager, 1 thread in all")] if one_thread else []
    if THREADS > 1:
        settings.append((THREADS, 1, "PyTorch eager, OpenBLAS 1 thr"))
        if blas_kind == "OpenBLAS":
            settings.append((THREADS, THREADS, "PyTorch eager, OpenBLAS %d thr" % THREADS))
    rows = []
    for torch_threads, openblas, label in settings:
        torch.set_num_threads(torch_threads)
        blas_threads(blas, openblas)
        step = torch_step(m["task"], torch_config(m), m["batch"], LR, m["wd"], params=params)
        rows.append((label, torch_threads) + time_windows(step, SECONDS, WARMUP_S))
    return rows


def spinning_pytorch_rows(name):
    """The multi-thread PyTorch rows of model `name` timed in a child process of this script under
    SPIN (its libgomp reads the policy as it starts), each label with ", spin"."""
    r = subprocess.run([sys.executable, os.path.abspath(__file__), "--pytorch-rows", name], capture_output=True,
                       text=True, env=spin_environment())
    found = re.search(r"^rows (.*)$", r.stdout, re.M)
    if r.returncode != 0 or not found:
        sys.exit("bench: the spinning PyTorch rows of %s failed:\n%s%s" % (name, r.stdout, r.stderr))
    return [(label + ", spin", t, rates, n) for label, t, rates, n in json.loads(found.group(1))]


def pytorch_rows_child(name):  # tools/bench.py --pytorch-rows MODEL: spinning_pytorch_rows' child
    m = dict(MODELS[name])
    if name == "lm":
        m["out"] = token_vocab(m["data_dir"])
    import torch
    blas = torch_sgemm_library(torch)
    blas_kind = "OpenBLAS" if blas_threads(blas, 1) else "other"
    params = first_batch_losses(m, torch)[2]
    print("rows " + json.dumps(pytorch_rows(m, torch, blas, blas_kind, params, one_thread=False)))


def main(names):
    unknown = [n for n in names if n not in MODELS]
    if unknown:
        sys.exit("bench: unknown model %s (the models: %s)" % (", ".join(unknown), ", ".join(MODELS)))
    models = {name: dict(m) for name, m in MODELS.items() if name in names or not names}
    skipped = {}  # name -> the line that says why
    if "lm" in models:
        models["lm"]["out"] = token_vocab(models["lm"]["data_dir"])
        if models["lm"]["out"] is None:
            skipped["lm"] = ("model lm: skipped, no token folder %s (data/README.md: data/prepare_text.py writes it)"
                             % models["lm"]["data_dir"])
            del models["lm"]
    if not models:  # nothing left to time
        print("\n".join(skipped.values()))
        return
    held = hold_pytorch(binary_march())  # before torch loads
    start = cpu_snapshot()
    thread_counts = sorted({1, THREADS})
    peaks = {t: fma_peak(t) for t in thread_counts}
    checked = fma_peak_checked()
    import torch
    blas = torch_sgemm_library(torch)
    blas_kind = "OpenBLAS" if blas_threads(blas, 1) else "reference BLAS" if "/blas/" in blas else "?"
    results, first = {}, ""
    for name, m in models.items():
        ours_loss, torch_loss, params = first_batch_losses(m, torch)
        rows = []
        for t in reversed(thread_counts):
            rates, n, first = bench_maskprior(maskprior_args(m), SECONDS, m["log_every"], " %d threads" % t, t)
            rows.append(("maskprior", t, rates, n))
        if THREADS > 1:  # the multi-thread rows again, with a short spin before the sleep (SPIN)
            rates, n, _ = bench_maskprior(maskprior_args(m), SECONDS, m["log_every"], " %d threads" % THREADS,
                                          THREADS, env=spin_environment())
            rows.append(("maskprior, spin", THREADS, rates, n))
        rows += pytorch_rows(m, torch, blas, blas_kind, params)
        if THREADS > 1:
            rows += spinning_pytorch_rows(name)
        results[name] = (m, ours_loss, torch_loss, rows)
    end = cpu_snapshot()
    others = ((end[0] - start[0]) / os.sysconf("SC_CLK_TCK") - (end[1] - start[1])) / (end[2] - start[2])

    bits = peaks[THREADS]["bits"]
    print("maskprior CPU benchmark: init mask, AdamW, fp32")
    print(held)
    policy, spin = os.environ.get("OMP_WAIT_POLICY"), os.environ.get("GOMP_SPINCOUNT")
    print("OpenMP's waiting threads, both sides: %s%s%s"
          % ("OMP_WAIT_POLICY=%s" % policy if policy else "OMP_WAIT_POLICY unset (libgomp's default: a spin, then sleep)",
             ", GOMP_SPINCOUNT=%s" % spin if spin else "",
             "; the rows marked spin: OMP_WAIT_POLICY unset, " + ", ".join("%s=%s" % kv for kv in SPIN.items())
             if THREADS > 1 else ""))
    for kind, what in (("fma", "FMA peak"), ("mul_add", "mul+add ceiling (maskprior's)")):
        print("%s (tools/fma_peak, %d-bit vectors): %s" % (what, bits, ", ".join(
            "%.1f GFLOP/s at %d thread%s" % (peaks[t][kind], t, "s" if t > 1 else "") for t in thread_counts)))
    print("tools/fma_peak: " + checked)
    print("% ceil: maskprior's share of the mul+add ceiling, PyTorch's of the FMA peak, at its thread count")
    bar = "+--------------------------------------+-----+---------+----------+---------+--------+---------------+-------+"
    above = []  # the rows whose rate passes their ceiling: the peak is wrong, not the row
    for name, (m, ours_loss, torch_loss, rows) in results.items():
        flops = step_flops(m)
        print("\nmodel %s (%s): B %d T %d C %d L %d NH %d HS %d MLP %d%s; %.1f MFLOP per training step"
              % (name, m["task"], m["batch"], m["T"], m["width"], m["layers"], m["heads"], m["head_size"], m["mlp"],
                 " V %d" % m["out"] if m["task"] == "lm" else "", flops / 1e6))
        print("first-batch loss, same weights and batch: maskprior %.6f, PyTorch %.6f" % (ours_loss, torch_loss))
        print(bar)
        print("| implementation                       | thr | steps/s | ms/step  | GFLOP/s | % ceil | spread step/s | steps |")
        print(bar)
        for label, t, rates, n in rows:
            r = statistics.median(rates)
            gflops = r * flops / 1e9
            ceiling = peaks[t]["mul_add" if label.startswith("maskprior") else "fma"]
            share = 100 * gflops / ceiling if ceiling else 0
            if share > 100:
                above.append("%s, %s at %d threads" % (name, label, t))
            print("| %-36s | %3d | %7.1f | %8.3f | %7.2f | %6s | %6.1f-%-6.1f | %5d |"
                  % (label, t, r, 1000 / r, gflops, "%.1f%%" % share if share <= 100 else "WRONG", min(rates),
                     max(rates), n))
        print(bar)
        ours = max((statistics.median(r[2]), r[0], r[1]) for r in rows if r[0].startswith("maskprior"))
        best = max((statistics.median(r[2]), r[0]) for r in rows if not r[0].startswith("maskprior"))
        print("ratio, fastest maskprior (%s%d thr) / fastest PyTorch (%s): %.2fx"
              % ("spin, " if ours[1].endswith("spin") else "", ours[2], best[1], ours[0] / best[0]))
    for line in skipped.values():
        print("\n" + line)
    if above:
        print("\nbench: the peak is wrong: %s ran faster than its ceiling (tools/fma_peak); those shares are not "
              "printed" % "; ".join(above))
    cpuinfo = open("/proc/cpuinfo").read()
    name, family, model = (re.search(r"^%s\s*: (.*)$" % key, cpuinfo, re.M)
                           for key in ("model name", "cpu family", "model"))
    print("\nCPU:       %s%s, %d cores; other processes used %.2f of them during the run%s"
          % (name.group(1) if name else "unknown",
             ", family %s model %s" % (family.group(1), model.group(1)) if family and model else "",
             os.cpu_count(), max(0.0, others),
             " (WARNING: a busy machine, the numbers are not reliable)" if others > 0.2 else ""))
    # the build's line without its thread count, which is each row's
    print("maskprior: %s" % re.sub(r", \d+ threads \(CPU\)", "", first.split(": ", 1)[-1]))
    print("PyTorch:   %s (%s)" % (torch.__version__, torch.__file__))
    print("BLAS:      %s (%s; the sgemm_ that libtorch_cpu calls)" % (blas, blas_kind))
    print("PyTorch's kernels, as its libraries report them: %s" % pytorch_kernels(torch, blas))


if __name__ == "__main__":
    if sys.argv[1:2] == ["--pytorch-rows"] and len(sys.argv) == 3 and sys.argv[2] in MODELS:
        hold_pytorch(binary_march())  # as the parent held it, before torch loads
        pytorch_rows_child(sys.argv[2])
    else:
        main(sys.argv[1:])
