#!/usr/bin/env python3
"""make gpu-check, make gpu-check-full: what needs a GPU, planned so that one device call brings back the
whole verdict (docs/gpu.md).

    python3 tests/gpu_check.py                 # the quick tier: stages a, c, d, b, limits summing to at most 495 s
    python3 tests/gpu_check.py --full          # the full tier: stages e-h, at most 540 s
    python3 tests/gpu_check.py --stages b      # some stages again (within their tiers' budgets)
    python3 tests/gpu_check.py --steps dev-matmul,sanitizers   # some steps again
    python3 tests/gpu_check.py --plan          # the plan: each step's estimate, limit and source, and the sums
    python3 tests/gpu_check.py --preflight     # only the preflight: the GPU and the carried binaries
    GPU_CHECK_RETURN=$OUT python3 tests/gpu_check.py --deadline 600   # the device call (docs/gpu.md)
    python3 tests/gpu_check.py --rehearse 0.05 # here, without a GPU: make gpu-check-rehearsal
    python3 tests/gpu_check.py --compare RUN REFERENCE   # two runs' evaluations, as the comparisons weigh them

The stages and steps, each step's estimate of its GPU time (an estimate, with its source) and its
limit, are in tests/gpu_check_plan.py. Before anything runs, the limits of the steps to run are
summed and held to the budget (the tier's, or --budget S), and with --deadline S (the device call's
timeout_s) the limits plus the preflight's PREFLIGHT_LIMIT and STOP_MARGIN are held to S: past
either the check refuses to start, with a line naming each stage's sum. The preflight
(tests/gpu_check_preflight.py) checks the GPU and every carried binary and starts CUDA once,
outside the steps' limits; a binary that fails it blocks the steps that run it. Each step then runs
under its own limit, and with --deadline under what is left STOP_MARGIN s before the call's end,
where every process it started is stopped (each one below it too: timeout(1) takes a process group
of its own); a step cut "did not finish", one not reached "not run": rows of their own, not FAILED.
Whatever time is left then goes to a second pass, inside the same command: each step that did not
finish runs again with up to three times its limit.

Reading a step's outputs is guarded: any exception there (a NaN met as null, a torn file, a bug of
the driver's) is that step's row FAILED, with its message, and the next step runs. Each row names
the switches of the defaults it blocks when it fails (tests/gpu_check_plan.py's SWITCHES), and the
verdict keeps what a failure touches and switches what every deciding row passed; a speed row that
did not run says "not measured" and never fails a correct GPU.

Where it writes. Its work folder is its own ($GPU_CHECK_WORK, default /tmp/maskprior-gpu-check,
emptied first), never $OUT, and no step sees $OUT in its environment. With GPU_CHECK_RETURN=DIR it
keeps in DIR what a device call can bring back (tests/gpu_check_return.py), rewritten after every
step. SIGTERM or SIGINT stops the running step, marks the rest "not run" and writes them out.

make gpu-check never builds: it takes ./maskprior, tests/unit_tests and the dev/ programs built
elsewhere with `make maskprior tests/unit_tests dev ARCH=90 HOST_MARCH=x86-64-v3`, carried in the
call; a missing one is a preflight row that says so. Exit status: 0 every row passed (or was
refused, skipped or not measured), 1 some row failed or did not finish, 2 refused to start.

A rehearsal (--rehearse SCALE, no GPU needed) runs the same plan through the same driver: the steps
that can run their own command lines on the emulation do (./maskprior-emulated, tests/emulated_tests
on two test files, dev/*-emulated, tiny shapes), the others are stand-ins that sleep their estimate
times SCALE under their limit times SCALE. --plant plants a fault for tests/test_gpu_check.sh
(tests/gpu_check_plants.py).
"""
import argparse
import datetime
import json
import os
import re
import shutil
import signal
import subprocess
import sys
import time
import traceback

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import gpu_check_plan as plan  # noqa: E402
import gpu_check_plants as plants  # noqa: E402
import gpu_check_preflight as preflight  # noqa: E402
import gpu_check_read as read  # noqa: E402
import gpu_check_return as returned  # noqa: E402

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
FAILING = ("FAILED", "did not finish")  # the statuses that fail the check
UNDECIDED = ("did not finish", "not run")  # a deciding row so leaves what it blocks undecided
# Seconds before the call's end (--deadline) at which the steps are stopped: SIGTERM, 10 s for their
# processes to end (a run writes its checkpoint), SIGKILL, 5 s; the last summary and archive; and
# the interpreter's start and the tool's own seconds
STOP_MARGIN = 30
SECOND_PASS = 3  # a step run again gets up to this many times its limit


