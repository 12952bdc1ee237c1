#!/usr/bin/env python3
"""dev/exercises/check/train.py PROGRAM MAIN_OBJECT FOLDER: the kernel course's step 9 trains make
run's model (maj3, the mask init, seed 1, Adam: experiments/headline.sh's flags) for STEPS steps on
the CUDA emulation, with the learner's attention (PROGRAM's last version, the kernel course's line
of ATTENTION_KERNELS) into FOLDER/yours, and with kernel 1 into FOLDER/kernel1, then compares the
two log.jsonl line by line as the lines come. Kernel 1's run is kept and run again only when it is
missing, unfinished or older than MAIN_OBJECT (the trainer's object, which make rebuilds when a
source changes); the two run at once (two cores). A line agrees when it has the same bytes, or
when every number in it is within the tests' tolerance of kernel 1's, 1e-4 + 1e-3·|kernel 1's| (a
kernel that sums in another order); NaN never agrees. The first line that does not stops the
learner's run. Exit 0 when every line agrees, 1 when not."""
import json
import math
import os
import shutil
import subprocess
import sys
import time

STEPS = 50
FLAGS = ["--device", "cuda", "--task", "maj3", "--init", "mask", "--seed", "1", "--optimizer", "adam",
         "--steps", str(STEPS), "--eval-every", str(STEPS)]


def lines_of(path):
    """The complete lines of a log.jsonl that a run is writing (a line is complete at its newline)."""
    try:
        with open(path, "rb") as f:
            text = f.read().decode()
    except FileNotFoundError:
        return []
    return text.split("\n")[:-1]


def numbers(value):
    """A log value as a list of numbers (None where the log has null)."""
    return [v for v in value] if isinstance(value, list) else [value]


def compare(mine, theirs):
    """(agrees, how): the same bytes, or the first number past the tolerance, or the largest
    difference as a fraction of the tolerance."""
    if mine == theirs:
        return True, "the same bytes", 0.0
    a, b = json.loads(mine, parse_constant=float), json.loads(theirs, parse_constant=float)
    worst = 0.0
    for key, value in b.items():
        if key not in a:
            return False, "%s: missing in yours" % key, math.inf
        got, wanted = numbers(a[key]), numbers(value)
        if len(got) != len(wanted):
            return False, "%s: %d values, kernel 1's %d" % (key, len(got), len(wanted)), math.inf
        for g, w in zip(got, wanted):
            if g is None or w is None:  # null: a NaN (or a loss not there yet)
                if g is not w:
                    return False, "%s: yours %s, kernel 1's %s" % (key, "null (NaN)" if g is None else g,
                                                                   "null" if w is None else w), math.inf
                continue
            ratio = abs(g - w) / (1e-4 + 1e-3 * abs(w)) if not math.isnan(g) else math.inf
            if not ratio <= 1.0:
                return False, "%s: yours %.9g, kernel 1's %.9g" % (key, g, w), ratio
            worst = max(worst, ratio)
    return True, "within the tolerance (%.3g of it at most)" % worst, worst


def summary(line):
    row = json.loads(line, parse_constant=float)
    shown = ["%s %.6f" % (key, row[key]) for key in ("loss", "eval_loss", "acc_cube") if row.get(key) is not None]
    return "step %d: %s" % (row["step"], ", ".join(shown))


def main():
    program, main_object, folder = sys.argv[1:4]
    versions = subprocess.run([program, "--list", "attention-kernels"], capture_output=True, text=True).stdout.split("\n")
    version = [v.split()[0] for v in versions if "the kernel course" in v][0]
    yours, kernel1 = os.path.join(folder, "yours"), os.path.join(folder, "kernel1")
    stamp = os.path.join(kernel1, "flags")  # the flags of the kept run, written when it ended well
    kept = (os.path.exists(stamp) and os.path.getmtime(stamp) > os.path.getmtime(main_object) and
            open(stamp).read() == " ".join(FLAGS))
    print("step 9: make run's model (maj3, --init mask, seed 1, %d steps) trained on the emulation with your kernels "
          "(--attention-kernel %s) and with kernel 1%s" % (STEPS, version, " (kept from before)" if kept else ""))
    sys.stdout.flush()
    runs = {}
    for name, path, extra in [("yours", yours, ["--attention-kernel", version])] + (
            [] if kept else [("kernel 1", kernel1, ["--attention-kernel", "1"])]):
        shutil.rmtree(path, ignore_errors=True)
        os.makedirs(folder, exist_ok=True)
        runs[name] = subprocess.Popen([program] + FLAGS + extra + ["--out", path],
                                      stdout=open(path + ".out", "w"), stderr=subprocess.STDOUT)
    done, worst, failure = 0, 0.0, None
    while True:
        mine, theirs = lines_of(os.path.join(yours, "log.jsonl")), lines_of(os.path.join(kernel1, "log.jsonl"))
        while done < min(len(mine), len(theirs)) and not failure:
            agrees, how, ratio = compare(mine[done], theirs[done])
            print("  %s   %s" % (summary(mine[done]), how))
            sys.stdout.flush()
            worst = max(worst, ratio)
            if not agrees:
                failure = "FAILED: your run's line %d differs from kernel 1's: %s (%s/log.jsonl)" % (done + 1, how, yours)
                runs["yours"].kill()
            done += 1
        finished = {name: run.poll() for name, run in runs.items()}
        if failure or all(code is not None for code in finished.values()):
            break
        if finished["yours"] not in (None, 0):
            break
        time.sleep(0.2)
    if "kernel 1" in runs:  # kept for the next check: let it end
        if runs["kernel 1"].wait() != 0:
            print("FAILED: kernel 1's run stopped (%s.out says why)" % kernel1)
            return 1
        open(stamp, "w").write(" ".join(FLAGS))
    if failure:
        print(failure)
        return 1
    code = runs["yours"].wait()
    if code != 0:
        tail = open(yours + ".out").read().strip().split("\n")[-3:]
        print("\n".join("  " + t for t in tail))
        print("FAILED: your run stopped (exit %d): its last lines are above, all of it in %s.out" % (code, yours))
        return 1
    mine, theirs = lines_of(os.path.join(yours, "log.jsonl")), lines_of(os.path.join(kernel1, "log.jsonl"))
    if len(mine) != len(theirs) or done != len(theirs):
        print("FAILED: your run's log.jsonl has %d lines, kernel 1's %d" % (len(mine), len(theirs)))
        return 1
    if worst == 0.0:
        print("PASSED: your kernels train the model: log.jsonl has kernel 1's very bytes (%s/log.jsonl)" % yours)
    else:
        print("PASSED: your kernels train the model: log.jsonl agrees with kernel 1's within the tests' tolerance "
              "(%.3g of it at most; other bits: sums in another order, or another e^x) (%s/log.jsonl)" % (worst, yours))
    return 0


if __name__ == "__main__":
    sys.exit(main())
