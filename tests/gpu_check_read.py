"""How make gpu-check reads what its steps leave (the steps of tests/gpu_check_plan.py and
tests/gpu_check_paper.py call these). Every file goes through the driver's check.open_output, and
a NaN is a finding, printed as such: the program writes a NaN evaluation as null in metrics.json
and log.jsonl (run/report.cuh), and null is never formatted as a number here. Whatever else goes
wrong while a step's outputs are read (an exception of any kind) is that step's row FAILED, by
the driver (tests/gpu_check.py), and the next step runs.
"""
import json
import math
import re


def not_a_number(v):
    """null (the program's NaN), NaN or infinite; for a list, any entry so"""
    if isinstance(v, list):
        return any(not_a_number(x) for x in v)
    return v is None or (isinstance(v, float) and not math.isfinite(v))


def value_text(v, digits=4):
    """a metric as printed in a row: null and nan as such, a list (one value a layer) with 2 digits"""
    if isinstance(v, list):
        return " ".join(value_text(x, 2) for x in v)
    if v is None:
        return "null"
    if isinstance(v, bool) or not isinstance(v, (int, float)):
        return str(v)
    return ("%." + str(digits) + "f") % v if math.isfinite(v) else str(v)


def metrics(check, folder, *keys):
    """(text, not_numbers): the run's final `keys` from its metrics.json and its seconds; the first key,
    the one its row is judged by, in not_numbers when it is null or NaN (the others may be null by
    design: a default init's prior mass)."""
    with check.open_output(folder + "/metrics.json") as f:
        m = json.load(f)
    text = ", ".join("%s %s" % (k, value_text(m[k])) for k in keys if k in m)
    seconds = m.get("seconds")
    text += ", %s s" % ("%.0f" % seconds if isinstance(seconds, (int, float)) else value_text(seconds))
    return text, [k for k in keys[:1] if k in m and not_a_number(m[k])]


def last_eval(check, folder, *keys):
    """The last evaluation a run logged (log.jsonl), for one that did not finish."""
    try:
        with check.open_output(folder + "/log.jsonl") as f:
            lines = [line for line in f.read().split("\n") if line.strip()]
        last = json.loads(lines[-1])
    except (OSError, IndexError, ValueError):
        return "no evaluation logged"
    return "step %s: " % last.get("step") + ", ".join("%s %s" % (k, value_text(last[k])) for k in keys if k in last)


def compare_logs(check, gpu_log, cpu_log, deciding_steps, tolerance):
    """Two log.jsonl files of one run, GPU and CPU: (finding, worst, after). finding: the first thing
    that fails the comparison, or None: a value of an evaluation at a step up to deciding_steps
    outside the tolerance (abs, rel: |gpu - cpu| <= abs + rel |cpu|), or null (NaN) on one side only
    at any step, or evaluations that do not pair up. worst: the largest difference of the deciding
    evaluations, as a fraction of the tolerance; after: (that fraction, step, key) of the largest
    difference after them, which is reported and decides nothing."""
    with check.open_output(gpu_log) as f:
        gpu = [json.loads(line) for line in f if line.strip()]
    with check.open_output(cpu_log) as f:
        cpu = [json.loads(line) for line in f if line.strip()]
    worst, after = 0.0, (0.0, None, None)
    if len(gpu) != len(cpu) or not cpu:
        return "%d evaluations on the GPU, %d on the CPU" % (len(gpu), len(cpu)), worst, after
    for g, c in zip(gpu, cpu):
        step = c.get("step")
        if sorted(g) != sorted(c):
            return "step %s: other keys" % step, worst, after
        for key in c:
            gv, cv = g[key], c[key]
            if isinstance(cv, list) != isinstance(gv, list) or (isinstance(cv, list) and len(gv) != len(cv)):
                return "step %s: %s has other values, %s on the CPU" % (step, value_text(gv), value_text(cv)), \
                    worst, after
            for a, b in (zip(gv, cv) if isinstance(cv, list) else [(gv, cv)]):
                if not_a_number(a) or not_a_number(b):
                    if not_a_number(a) != not_a_number(b):  # both null: the same meaning (no mask, no loss yet)
                        return "step %s: %s %s on the GPU, %s on the CPU" % (step, key, value_text(a),
                                                                            value_text(b)), worst, after
                    continue
                if not isinstance(b, (int, float)):
                    if a != b:
                        return "step %s: %s %s, %s on the CPU" % (step, key, a, b), worst, after
                    continue
                ratio = abs(a - b) / (tolerance[0] + tolerance[1] * abs(b))
                if step is not None and step <= deciding_steps:
                    worst = max(worst, ratio)
                    if ratio > 1.0:
                        return "step %s: %s %.6g, %.6g on the CPU (%.1f times the tolerance)" % (
                            step, key, a, b, ratio), worst, after
                elif ratio > after[0]:
                    after = (ratio, step, key)
    return None, worst, after


def lab_table(text):
    """(the versions a kernel lab's table shows missing the CPU or giving other bits, the rows of it
    that say FELL BACK: version 1 ran version 2's product)"""
    failing, fell_back = set(), 0
    for line in text.split("\n"):
        cells = [c.strip() for c in line.strip().strip("|").split("|")] if line.startswith("|") else []
        version = next((c for c in cells[1:3] if c.isdigit()), None)
        if version is None or len(cells) < 9:
            continue
        fell_back += "FELL BACK" in line
        if cells[-2].lower() == "nan" or cells[-1] == "NO":
            failing.add(int(version))
    return failing, fell_back


# a part's line of tests/gpu_tests_isolated.sh: its outcome, its family (a test file), the rest
PART_LINE = re.compile(r"^(ok|FAILED|CRASHED|DID NOT FINISH|NOT RUN) +([^\s:(]+):? ?(.*)$", re.M)
PART_STATUS = {"ok": "ok", "FAILED": "FAILED", "CRASHED": "FAILED", "DID NOT FINISH": "did not finish",
               "NOT RUN": "not run"}


def parts(text):
    """[(status, family, rest of its line)] of a tests/gpu_tests_isolated.sh output, in its order"""
    return [(PART_STATUS[m.group(1)], m.group(2), m.group(3)) for m in PART_LINE.finditer(text)]