class Stopped(Exception):
    """SIGTERM, SIGINT or SIGHUP arrived: the check stops where it is."""


def descendants(pids):
    """pids and every process below them (/proc's parent links), taken at once"""
    pids, children = list(pids), {}
    for entry in os.listdir("/proc") if pids else []:
        if not entry.isdigit():
            continue
        try:
            fields = open("/proc/%s/stat" % entry).read().rsplit(")", 1)[1].split()
        except (OSError, IndexError):
            continue
        if fields[0] != "Z":
            children.setdefault(int(fields[1]), []).append(int(entry))
    found, todo = set(), pids
    while todo:
        pid = todo.pop()
        if pid not in found:
            found.add(pid)
            todo += children.get(pid, [])
    return found


def alive(pid):
    """whether the process runs (a zombie does not)"""
    try:
        return open("/proc/%d/stat" % pid).read().rsplit(")", 1)[1].split()[0] != "Z"
    except (OSError, IndexError):
        return False


class Check:
    def __init__(self, opt, steps, budget, tier):
        self.opt, self.steps, self.budget, self.tier = opt, steps, budget, tier
        self.rehearse = opt.rehearse
        self.work = os.path.abspath(os.environ.get("GPU_CHECK_WORK", "/tmp/maskprior-gpu-check"))
        self.ret = os.path.abspath(os.environ["GPU_CHECK_RETURN"]) if os.environ.get("GPU_CHECK_RETURN") else None
        self.env = {k: v for k, v in os.environ.items() if k not in ("OUT", "GPU_CHECK_RETURN")}
        self.env["PYTHONUNBUFFERED"] = "1"
        self.python = self.python_with("numpy" if self.rehearse else "torch")
        self.env["MASKPRIOR_PYTHON"] = self.python
        self.rows, self.procs = [], []
        self.plants = plants.Plants(self, opt.plant or [])
        self.stage, self.step, self.limit, self.pass_ = "0", plan.Step("0", "preflight", "preflight", 0, 0, "",
                                                                       None, [], []), 0, 1
        self.called = self.started = self.step_start = time.time()
        self.stop_at = self.called + opt.deadline - STOP_MARGIN if opt.deadline else None
        self.cut_by_deadline = False
        self.gpu, self.commit = "", "unknown (no binary checked)"
        self.paths = dict(preflight.binaries(self.rehearse))
        self.paths["cpu"] = "maskprior"

    # ---- what the steps call ----
    def path(self, name):
        return os.path.join(self.work, name)

    def open_output(self, path):
        """A file a step left, opened for reading (where a rehearsal's plant may strike first)"""
        path = path if os.path.isabs(path) else self.path(path)
        self.plants.reading(path)
        return open(path, errors="replace")

    def read(self, log):
        """A log's text; "" when it is not there"""
        try:
            with self.open_output(log) as f:
                return f.read()
        except OSError:
            return ""

    def binary_key(self, use):
        """A step's use ("cpu": the CPU runs' ./maskprior) as the preflight's key"""
        return (preflight.CPU if self.rehearse else "maskprior") if use == "cpu" else use

    def binary(self, key):
        """The program to run for a binary's key: ./maskprior, in a rehearsal ./maskprior-emulated, or a
        planted copy"""
        return self.plants.binaries.get(key) or "./" + self.paths[key]

    def cmd(self, key, args):
        """The command line of a carried program with args (a rehearsal's plant may wrap it)"""
        return self.plants.wrap(key, [self.binary(key)] + list(args))

    def row(self, name, status, detail="", decides=None, blocks=None):
        """One row of the summary: decides (the verdict reads it) by default in the preflight and in
        stages a, c and d; blocks: what its failure keeps (the step's, by default)"""
        return {"stage": self.stage, "step": self.step.key, "name": name, "status": status, "detail": detail,
                "decides": self.stage in "0acd" if decides is None else decides,
                "blocks": list(self.step.blocks if blocks is None else blocks)}

    def failed(self, name, rc, log, what="", decides=None, blocks=None):
        """The row of a command that did not succeed: did not finish at its limit, or FAILED with its tail."""
        if rc in (124, 137) and self.cut_by_deadline:
            return self.row(name, "did not finish", "stopped %d s before the call's deadline (--deadline), with %.0f s "
                            "of its limit left (%s)" % (STOP_MARGIN, self.step_start + self.step_limit - time.time(),
                                                       log), decides, blocks)
        if rc in (124, 137):
            return self.row(name, "did not finish", "stopped at its %g s limit (%s)" % (self.limit, log), decides,
                            blocks)
        tail = " | ".join(line for line in self.read(log).strip().split("\n")[-3:] if line.strip())
        return self.row(name, "FAILED", "%sexit %d: %s" % (what + ": " if what else "", rc, tail[-400:]), decides,
                        blocks)

    def isolated_row(self, name, log, rc):
        """The row of a tests/gpu_tests_isolated.sh run (exit 0 passed, 1 failed or crashed, 3 did not
        finish in its --total, 77 every case skipped, 124 stopped at the step's limit)."""
        summary = (re.findall(r"^gpu_tests_isolated: (.*)$", self.read(log), re.M) or ["no summary"])[-1]
        if rc in (0, 77) and not (self.gpu or self.rehearse):  # the cases that need a GPU skipped themselves
            return self.row(name, "FAILED", "no GPU: its GPU cases skipped (%s)" % summary)
        if rc == 0:
            return self.row(name, "ok", summary)
        if rc in (3, 124, 137):
            return self.row(name, "did not finish", summary)
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
            return self.row(name, "FAILED", last, decides=True, blocks=["matmul 2"])
        why = "stopped at its %g s limit" % self.limit if rc in (124, 137) else "exit %d: %s" % (rc, last[-300:])
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

    def run_for(self, cmd, log, seconds, env=None):
        """cmd as run() does, under `seconds` of its own (the preflight's commands)"""
        return self.run_parallel([(cmd, log)], env, time.time() + max(0.0, seconds))[0]

    def run_parallel(self, jobs, env=None, deadline=None):
        """[(cmd, log)] at once, each under the step's limit (or until `deadline`); their exit statuses."""
        deadline = deadline or self.step_start + self.limit
        for cmd, log in jobs:
            with open(self.path(log), "w") as out:
                try:
                    self.procs.append(subprocess.Popen(cmd, cwd=ROOT, env=dict(self.env, **(env or {})), stdout=out,
                                                       stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL,
                                                       preexec_fn=os.setpgrp))
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
        """Every process the step started, and every one below them (timeout(1) takes a process group of
        its own): SIGTERM (a run writes its checkpoint), then SIGKILL 10 s later to those left."""
        pids = descendants(p.pid for p in self.procs if p.poll() is None)
        for sig, wait in ((signal.SIGTERM, 10), (signal.SIGKILL, 5)):
            pids = {pid for pid in descendants(pids) if alive(pid)}
            for pid in pids:
                try:
                    os.kill(pid, sig)
                except ProcessLookupError:
                    pass
            end = time.time() + wait
            while time.time() < end and any(alive(pid) for pid in pids):
                for p in self.procs:
                    p.poll()  # our own children, reaped
                time.sleep(0.1)
        for p in self.procs:
            p.poll()
        self.procs = []

    def sanitizer(self):
        if self.rehearse:
            return "env"
        found = shutil.which("compute-sanitizer")
        fallback = os.path.join(os.environ.get("CUDA_HOME", "/usr/local/cuda"), "bin", "compute-sanitizer")
        return found or (fallback if os.access(fallback, os.X_OK) else None)

    @staticmethod
    def python_with(module):
        """$MASKPRIOR_PYTHON, else the first python3 that has `module`: PyTorch for the benchmarks (on the
        GPU machine, its own python3), NumPy for a rehearsal's data/prepare_text.py"""
        for p in (os.environ.get("MASKPRIOR_PYTHON", ""), "python3", "/usr/bin/python3"):
            if p and subprocess.run([p, "-c", "import " + module], capture_output=True).returncode == 0:
                return p
        return "python3"

    # ---- the flight ----
    def execute(self, preflight_only=False):
        for sig in (signal.SIGTERM, signal.SIGINT, signal.SIGHUP):
            signal.signal(sig, self.on_signal)
        uses = {}
        for s in self.steps:
            for use in s.uses:
                uses.setdefault(self.binary_key(use), set()).update(s.blocks)
        try:
            self.plants.before_preflight()
            rows, self.bad = preflight.preflight(self, uses)
            for r in rows:
                self.say(r)
            self.rows += rows
            self.save()
            if preflight_only:
                return 1 if any(r["status"] in FAILING for r in rows) else 0
            self.started = time.time()
            for step in self.steps:
                self.fly(step)
            for step in self.steps:  # the second pass, in the time left before the deadline
                left = self.stop_at - time.time() if self.stop_at else 0
                limit = min(left, SECOND_PASS * self.scaled(step))
                if limit > self.scaled(step) and any(r["status"] == "did not finish" for r in self.latest()
                                                     if r["step"] == step.key):
                    self.fly(step, limit, 2)
        except Stopped as stop:
            self.stop_processes()
            why = "the check was stopped (%s)" % stop
            self.rows.append(dict(self.row(self.step.name, "did not finish", "%s after %.0f s" % (
                why, time.time() - self.step_start)), **{"pass": self.pass_}))
            later = self.steps[self.steps.index(self.step) + 1:] if self.step in self.steps else self.steps
            for s in later if self.pass_ == 1 else []:
                self.stage, self.step = s.stage, s
                self.rows.append(dict(self.row(s.name, "not run", why), **{"pass": 1}))
            self.save()
            return 128 + getattr(signal, str(stop)).value
        return 1 if any(r["status"] in FAILING for r in self.latest()) else 0

    def scaled(self, step):
        return step.limit * (self.rehearse if self.rehearse and not step.rehearse else 1)

    def fly(self, step, limit=None, pass_=1):
        """One step under its limit (or `limit`), its rows kept and written out"""
        self.step, self.stage, self.pass_ = step, step.stage, pass_
        self.step_limit = limit or self.scaled(step)
        blocked = sorted({self.binary_key(u) for u in step.uses} & self.bad)
        self.step_start = time.time()
        left = self.stop_at - self.step_start if self.stop_at else self.step_limit
        if blocked:
            rows = [self.row(step.name, "not run", "blocked: %s failed the preflight (its row decides)" %
                             ", ".join(blocked), decides=False)]
        elif left < 1:
            rows = [self.row(step.name, "not run", "no time left before the call's deadline (--deadline)")]
        else:
            self.limit, self.cut_by_deadline = min(self.step_limit, left), left < self.step_limit
            self.save(running=step)
            try:
                self.plants.step_starts()
                rows = self.plants.stand_in() if self.rehearse and not step.rehearse else step.run(self)
            except Stopped:
                raise
            except Exception as e:  # the driver's fault, not a finding about the GPU: the flight goes on
                self.stop_processes()
                at = traceback.extract_tb(e.__traceback__)[-1]
                rows = [self.row(step.name, "FAILED", "running it or reading its outputs raised %s: %s (at %s:%d: "
                                 "the driver's fault, not the GPU's)" % (type(e).__name__, e,
                                                                        os.path.basename(at.filename), at.lineno))]
        for r in rows:
            r["seconds"], r["pass"] = round(time.time() - self.step_start, 1), pass_
            self.say(r)
        self.rows += rows
        self.save()

    @staticmethod
    def named(row):
        return row["name"] + (" (second pass)" if row.get("pass") == 2 else "")

    def say(self, row):
        print("-> %s: %s%s" % (self.named(row), row["status"], ": " + row["detail"] if row["detail"] else ""),
              flush=True)

    def on_signal(self, signum, frame):
        raise Stopped(signal.Signals(signum).name)

    # ---- what comes back ----
    def latest(self):
        """The rows that stand, in the plan's order: a step's second pass in place of its first, but for
        what the first pass found FAILED (a finding stays found)"""
        again = {r["step"] for r in self.rows if r.get("pass") == 2}
        order = {s.key: i for i, s in enumerate(self.steps)}
        return sorted([r for r in self.rows if r["step"] not in again or r.get("pass") == 2 or
                       r["status"] == "FAILED"], key=lambda r: order.get(r["step"], -1))

    def verdict(self):
        verdict = self.verdict_on_defaults()
        return "rehearsal, not a GPU's verdict: " + verdict if self.rehearse else verdict

    def verdict_on_defaults(self):
        """What to switch and what to keep: a switch is kept where a deciding row that blocks it FAILED,
        undecided where one did not finish or run, switched where every one passed"""
        deciding = [r for r in self.latest() if r["decides"]]
        if not [r for r in deciding if r["stage"] != "0"]:
            return "no verdict on the defaults: no correctness row in these stages"
        failed = [r for r in deciding if r["status"] == "FAILED"]
        names = lambda rows: "; ".join(r["name"] for r in rows)
        base = [r for r in failed if plan.DEFAULTS in r["blocks"]]
        if base:
            named = sorted(set(k for r in base for k in re.findall(r"[a-z0-9_]+_kernel[0-9]+", r["detail"])))
            return "keep the defaults: what the default kernels' checks rest on did not pass: %s%s" % (
                names(base), " (they name %s)" % " ".join(named) if named else "")
        switch, keep, undecided, open_rows = [], [], [], []
        for key, (flag, kept) in plan.SWITCHES.items():
            against = [r for r in failed if key in r["blocks"]]
            unfinished = [r for r in deciding if r["status"] in UNDECIDED and
                          (key in r["blocks"] or plan.DEFAULTS in r["blocks"])]
            if against:
                keep.append("keep %s: %s" % (kept, names(against)))
            elif unfinished:
                undecided.append(flag)
                open_rows += [r for r in unfinished if r not in open_rows]
            else:
                switch.append(flag)
        parts = ["switch the defaults to %s: every row that checks %s passed (compare the profile and speed rows "
                 "first)" % (", ".join(switch), "it" if len(switch) == 1 else "them") if switch else "switch nothing"]
        parts += keep
        if undecided:
            parts.append("undecided on %s: %s did not finish or run" % (", ".join(undecided), names(open_rows)))
        alone = [r for r in failed if not r["blocks"]]
        if alone:
            parts.append("failed, blocking no switch: " + names(alone))
        return "; ".join(parts)

    def save(self, running=None):
        """summary.txt, summary.json and the logs archive in the work folder, and the return folder's copy."""
        rows = self.rows + ([self.row(running.name, "running", "was running when this was written")] if running
                            else [])
        limits = {}
        for s in self.steps:
            limits[s.stage] = limits.get(s.stage, 0) + s.limit
        done = {r["step"] for r in self.rows}
        started = datetime.datetime.fromtimestamp(self.called, datetime.timezone.utc)
        summary = {"check": "maskprior gpu-check", "tier": self.tier, "stages": "".join(limits),
                   "budget_s": self.budget, "limits_s": limits, "deadline_s": self.opt.deadline, "gpu": self.gpu,
                   "rehearsal": self.rehearse, "commit": self.commit,
                   "started_utc": started.strftime("%Y-%m-%d %H:%M:%S"),
                   "elapsed_s": round(time.time() - self.called, 1),
                   "complete": all(s.key in done for s in self.steps), "rows": rows, "verdict": self.verdict()}
        lines = ["maskprior gpu-check, %s tier (stages %s), %s UTC, commit %s%s" % (
                    self.tier, summary["stages"], summary["started_utc"], summary["commit"],
                    ", rehearsal (no GPU; scale %g)" % self.rehearse if self.rehearse else
                    ", " + (self.gpu or "no GPU")),
                 "budget: the steps' limits sum to %d s of %d s (%s)%s; %.0f s so far; every step reached: %s" % (
                    sum(limits.values()), self.budget, ", ".join("%s %d" % kv for kv in limits.items()),
                    "; the call's deadline %d s, the steps stopped %d s before it" % (self.opt.deadline, STOP_MARGIN)
                    if self.opt.deadline else "", summary["elapsed_s"], "yes" if summary["complete"] else "no"),
                 "| stage | step | result | blocks when failed | s |", "|---|---|---|---|---|"]
        lines += ["| %s | %s | %s%s | %s | %s |" % (
            r["stage"], self.named(r), r["status"], ": " + r["detail"] if r["detail"] else "",
            ", ".join(r["blocks"]) if r["decides"] else "(decides nothing)", r.get("seconds", "")) for r in rows]
        lines.append("verdict: " + summary["verdict"])
        returned.write(self.path("summary.txt"), "\n".join(lines) + "\n")
        returned.write(self.path("summary.json"), json.dumps(summary, indent=1) + "\n")
        if running is None:
            returned.write(self.path("logs.tar.gz"), returned.archive(self.work))
        if self.ret:
            problems = returned.publish(self.work, self.ret)
            if problems and not any(r["name"] == "return folder" for r in self.rows):
                self.rows.append(dict(self.row("return folder", "FAILED", "; ".join(problems), decides=False),
                                      stage="-", step="-"))
                self.say(self.rows[-1])
                return self.save(running)


