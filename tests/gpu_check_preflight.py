"""make gpu-check's preflight (tests/gpu_check.py, docs/gpu.md): what was carried to the GPU machine
is checked, and CUDA started once, before the steps' clock starts and outside their limits.

  - the GPU (nvidia-smi's name, driver and memory);
  - each carried binary (CARRIED): there and executable; its --version (its commit and the settings
    it was built with) says CUDA=1, ARCH=90 and HOST_MARCH=x86-64-v3 (DEVICE_BUILD: `native` is the
    build machine's CPU, and dies of SIGILL on another); the binaries name one commit (the device
    has no .git: the commit of the summary is theirs), and where git answers, a commit this
    repository has; `ldd` finds every library it needs;
  - the warm-up: one tiny GPU run, so that the first process's costs (a cold driver, libcublasLt
    read from a cold disk) fall outside every step's limit; its seconds are a row.
A binary's failing row blocks the steps that run it: they are "not run", and the verdict keeps
what they would have checked. A missing binary's row says which make line builds it: make
gpu-check never builds on the device (no nvcc headers there, and minutes of nvcc).

In a rehearsal (--rehearse) the binaries are the emulated twins that make check builds here
(./maskprior-emulated, tests/emulated_tests, dev/*-emulated) and ./maskprior, which runs the CPU
side of the comparisons; the settings they must carry are this machine's build's (.build-settings),
and binaries of one tree may name different commits (make rebuilds only what changed), so there
only a commit this repository does not have fails.
"""
import functools
import os
import re
import shutil
import subprocess
import time

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
CARRIED = ("maskprior", "tests/unit_tests", "dev/attention_forward", "dev/attention_backward", "dev/matmul")
TWINS = {"maskprior": "maskprior-emulated", "tests/unit_tests": "tests/emulated_tests"}  # dev/X: dev/X-emulated
CPU = "maskprior, the CPU side"  # the CPU runs of the comparisons: ./maskprior (on the device, the GPU build)
DEVICE_BUILD = {"CUDA": "1", "ARCH": "90", "HOST_MARCH": "x86-64-v3"}
BUILD_LINE = "make maskprior tests/unit_tests dev ARCH=90 HOST_MARCH=x86-64-v3"
PREFLIGHT_LIMIT = 75  # s: the whole preflight; each --version and ldd gets at most COMMAND_LIMIT, the warm-up the rest
COMMAND_LIMIT = 10
WARMUP = "--task add3 --max-test 32 --width 16 --layers 1 --heads 2 --head-size 8 --mlp 16 --batch 32 --steps 1 " \
    "--eval-every 1".split()


def binaries(rehearse):
    """[(key, path)]: each carried binary (in a rehearsal its emulated twin) and the CPU runs' ./maskprior"""
    if not rehearse:
        return [(name, name) for name in CARRIED]
    twin = lambda name: TWINS.get(name, name + "-emulated")
    return [(name, twin(name)) for name in CARRIED] + [(CPU, "maskprior")]


def parse_version(text):
    """(commit, {setting: value}) from a --version's lines "NAME COMMIT" and "built by ...: K=V K=V"."""
    lines = text.strip().split("\n")
    first = lines[0].split() if lines and lines[0].strip() else []
    built = [line for line in lines if line.startswith("built by ")]
    settings = dict(w.split("=", 1) for w in built[0].rsplit(": ", 1)[-1].split() if "=" in w) if built else {}
    return (first[1] if len(first) == 2 else None), settings


def expected_build(rehearse):
    """The settings every binary must carry: DEVICE_BUILD's, or in a rehearsal this machine's build's"""
    if not rehearse:
        return DEVICE_BUILD
    try:
        return dict(w.split("=", 1) for w in open(os.path.join(ROOT, ".build-settings")).read().split() if "=" in w)
    except OSError:
        return {}


def git(*args):
    """git's answer in this tree, or None where there is no git or no .git (the device)"""
    try:
        run = subprocess.run(["git"] + list(args), cwd=ROOT, capture_output=True, text=True, timeout=COMMAND_LIMIT)
    except (OSError, subprocess.TimeoutExpired):
        return None
    return run.stdout.strip() if run.returncode == 0 else None


@functools.lru_cache(maxsize=None)
def tree_commit():
    return git("describe", "--always", "--dirty")


@functools.lru_cache(maxsize=None)
def known_commit(commit):
    """Whether this repository has the commit a binary names ("9a7d14d-dirty": 9a7d14d)"""
    return git("cat-file", "-e", commit.split("-dirty")[0] + "^{commit}") is not None


