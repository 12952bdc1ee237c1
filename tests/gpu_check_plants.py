"""A rehearsal's stand-ins and planted faults (tests/gpu_check.py --rehearse SCALE --plant FAULT ...;
tests/test_gpu_check.sh flies them). Each plant makes the rehearsal meet, on the emulation, a fault
that a GPU machine or the driver itself can give, so that the test sees the driver go on, the row
say what it found, and the verdict keep only what the fault touches:
  read-error:STEP  reading STEP's outputs raises an exception the driver does not foresee
                   (RuntimeError), at the first file it reads
  nan-eval:STEP[@TAG]  STEP's runs (with @TAG, its GPU runs whose --out folder names TAG) end in a
                   NaN evaluation: their last row of log.jsonl, and metrics.json, hold null in place
                   of every number (the program writes NaN so, run/report.cuh)
  stale:BINARY     a carried BINARY (tests/gpu_check_preflight.py's CARRIED) is a copy whose
                   --version names commit 0000000 (a stale build's, bytes patched in a copy)
  cublaslt         cuBLASLt turns every product down (MASKPRIOR_EMU_CUBLASLT=not-supported, for
                   every step), so matmul version 2 falls back to version 1 wherever it runs
  slow-start       the flight's first CUDA process starts SLOW_START s late (a cold driver and disk)
  return-file      the first step writes a 16 MiB + 1 file into the return folder
  big-log          the first step's log is larger than the logs archive
"""
import json
import os
import shutil
import subprocess

import gpu_check_plan as plan
from gpu_check_preflight import CARRIED, ROOT, parse_version
from gpu_check_return import RETURN_FILE_BYTES

FAULTS = ("read-error:STEP", "nan-eval:STEP[@TAG]", "stale:BINARY", "cublaslt", "slow-start", "return-file", "big-log")
SLOW_START = 4  # s


def problem(fault):
    """Why --plant FAULT is not one, or "" """
    kind, _, what = fault.partition(":")
    if kind in ("read-error", "nan-eval"):
        step = what.split("@")[0] if kind == "nan-eval" else what
        return "" if step in [s.key for s in plan.STEPS] else "STEP one of %s" % " ".join(s.key for s in plan.STEPS)
    if kind == "stale":
        return "" if what in CARRIED else "BINARY one of %s" % " ".join(CARRIED)
    return "" if fault in FAULTS else "one of %s" % ", ".join(FAULTS)


def nan_everywhere(value, keep=("step", "steps", "seconds")):
    """A row of log.jsonl or metrics.json with null in place of each number it reports"""
    if isinstance(value, dict):
        return {k: v if k in keep else nan_everywhere(v) for k, v in value.items()}
    if isinstance(value, list):
        return [nan_everywhere(v) for v in value]
    return None if isinstance(value, float) else value


class Plants:
    def __init__(self, check, faults):
        self.check, self.faults = check, faults
        self.targets = lambda kind: {f.split(":", 1)[1] for f in faults if f.startswith(kind + ":")}
        self.nan = dict((t.split("@") + [""])[:2] for t in self.targets("nan-eval"))  # step: the runs' TAG
        self.binaries = {}  # a stale plant's key: its copy
        self.gpu_runs = set()  # the --out folders of nan-eval's GPU runs
        self.planted = set()
        if "cublaslt" in faults:
            check.env["MASKPRIOR_EMU_CUBLASLT"] = "not-supported"

    def before_preflight(self):
        """stale:BINARY: a copy of the binary with its commit's bytes patched to 0000000"""
        for key in sorted(self.targets("stale")):
            source = os.path.join(ROOT, self.check.paths[key])
            commit = parse_version(subprocess.run([source, "--version"], capture_output=True, text=True).stdout)[0]
            stale = "0" * len(commit.split("-")[0]) + commit[len(commit.split("-")[0]):]
            data = open(source, "rb").read()
            if not commit or commit.encode() + b"\0" not in data:
                raise SystemExit("gpu_check: --plant stale:%s: no commit %s in %s" % (key, commit, source))
            copy = self.check.path("planted-" + os.path.basename(source))
            open(copy, "wb").write(data.replace(commit.encode() + b"\0", stale.encode() + b"\0"))
            shutil.copymode(source, copy)
            self.binaries[key] = copy

    def reading(self, path):
        """A step is about to read `path`: read-error raises; nan-eval turns the run's last evaluation NaN"""
        step = self.check.step.key
        if step in self.targets("read-error"):
            raise RuntimeError("planted: reading %s raised" % os.path.basename(path))
        runs = os.path.dirname(path) in self.gpu_runs if self.nan.get(step) else step in self.nan
        if not runs or not path.endswith(("log.jsonl", "metrics.json")) or not os.path.exists(path):
            return
        if (path, os.stat(path).st_mtime_ns) in self.planted:  # planted already, and not written again since
            return
        if path.endswith("log.jsonl"):
            lines = [line for line in open(path).read().split("\n") if line.strip()]
            lines[-1] = json.dumps(nan_everywhere(json.loads(lines[-1])))
            open(path, "w").write("\n".join(lines) + "\n")
        else:
            json.dump(nan_everywhere(json.load(open(path))), open(path + ".part", "w"))
            os.replace(path + ".part", path)
        self.planted.add((path, os.stat(path).st_mtime_ns))

    def wrap(self, key, argv):
        """nan-eval: notes the GPU run's folder; slow-start: the first CUDA program of the flight
        (whichever it is) sleeps SLOW_START s first"""
        step = self.check.step.key
        if step in self.nan and "--out" in argv and self.nan[step] in argv[argv.index("--out") + 1]:
            self.gpu_runs.add(argv[argv.index("--out") + 1])
        if "slow-start" not in self.faults or key == "cpu":
            return argv
        return ["sh", "-c", 'mkdir "$0" 2>/dev/null && sleep %d; exec "$@"' % SLOW_START,
                self.check.path("first-cuda-start")] + argv

    def step_starts(self):
        """return-file and big-log, in the first step that runs"""
        check = self.check
        if "return-file" in self.faults and check.ret and "return-file" not in self.planted:
            with open(os.path.join(check.ret, "planted.bin"), "wb") as f:  # a step that writes into $OUT
                f.write(b"\0" * (RETURN_FILE_BYTES + 1))
            self.planted.add("return-file")
        if "big-log" in self.faults and "big-log" not in self.planted:
            with open(check.path("planted-big.log"), "w") as f:  # a step whose log is larger than the archive
                for _ in range(30 * 1024):
                    f.write(os.urandom(512).hex() + "\n")
            self.planted.add("big-log")

    def stand_in(self):
        """A rehearsal's stand-in for a step that needs a GPU's PyTorch: the step's estimate times the
        scale, slept under its scaled limit; its log read as a step reads one"""
        check = self.check
        seconds = check.step.estimate * check.rehearse
        log = check.step.key + ".log"
        rc = check.run(["sleep", "%.2f" % seconds], log)
        check.read(log)
        if rc != 0:
            return [check.failed(check.step.name, rc, log)]
        return [check.row(check.step.name, "ok", "rehearsal: a stand-in of %.1f s for the estimated %d s" %
                          (seconds, check.step.estimate), decides=False)]
