#!/usr/bin/env python3
"""make gpu-check, make gpu-check-full: what needs a GPU, planned so that one device call brings back the
whole verdict (docs/gpu.md).

    python3 tests/gpu_check.py                 # the quick tier: stages a-d, limits summing to at most 480 s
    python3 tests/gpu_check.py --full          # the full tier: stages e-h, at most 540 s
    python3 tests/gpu_check.py --stages b      # some stages again (within their tiers' budgets)
    python3 tests/gpu_check.py --plan          # the plan: each step's estimate, limit and source, and the sums
    GPU_CHECK_RETURN=$OUT python3 tests/gpu_check.py   # on the device machine: what comes back, in $OUT
    python3 tests/gpu_check.py --rehearse 0.05 # here, without a GPU: make gpu-check-rehearsal

The stages and steps, each step's estimate of its GPU time (an estimate, with its source) and its
limit, are in tests/gpu_check_plan.py. Before anything runs, the limits of the steps to run are
summed and held to the budget (the tier's, or --budget S): past it the check refuses to start, with
a line naming each stage's sum. Each step then runs under its own limit, its process group killed at
it; a step cut by its limit "did not finish", one not reached "not run": rows of their own, not
FAILED. The verdict on the defaults reads the correctness rows (stage a, the lab, the profiles, the
sanitizers); a speed row that did not run says "not measured" and never fails a correct GPU.

Where it writes. Its work folder is its own ($GPU_CHECK_WORK, default /tmp/maskprior-gpu-check,
emptied first), never $OUT, and no step sees $OUT in its environment. With GPU_CHECK_RETURN=DIR it
keeps in DIR only what a device call can bring back (at most 8 files of 16 MiB, 2 folders down,
names in letters, digits, '.', '_' and '-'): summary.txt and summary.json (the same rows), speed.txt
(the speed tables: the benchmark, the lab, the profiles), tables.txt (the paper-size tables) and
logs.tar.gz (every log and metrics file of the work folder, at most 12 MiB, no checkpoint, data or
binary). All four are rewritten after every step, each to a temporary name and renamed, so that a
call stopped at its limit returns every row that finished, and the row of the step then running.
SIGTERM or SIGINT stops the running step, marks the rest "not run" and writes them out.

BUILD=0 takes ./maskprior, tests/unit_tests and the dev/ programs already there (built elsewhere with
`make maskprior tests/unit_tests dev ARCH=90 HOST_MARCH=x86-64-v3` and carried with gpu_include/);
otherwise it builds them for sm_90 first, outside the budget. Exit status: 0 every row passed (or was
refused, skipped or not measured), 1 some row failed or did not finish, 2 refused to start.

A rehearsal (--rehearse SCALE, no GPU needed) runs the same plan through the same driver: the steps
that can run their own command lines on the emulation do (./maskprior-emulated, tests/emulated_tests
on two test files, dev/*-emulated, tiny shapes), the others are stand-ins that sleep their estimate
times SCALE under their limit times SCALE; --plant return-file | big-log plants a fault for its test
(tests/test_gpu_check.sh).
"""
import argparse
import datetime
import io
import json
import os
import re
import shutil
import signal
import subprocess
import sys
import tarfile
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import gpu_check_plan as plan  # noqa: E402

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
# what the device tool brings back (its README): files, their size, their depth, their names
RETURN_FILES, RETURN_FILE_BYTES, RETURN_DEPTH = 8, 16 << 20, 2
RETURN_NAME = re.compile(r"^[A-Za-z0-9._-]+$")
ARCHIVE_BYTES = 12 << 20  # the logs archive's own bound, under the tool's
ARCHIVED = (".log", ".txt", ".json", ".jsonl", ".out")  # what the archive keeps of the work folder
FAILING = ("FAILED", "did not finish")  # the statuses that fail the check (and a row's verdict)


class Stopped(Exception):
    """SIGTERM, SIGINT or SIGHUP arrived: the check stops where it is."""