def binary_row(check, key, path, expected, end):
    """The row of one binary, and its (commit, settings) when its --version answered"""
    name = "binary " + key
    here = os.path.join(ROOT, path)
    if not os.access(here, os.X_OK):
        how = "make gpu-check-rehearsal builds it" if check.rehearse else \
            "build it where nvcc is with `%s` and carry it (docs/gpu.md)" % BUILD_LINE
        return check.row(name, "FAILED", "missing: %s" % how), None
    log = "preflight-%s.log" % re.sub(r"[^A-Za-z0-9_.-]", "_", key)
    rc = check.run_for([check.binary(key), "--version"], log, min(COMMAND_LIMIT, end - time.time()))
    commit, settings = parse_version(check.read(log))
    if rc != 0 or commit is None:
        return check.failed(name, rc, log, "its --version"), None
    problems = ["%s=%s, not %s" % (k, settings.get(k, "(none)"), v) for k, v in sorted(expected.items())
                if settings.get(k) != v]
    if commit != "unknown" and tree_commit() is not None and not known_commit(commit):
        problems.append("built at %s, a commit this repository does not have (a stale or foreign build)" % commit)
    missing = libraries_missing(check, key, path, end)
    if missing:
        problems.append(missing)
    detail = "commit %s, %s" % (commit, " ".join("%s=%s" % kv for kv in sorted(settings.items())))
    if problems:
        fix = "rebuild with `make -B ...`" if check.rehearse else "rebuild with `%s` and carry it" % BUILD_LINE
        return check.row(name, "FAILED", "; ".join(problems) + " (%s): %s" % (fix, detail)), (commit, settings)
    return check.row(name, "ok", detail), (commit, settings)


def libraries_missing(check, key, path, end):
    """ldd's "not found" libraries of the binary, as a problem; "" when it finds every one (or no ldd)"""
    if not shutil.which("ldd"):
        return ""
    log = "preflight-%s-ldd.log" % re.sub(r"[^A-Za-z0-9_.-]", "_", key)
    rc = check.run_for(["ldd", check.binary(key)], log, min(COMMAND_LIMIT, end - time.time()))
    missing = sorted(set(re.findall(r"^\s*(\S+) => not found", check.read(log), re.M)))
    if missing:
        return "ldd finds no " + ", ".join(missing)
    return "" if rc == 0 else "ldd: exit %d (%s)" % (rc, log)


def gpu_row(check):
    if check.rehearse:
        return check.row("GPU", "ok", "rehearsal: the emulation and stand-ins, scale %g" % check.rehearse,
                         decides=False)
    smi = subprocess.run(["nvidia-smi", "--query-gpu=name,driver_version,memory.total", "--format=csv,noheader"],
                         capture_output=True, text=True) if shutil.which("nvidia-smi") else None
    check.gpu = smi.stdout.strip() if smi and smi.returncode == 0 else ""
    return check.row("GPU", "ok" if check.gpu else "FAILED", check.gpu or "nvidia-smi finds none",
                     blocks=["defaults"])


def warm_up(check, end):
    """One tiny GPU run (a step and an evaluation), its first CUDA start timed"""
    started = time.time()
    rc = check.run_for(check.cmd("maskprior", WARMUP + ["--device", "cuda", "--out", check.path("warm-up")]),
                       "preflight-warm-up.log", end - started)
    seconds = time.time() - started
    if rc != 0:
        return check.failed("CUDA warm-up", rc, "preflight-warm-up.log", "the tiny run", decides=False)
    return check.row("CUDA warm-up", "ok", "the first CUDA process (a tiny run of one step) took %.1f s, outside "
                     "the steps' limits" % seconds, decides=False)


def preflight(check, uses):
    """The preflight's rows (stage 0), and the binary keys whose rows failed. uses: {binary key: the
    switches the steps that run it touch}, what a failing binary's row blocks."""
    end = time.time() + PREFLIGHT_LIMIT
    rows, builds, bad = [gpu_row(check)], {}, set()
    expected = expected_build(check.rehearse)
    for key, path in binaries(check.rehearse):
        row, build = binary_row(check, key, path, expected, end)
        row["blocks"] = sorted(uses.get(key, ()))
        if build:
            builds[key] = build
        if row["status"] != "ok":
            bad.add(key)
        rows.append(row)
    commits = sorted({commit for commit, _ in builds.values()})
    check.commit = " / ".join(commits) or "unknown (no binary answered)"
    if len(commits) > 1 and not check.rehearse:  # on the device: one build, or a stale binary among them
        first = builds.get("maskprior", next(iter(builds.values())))[0]
        for row in rows:
            key = row["name"][len("binary "):]
            if key in builds and builds[key][0] != first and row["status"] == "ok":
                row.update(status="FAILED", detail="built at %s, ./maskprior at %s: a stale build (rebuild them "
                           "together with `%s`): %s" % (builds[key][0], first, BUILD_LINE, row["detail"]))
                bad.add(key)
    tree = tree_commit()
    if tree:
        check.commit += " (the tree: %s)" % tree
    if "maskprior" not in bad:
        rows.append(warm_up(check, end))
    return rows, bad