def compare(run, reference):
    """--compare: two runs' evaluations, as make run's comparisons weigh them"""
    class Files:
        open_output = staticmethod(open)
    finding, worst, after = read.compare_logs(Files, os.path.join(run, "log.jsonl"),
                                              os.path.join(reference, "log.jsonl"), plan.DECIDING[0],
                                              plan.TOLERANCE)
    print("the first %d steps: the largest difference %.3g of the tolerance (%g + %g |reference|)%s" % (
        plan.DECIDING[0], worst, plan.TOLERANCE[0], plan.TOLERANCE[1],
        "; after them: %.3g times it (step %s, %s)" % after if after[1] is not None else ""))
    if finding:
        print("FAILED: " + finding)
    return 1 if finding else 0


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--full", action="store_true", help="the full tier (stages %s)" % plan.TIERS["full"][0])
    ap.add_argument("--stages", help="these stages (letters %s) instead of a tier's" % "".join(plan.STAGES))
    ap.add_argument("--steps", metavar="KEY,...", help="these steps alone (their keys: --plan's third column)")
    ap.add_argument("--budget", type=int, help="seconds the steps' limits may sum to (default: their tiers')")
    ap.add_argument("--limit", action="append", default=[], metavar="STEP=S", help="a step's limit, in seconds")
    ap.add_argument("--deadline", type=int, metavar="S", help="the call's limit in seconds (the device tool's "
                    "timeout_s): the steps stop %d s before it" % STOP_MARGIN)
    ap.add_argument("--plan", action="store_true", help="print the plan and the budget check, run nothing")
    ap.add_argument("--preflight", action="store_true", help="only the preflight: the GPU and the carried binaries")
    ap.add_argument("--rehearse", type=float, metavar="SCALE", help="without a GPU: the emulation and stand-ins")
    ap.add_argument("--plant", action="append", metavar="FAULT", help="a rehearsal's planted fault: %s" %
                    ", ".join(plants.FAULTS))
    ap.add_argument("--check-return", metavar="DIR", help="only check that DIR can come back whole")
    ap.add_argument("--compare", nargs=2, metavar=("RUN", "REFERENCE"), help="only compare two run folders' "
                    "log.jsonl as the GPU-vs-CPU steps do (the first %d steps decide)" % plan.DECIDING[0])
    opt = ap.parse_args()
    if opt.compare:
        return compare(*opt.compare)
    if opt.check_return:
        problems = returned.return_problems(opt.check_return)
        print("\n".join(problems) or "%s: every file comes back" % opt.check_return)
        return 1 if problems else 0
    if opt.plant and not opt.rehearse:
        ap.error("--plant is a rehearsal's")
    for fault in opt.plant or []:
        problem = plants.problem(fault)
        if problem:
            ap.error("--plant %s: %s" % (fault, problem))
    stages = opt.stages or plan.TIERS["full" if opt.full else "quick"][0]
    if not stages or any(s not in plan.STAGES for s in stages):
        ap.error("--stages takes letters of %s" % "".join(plan.STAGES))
    keys = opt.steps.split(",") if opt.steps else []
    if [k for k in keys if k not in [s.key for s in plan.STEPS]]:
        ap.error("--steps takes keys of %s" % ",".join(s.key for s in plan.STEPS))
    if keys:
        stages = "".join(dict.fromkeys(s.stage for s in plan.STEPS if s.key in keys))
    tiers = [t for t, (letters, _) in plan.TIERS.items() if set(letters) & set(stages)]
    budget = opt.budget if opt.budget is not None else sum(plan.TIERS[t][1] for t in tiers)
    steps = [s for s in plan.STEPS if (s.key in keys if keys else s.stage in stages)]
    for setting in opt.limit:
        key, _, seconds = setting.partition("=")
        step = [s for s in steps if s.key == key]
        if not step or not seconds.isdigit():
            ap.error("--limit %s: STEP=SECONDS, STEP one of %s" % (setting, " ".join(s.key for s in steps)))
        step[0].limit = int(seconds)
    limits = {}
    for s in steps:
        limits[s.stage] = limits.get(s.stage, 0) + s.limit
    total = sum(limits.values())
    order = "".join(limits)
    lines = ["the limits of stages %s sum to %d s (%s) %s the budget of %d s (%s)" % (
        order, total, ", ".join("%s %d" % kv for kv in limits.items()), "within" if total <= budget else "past",
        budget, " + ".join(tiers) + " tier" + ("s" if len(tiers) > 1 else ""))]
    fits = total <= budget
    if opt.deadline:
        need = total + preflight.PREFLIGHT_LIMIT + STOP_MARGIN
        fits = fits and need <= opt.deadline
        lines.append("with the preflight's %d s and the %d s stop margin: %d s, %s the call's deadline of %d s" % (
            preflight.PREFLIGHT_LIMIT, STOP_MARGIN, need, "within" if need <= opt.deadline else "past", opt.deadline))
    if opt.plan:
        print("| stage | step | key | estimate (s, an estimate) | limit (s) | where the estimate comes from |")
        print("|---|---|---|---|---|---|")
        for s in steps:
            print("| %s %s | %s | %s | %d | %d | %s |" % (s.stage, plan.STAGES[s.stage], s.name, s.key, s.estimate,
                                                         s.limit, s.source))
        print("\n".join(lines))
        return 0 if fits else 2
    check = Check(opt, steps, budget, "+".join(tiers))
    if os.path.commonpath([check.work, check.ret or "/"]) in (check.work, check.ret):
        sys.exit("gpu_check: the work folder %s and the return folder %s must not hold one another" %
                 (check.work, check.ret))
    shutil.rmtree(check.work, ignore_errors=True)
    os.makedirs(check.work)
    if check.ret:
        os.makedirs(check.ret, exist_ok=True)
    print("gpu_check: " + "; ".join(lines), flush=True)
    if not fits and not opt.preflight:
        check.step = plan.Step("0", "budget", "budget", 0, 0, "", None, [], [])
        check.rows.append(check.row("budget", "FAILED", "refused to start: " + "; ".join(lines)))
        check.steps = []
        check.save()
        print("gpu_check: refused to start: %s (--plan shows each step's limit)" % "; ".join(lines), file=sys.stderr)
        return 2
    rc = check.execute(preflight_only=opt.preflight)
    print(open(check.path("summary.txt")).read(), end="")
    return rc


if __name__ == "__main__":
    sys.exit(main())