def return_problems(folder):
    """What in `folder` a device call could not bring back, one line each (none: all of it comes back)."""
    problems, files = [], []
    for dirpath, dirnames, filenames in os.walk(folder):
        depth = os.path.relpath(dirpath, folder).count(os.sep) + (dirpath != folder)
        for name in dirnames + filenames:
            if not RETURN_NAME.match(name):
                problems.append("%s: a name with characters other than letters, digits, '.', '_', '-'" % name)
        for name in filenames:
            path = os.path.join(dirpath, name)
            files.append(path)
            if depth > RETURN_DEPTH:
                problems.append("%s: more than %d folders down" % (os.path.relpath(path, folder), RETURN_DEPTH))
            if os.path.getsize(path) > RETURN_FILE_BYTES:
                problems.append("%s: %.1f MiB, over the 16 MiB a file" % (os.path.relpath(path, folder),
                                                                         os.path.getsize(path) / 2**20))
    if len(files) > RETURN_FILES:
        problems.append("%d files, over the %d that come back" % (len(files), RETURN_FILES))
    archive = os.path.join(folder, "logs.tar.gz")
    if os.path.exists(archive) and os.path.getsize(archive) > ARCHIVE_BYTES:
        problems.append("logs.tar.gz: %.1f MiB, over its 12 MiB" % (os.path.getsize(archive) / 2**20))
    return problems


class Check:
    def __init__(self, opt, steps, budget, tier):
        self.opt, self.steps, self.budget, self.tier = opt, steps, budget, tier
        self.rehearse = opt.rehearse
        self.work = os.path.abspath(os.environ.get("GPU_CHECK_WORK", "/tmp/maskprior-gpu-check"))
        self.ret = os.path.abspath(os.environ["GPU_CHECK_RETURN"]) if os.environ.get("GPU_CHECK_RETURN") else None
        self.env = {k: v for k, v in os.environ.items() if k not in ("OUT", "GPU_CHECK_RETURN")}
        self.env["PYTHONUNBUFFERED"] = "1"
        self.python = self.torch_python()
        self.env["MASKPRIOR_PYTHON"] = self.python
        self.rows, self.procs, self.planted = [], [], False
        self.stage = self.step = None
        self.started = time.time()
        self.gpu = ""
        try:
            self.commit = self.output(["git", "describe", "--always", "--dirty"]).strip()
        except OSError:
            self.commit = "unknown (no git)"

    # ---- what the steps call ----
    def path(self, name):
        return os.path.join(self.work, name)

    def read(self, log):
        try:
            return open(self.path(log), errors="replace").read()
        except OSError:
            return ""

    def bin(self, name):
        """./maskprior, or in a rehearsal ./maskprior-emulated"""
        return "./%s%s" % (name, "-emulated" if self.rehearse else "")

    def row(self, name, status, detail="", decides=None, blocks=None):
        """One row of the summary: decides (the verdict reads it) by default in stages a, c and d."""
        return {"stage": self.stage, "step": self.step.key, "name": name, "status": status, "detail": detail,
                "decides": self.stage in "acd" if decides is None else decides, "blocks": blocks}

    def failed(self, name, rc, log):
        """The row of a command that did not succeed: did not finish at its limit, or FAILED with its tail."""
        if rc == 124:
            return self.row(name, "did not finish", "stopped at its %d s limit (%s)" % (self.limit, log))
        tail = " | ".join(line for line in self.read(log).strip().split("\n")[-3:] if line.strip())
        return self.row(name, "FAILED", "exit %d: %s" % (rc, tail[-400:]))

    def isolated_row(self, name, log, rc):
        """The row of a tests/gpu_tests_isolated.sh run (exit 0 passed, 1 failed or crashed, 3 did not
        finish in its --total, 77 every case skipped, 124 stopped at the step's limit)."""
        summary = (re.findall(r"^gpu_tests_isolated: (.*)$", self.read(log), re.M) or ["no summary"])[-1]
        if rc in (0, 77) and not (self.gpu or self.rehearse):  # the cases that need a GPU skipped themselves
            return self.row(name, "FAILED", "no GPU: its GPU cases skipped (%s)" % summary)
        if rc == 0:
            return self.row(name, "ok", summary)
        if rc in (3, 124):
            return self.row(name, "did not finish", summary, decides=False if "sanitizer" in name else None)
        if rc == 77:
            return self.row(name, "FAILED", "every GPU case skipped: no GPU")
        return self.row(name, "FAILED", "exit %d: %s" % (rc, summary))

    def doctest_row(self, name, log, rc):
        counts = (re.findall(r"test cases:.*", self.read(log)) or [""])[-1]
        passed = re.search(r"\| *(\d+) passed", counts)
        if rc == 0 and passed and int(passed.group(1)) > 0:
            return self.row(name, "ok", counts)
        if rc == 0:
            return self.row(name, "skipped" if self.rehearse else "FAILED", "its GPU case skipped: no GPU")
        return self.failed(name, rc, log)

    def bench_row(self, name, log, rc):
        """A benchmark's row: its last line; a FAILED line (a fallen-back matmul version 2 timing) fails
        only the switch to matmul version 2; a benchmark that did not run or finish is "not measured"."""
        last = (self.read(log).strip().split("\n") or [""])[-1]
        if rc == 0:
            return self.row(name, "ok", last, decides=False)
        if rc == 1 and last.startswith("FAILED: "):
            return self.row(name, "FAILED", last, decides=True, blocks="matmul 2")
        why = "stopped at its %d s limit" % self.limit if rc == 124 else "exit %d: %s" % (rc, last[-300:])
        return self.row(name, "not measured", why + " (its tables so far in speed.txt)", decides=False)

    def speed_tables(self, log):
        with open(self.path("speed.txt"), "a") as f:
            f.write("== %s (%s)\n%s\n" % (self.step.name, log, self.read(log)))

    def tables(self, title, text):
        with open(self.path("tables.txt"), "a") as f:
            f.write("== %s\n%s\n" % (title, text))

    def output(self, cmd, env=None):
        return subprocess.run(cmd, cwd=ROOT, env=dict(self.env, **(env or {})), stdout=subprocess.PIPE,
                              stderr=subprocess.STDOUT, text=True).stdout

    def run(self, cmd, log, env=None):
        """cmd in a process group of its own, its output to the work folder's `log`, under the step's
        limit; its exit status, 124 when the limit stopped it."""
        return self.run_parallel([(cmd, log)], env)[0]

    def run_parallel(self, jobs, env=None):
        """[(cmd, log)] at once, each under the step's limit; their exit statuses."""
        deadline = self.step_start + self.limit
        for cmd, log in jobs:
            with open(self.path(log), "w") as out:
                try:
                    self.procs.append(subprocess.Popen(cmd, cwd=ROOT, env=dict(self.env, **(env or {})), stdout=out,
                                                       stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL,
                                                       start_new_session=True))
                except OSError as e:  # no such program: the exit status a shell gives it
                    out.write("gpu_check: %s: %s\n" % (cmd[0], e.strerror))
                    self.procs.append(None)
        codes = []
        for p in self.procs:
            try:
                codes.append(127 if p is None else p.wait(timeout=max(0.0, deadline - time.time())))
            except subprocess.TimeoutExpired:
                codes.append(124)
        self.procs = [p for p in self.procs if p]
        self.stop_processes()
        return codes

    def stop_processes(self):
        """SIGTERM to each process group still running (a run writes its checkpoint), SIGKILL 10 s later."""
        for sig, wait in ((signal.SIGTERM, 10), (signal.SIGKILL, 5)):
            for p in self.procs:
                if p.poll() is None:
                    try:
                        os.killpg(p.pid, sig)
                    except ProcessLookupError:
                        pass
            end = time.time() + wait
            while any(p.poll() is None for p in self.procs) and time.time() < end:
                time.sleep(0.1)
        self.procs = []

    def sanitizer(self):
        if self.rehearse:
            return "env"
        found = shutil.which("compute-sanitizer")
        fallback = os.path.join(os.environ.get("CUDA_HOME", "/usr/local/cuda"), "bin", "compute-sanitizer")
        return found or (fallback if os.access(fallback, os.X_OK) else None)

    def image_task(self):
        """Fashion-MNIST where installed or carried (data/fashion-mnist), else two classes of 8x8 BMP
        images written here."""
        for d in (os.environ.get("FASHION_DIR", ""), "data/fashion-mnist", "/usr/share/datasets/fashion-mnist"):
            if d and os.path.exists(os.path.join(ROOT, d, "t10k-labels-idx1-ubyte.gz")):
                return ["--task", "fashion-mnist", "--data-dir", d, "--patch", "7"]
        folder = self.path("tiny-images")
        for split, count in (("train", 8), ("test", 4)):
            for c in range(2):
                os.makedirs(os.path.join(folder, split, "c%d" % c), exist_ok=True)
                for i in range(count):
                    pixels = bytes((40 + 150 * c + 7 * i + j) % 256 for j in range(8 * 8 * 3))
                    head = b"BM" + (54 + len(pixels)).to_bytes(4, "little") + bytes(4) + (54).to_bytes(4, "little")
                    info = b"".join(v.to_bytes(n, "little") for v, n in ((40, 4), (8, 4), (8, 4), (1, 2), (24, 2),
                                    (0, 4), (len(pixels), 4), (2835, 4), (2835, 4), (0, 4), (0, 4)))
                    open(os.path.join(folder, split, "c%d" % c, "%d.bmp" % i), "wb").write(head + info + pixels)
        return ["--task", "images", "--data-dir", folder, "--patch", "4"]

    def vision_task(self):
        cifar = os.environ.get("CIFAR10_DIR", "data/cifar10-jpeg")
        if os.path.exists(os.path.join(ROOT, cifar, "data_batch_1.bin")):
            return ["--task", "cifar10", "--data-dir", cifar]
        if os.path.isdir(os.path.join(ROOT, cifar, "train")):
            return ["--task", "images", "--data-dir", cifar]
        return self.image_task()[:4]

    def text_task(self, real=False):
        """$LM_DIR (default data/tinystories-sample-bpe1024); for a short run or a rehearsal, else the
        fixture text as bytes; for a real LM run without the folder, none."""
        folder = os.environ.get("LM_DIR", "data/tinystories-sample-bpe1024")
        if not os.path.exists(os.path.join(ROOT, folder, "train.bin")):
            if real and not self.rehearse:
                return []
            folder = self.path("tiny-text")
            self.output([self.python, "data/prepare_text.py", "--input", "tests/fixtures/text/tiny.txt", "--out",
                         folder, "--tokenizer", "bytes"])
            if not os.path.exists(os.path.join(folder, "train.bin")):
                return []
        return ["--task", "lm", "--data-dir", folder] + ([] if real else ["--seq-len", "16", "--eval-windows", "8"])

    # ---- the run ----
    @staticmethod
    def torch_python():
        """$MASKPRIOR_PYTHON, else the first python3 that has PyTorch (on the GPU machine, its own)"""
        for p in (os.environ.get("MASKPRIOR_PYTHON", ""), "python3", "/usr/bin/python3"):
            if p and subprocess.run([p, "-c", "import torch"], capture_output=True).returncode == 0:
                return p
        return "python3"

    def preflight(self):
        """The GPU and the binaries, before the clock starts (a build, without BUILD=0, too)."""
        self.stage, self.step = "0", plan.Step("0", "preflight", "", 0, 0, "", None)
        if self.rehearse:
            self.rows.append(self.row("GPU", "ok", "rehearsal: the emulation and stand-ins, scale %g" % self.rehearse))
            return
        smi = subprocess.run(["nvidia-smi", "--query-gpu=name,driver_version,memory.total", "--format=csv,noheader"],
                             capture_output=True, text=True) if shutil.which("nvidia-smi") else None
        self.gpu = smi.stdout.strip() if smi and smi.returncode == 0 else ""
        self.rows.append(self.row("GPU", "ok" if self.gpu else "FAILED", self.gpu or "nvidia-smi finds none"))
        programs = ["maskprior", "tests/unit_tests", "dev/attention_forward", "dev/attention_backward", "dev/matmul"]
        if os.environ.get("BUILD", "1") != "0":
            include = ["EXTRA_INCLUDE=gpu_include"] if os.path.isdir(os.path.join(ROOT, "gpu_include")) else []
            build = subprocess.run(["make", "-j16", "-B"] + programs[:2] + ["dev", "ARCH=90"] + include, cwd=ROOT,
                                   stdout=open(self.path("build.log"), "w"), stderr=subprocess.STDOUT)
            self.rows.append(self.row("build", "ok" if build.returncode == 0 else "FAILED", "make ARCH=90 (build.log)"))
        else:
            missing = [p for p in programs if not os.access(os.path.join(ROOT, p), os.X_OK)]
            self.rows.append(self.row("build", "FAILED" if missing else "ok",
                                      "BUILD=0 but missing: " + " ".join(missing) if missing else "prebuilt (BUILD=0)"))

    def execute(self):
        signal.signal(signal.SIGTERM, self.on_signal)
        signal.signal(signal.SIGINT, self.on_signal)
        signal.signal(signal.SIGHUP, self.on_signal)
        self.preflight()
        for r in self.rows:
            self.say(r)
        self.started = time.time()
        pending = list(self.steps)
        try:
            while pending:
                self.step = pending[0]
                self.stage = self.step.stage
                self.limit = self.step.limit * (self.rehearse if self.rehearse and not self.step.rehearse else 1)
                self.step_start = time.time()
                self.save(running=self.step)
                try:
                    rows = self.stand_in() if self.rehearse and not self.step.rehearse else self.step.run(self)
                except (OSError, ValueError, KeyError, IndexError) as e:  # a file a step reads is missing or torn
                    self.stop_processes()
                    rows = [self.row(self.step.name, "FAILED", "the step stopped: %s: %s" % (type(e).__name__, e))]
                for r in rows:
                    r["seconds"] = round(time.time() - self.step_start, 1)
                    self.say(r)
                self.rows += rows
                pending.pop(0)
                self.save()
        except Stopped as stop:
            self.stop_processes()
            self.rows.append(self.row(pending[0].name, "did not finish", "the check was stopped (%s) after %.0f s" %
                                      (stop, time.time() - self.step_start)))
            for s in pending[1:]:
                self.stage, self.step = s.stage, s
                self.rows.append(self.row(s.name, "not run", "the check was stopped (%s)" % stop))
            self.save()
            return 128 + getattr(signal, str(stop)).value
        return 1 if any(r["status"] in FAILING for r in self.rows) else 0

    @staticmethod
    def say(row):
        print("-> %s: %s%s" % (row["name"], row["status"], ": " + row["detail"] if row["detail"] else ""), flush=True)

    def on_signal(self, signum, frame):
        raise Stopped(signal.Signals(signum).name)

    def stand_in(self):
        """A rehearsal's stand-in: the step's estimate times the scale, slept under its scaled limit."""
        seconds = self.step.estimate * self.rehearse
        if self.opt.plant == "return-file" and self.ret and not self.planted:
            with open(os.path.join(self.ret, "planted.bin"), "wb") as f:  # a step that writes into $OUT
                f.write(b"\0" * (RETURN_FILE_BYTES + 1))
            self.planted = True
        if self.opt.plant == "big-log" and not self.planted:
            with open(self.path("planted-big.log"), "w") as f:  # a step whose log is larger than the archive
                for _ in range(30 * 1024):
                    f.write(os.urandom(512).hex() + "\n")
            self.planted = True
        rc = self.run(["sleep", "%.2f" % seconds], self.step.key + ".log")
        if rc != 0:
            return [self.failed(self.step.name, rc, self.step.key + ".log")]
        return [self.row(self.step.name, "ok", "rehearsal: a stand-in of %.1f s for the estimated %d s" %
                         (seconds, self.step.estimate), decides=False)]

    # ---- what comes back ----
    def verdict(self):
        verdict = self.verdict_on_defaults()
        return "rehearsal, not a GPU's verdict: " + verdict if self.rehearse else verdict

    def verdict_on_defaults(self):
        decided = [r for r in self.rows if r["decides"] and r["stage"] != "0"]
        failed = [r for r in decided if r["status"] in FAILING]
        if not decided:
            return "no verdict on the defaults: no correctness row in these stages"
        if [r for r in self.rows if r["stage"] == "0" and r["status"] == "FAILED"]:
            return "keep the defaults: " + "; ".join(r["name"] for r in self.rows if r["status"] == "FAILED")
        if any(r["blocks"] != "matmul 2" for r in failed):
            named = sorted(set(k for r in failed for k in re.findall(r"[a-z0-9_]+_kernel[0-9]+", r["detail"])))
            return "keep the defaults: %s did not pass%s" % ("; ".join(r["name"] for r in failed),
                                                           " (they name %s)" % " ".join(named) if named else "")
        switch = "attention kernel 3, --fast-kernels and --cuda-graph" if failed else \
            "attention kernel 3, --fast-kernels, --matmul-kernel 2 and --cuda-graph"
        unfinished = [r["name"] for r in self.rows if r["status"] in ("did not finish", "not run", "refused")]
        return ("switch the defaults: %s passed every check that ran (compare the profile and speed rows first)%s%s"
                % (switch, "; keep matmul kernel 1: " + "; ".join(r["name"] for r in failed) if failed else "",
                   "; not checked to the end: " + "; ".join(unfinished) if unfinished else ""))

    def save(self, running=None):
        """summary.txt, summary.json and the logs archive in the work folder, and the return folder's copy."""
        rows = self.rows + ([self.row(running.name, "running", "was running when this was written")] if running
                            else [])
        elapsed = time.time() - self.started
        limits = {s: sum(t.limit for t in self.steps if t.stage == s) for s in sorted({t.stage for t in self.steps})}
        done = {r["step"] for r in self.rows}
        summary = {"check": "maskprior gpu-check", "tier": self.tier, "stages": "".join(limits),
                   "budget_s": self.budget, "limits_s": limits, "gpu": self.gpu, "rehearsal": self.rehearse,
                   "commit": self.commit,
                   "started_utc": datetime.datetime.utcfromtimestamp(self.started).strftime("%Y-%m-%d %H:%M:%S"),
                   "elapsed_s": round(elapsed, 1), "complete": all(s.key in done for s in self.steps),
                   "rows": rows, "verdict": self.verdict()}
        lines = ["maskprior gpu-check, %s tier (stages %s), %s UTC, commit %s%s" % (
                    self.tier, summary["stages"], summary["started_utc"], summary["commit"],
                    ", rehearsal (no GPU; scale %g)" % self.rehearse if self.rehearse else ", " + (self.gpu or "no GPU")),
                 "budget: the steps' limits sum to %d s of %d s (%s); %.0f s so far; every step reached: %s" % (
                    sum(limits.values()), self.budget, ", ".join("%s %d" % kv for kv in limits.items()), elapsed,
                    "yes" if summary["complete"] else "no"),
                 "| stage | step | result | s |", "|---|---|---|---|"]
        lines += ["| %s | %s | %s%s | %s |" % (r["stage"], r["name"], r["status"], ": " + r["detail"] if r["detail"]
                                               else "", r.get("seconds", "")) for r in rows]
        lines.append("verdict: " + summary["verdict"])
        self.write(self.path("summary.txt"), "\n".join(lines) + "\n")
        self.write(self.path("summary.json"), json.dumps(summary, indent=1) + "\n")
        if running is None:
            self.archive()
        if self.ret:
            for name in ("summary.txt", "summary.json", "speed.txt", "tables.txt", "logs.tar.gz"):
                if os.path.exists(self.path(name)):
                    self.write(os.path.join(self.ret, name), open(self.path(name), "rb").read())
            problems = return_problems(self.ret)
            if problems and not any(r["name"] == "return folder" for r in self.rows):
                self.rows.append(dict(self.row("return folder", "FAILED", "; ".join(problems), decides=False),
                                      stage="-"))
                self.say(self.rows[-1])
                return self.save(running)

    @staticmethod
    def write(path, data):
        tmp = path + ".part"
        with open(tmp, "wb" if isinstance(data, bytes) else "w") as f:
            f.write(data)
        os.replace(tmp, path)

    def archive(self):
        """logs.tar.gz: every log, table and metrics file of the work folder, each cut to its last
        `cap` bytes, the cap halved until the archive fits its 12 MiB."""
        cap = 2 << 20
        while True:
            buffer = io.BytesIO()
            with tarfile.open(fileobj=buffer, mode="w:gz") as tar:
                for dirpath, _, filenames in os.walk(self.work):
                    for name in sorted(filenames):
                        path = os.path.join(dirpath, name)
                        if not name.endswith(ARCHIVED) or name.startswith(("summary.", "logs.tar")):
                            continue
                        data = open(path, "rb").read()
                        if len(data) > cap:
                            data = b"[the first %d bytes cut: the archive keeps %d]\n" % (len(data) - cap, cap) + \
                                data[-cap:]
                        info = tarfile.TarInfo(os.path.relpath(path, self.work))
                        info.size, info.mtime = len(data), int(time.time())
                        tar.addfile(info, io.BytesIO(data))
            if buffer.tell() <= ARCHIVE_BYTES or cap < 4096:
                break
            cap //= 2
        self.write(self.path("logs.tar.gz"), buffer.getvalue())


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--full", action="store_true", help="the full tier (stages %s)" % plan.TIERS["full"][0])
    ap.add_argument("--stages", help="these stages (letters %s) instead of a tier's" % "".join(plan.STAGES))
    ap.add_argument("--budget", type=int, help="seconds the steps' limits may sum to (default: their tiers')")
    ap.add_argument("--limit", action="append", default=[], metavar="STEP=S", help="a step's limit, in seconds")
    ap.add_argument("--plan", action="store_true", help="print the plan and the budget check, run nothing")
    ap.add_argument("--rehearse", type=float, metavar="SCALE", help="without a GPU: the emulation and stand-ins")
    ap.add_argument("--plant", choices=("return-file", "big-log"), help="a rehearsal's planted fault")
    ap.add_argument("--check-return", metavar="DIR", help="only check that DIR can come back whole")
    opt = ap.parse_args()
    if opt.check_return:
        problems = return_problems(opt.check_return)
        print("\n".join(problems) or "%s: every file comes back" % opt.check_return)
        return 1 if problems else 0
    if opt.plant and not opt.rehearse:
        ap.error("--plant is a rehearsal's")
    stages = opt.stages or plan.TIERS["full" if opt.full else "quick"][0]
    if not stages or any(s not in plan.STAGES for s in stages):
        ap.error("--stages takes letters of %s" % "".join(plan.STAGES))
    tiers = [t for t, (letters, _) in plan.TIERS.items() if set(letters) & set(stages)]
    budget = opt.budget if opt.budget is not None else sum(plan.TIERS[t][1] for t in tiers)
    steps = [s for s in plan.STEPS if s.stage in stages]
    for setting in opt.limit:
        key, _, seconds = setting.partition("=")
        step = [s for s in steps if s.key == key]
        if not step or not seconds.isdigit():
            ap.error("--limit %s: STEP=SECONDS, STEP one of %s" % (setting, " ".join(s.key for s in steps)))
        step[0].limit = int(seconds)
    limits = {s: sum(t.limit for t in steps if t.stage == s) for s in stages}
    total = sum(limits.values())
    check_line = "the limits of stages %s sum to %d s (%s) %s the budget of %d s (%s)" % (
        stages, total, ", ".join("%s %d" % kv for kv in limits.items()), "within" if total <= budget else "past",
        budget, " + ".join(tiers) + " tier" + ("s" if len(tiers) > 1 else ""))
    if opt.plan:
        print("| stage | step | estimate (s, an estimate) | limit (s) | where the estimate comes from |")
        print("|---|---|---|---|---|")
        for s in steps:
            print("| %s %s | %s | %d | %d | %s |" % (s.stage, plan.STAGES[s.stage], s.name, s.estimate, s.limit,
                                                    s.source))
        print(check_line)
        return 0 if total <= budget else 2
    check = Check(opt, steps, budget, "+".join(tiers))
    if os.path.commonpath([check.work, check.ret or "/"]) in (check.work, check.ret):
        sys.exit("gpu_check: the work folder %s and the return folder %s must not hold one another" %
                 (check.work, check.ret))
    shutil.rmtree(check.work, ignore_errors=True)
    os.makedirs(check.work)
    if check.ret:
        os.makedirs(check.ret, exist_ok=True)
    print("gpu_check: " + check_line, flush=True)
    if total > budget:
        check.stage, check.step = "0", plan.Step("0", "budget", "", 0, 0, "", None)
        check.rows.append(check.row("budget", "FAILED", "refused to start: " + check_line))
        check.steps = []
        check.save()
        print("gpu_check: refused to start: %s (--plan shows each step's limit)" % check_line, file=sys.stderr)
        return 2
    rc = check.execute()
    print(open(check.path("summary.txt")).read(), end="")
    return rc


if __name__ == "__main__":
    sys.exit(main())
