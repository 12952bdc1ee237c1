#!/usr/bin/python3
"""Markdown tables of Boolean GOTU runs, from their metrics.json files (never from stdout).

    tools/boolean_table.py ROOT [--by-setting]

Reads every ROOT/**/metrics.json and groups the runs by task and init variant (mask-frozen
beside mask; and, with --by-setting, by the setting: the first folder below ROOT, as
experiments/sweep_2parity.sh lays them out). One row per group: the number of seeds, then mean ± std over the seeds of
the cube accuracy, the unseen accuracy, the MDI agreement (share of unseen points closer to
the min-degree interpolator than to the target) and the final prior mass (mean over layers),
and the paper's cube accuracy for that task and init.
"""
import glob
import json
import os
import statistics
import sys

from names import variant_rank  # the inits in the program's order (maskprior --list)

TASK_ORDER = ["2parity", "maj3", "cyclic3", "threesym"]
# The paper's cube accuracy: the baselines sit at the min-degree interpolator (default and
# QK init alike), the mask init reaches 100 / 100 / 99.98. It does not run threesym.
PAPER = {("2parity", "mask"): "100", ("maj3", "mask"): "100", ("cyclic3", "mask"): "99.98"}
MDI = {"2parity": "75.00", "maj3": "87.50", "cyclic3": "92.83"}


def paper(task, init):
    if (task, init) in PAPER:
        return PAPER[(task, init)]
    return f"~{MDI[task]} (MDI)" if task in MDI and init in ("default", "qk-svd", "qk-opt") else "-"


def mean_std(values, percent=True):
    scale = 100 if percent else 1
    mean = statistics.mean(values) * scale
    std = statistics.stdev(values) * scale if len(values) > 1 else 0.0
    return f"{mean:.2f} ± {std:.2f}" if percent else f"{mean:.3f} ± {std:.3f}"


def load(root, by_setting):
    """The runs grouped by (setting, task, init variant), and when each setting's first run finished."""
    groups, finished = {}, {}
    for path in glob.glob(os.path.join(root, "**", "metrics.json"), recursive=True):
        with open(path) as f:
            m = json.load(f)
        setting = os.path.relpath(path, root).split(os.sep)[0] if by_setting else ""
        groups.setdefault((setting, m["task"], m.get("variant", m["init"])), []).append(m)
        finished[setting] = min(finished.get(setting, float("inf")), os.path.getmtime(path))
    return groups, finished


def order_by(finished):
    """Settings in the order they were run (the script's order), then tasks and inits as listed above."""
    def order(key):
        setting, task, init = key
        return (finished[setting], TASK_ORDER.index(task) if task in TASK_ORDER else 99,
                variant_rank(init))
    return order


def main(argv):
    if len(argv) not in (2, 3) or (len(argv) == 3 and argv[2] != "--by-setting"):
        sys.exit(__doc__)
    by_setting = len(argv) == 3
    groups, finished = load(argv[1], by_setting)
    if not groups:
        sys.exit(f"boolean_table.py: error: no metrics.json under {argv[1]}")
    header = (["setting"] if by_setting else []) + ["task", "init", "seeds", "cube acc %", "unseen acc %",
                                                    "MDI agreement %", "prior mass", "paper cube acc %"]
    print("| " + " | ".join(header) + " |")
    print("|" + "|".join("---" for _ in header) + "|")
    devices = set()
    for key in sorted(groups, key=order_by(finished)):
        setting, task, init = key
        runs = groups[key]
        devices.update(r["device"] for r in runs)
        mass = [statistics.mean(r["prior_mass"]) for r in runs]
        cells = ([setting] if by_setting else []) + [
            task, init, str(len(runs)), mean_std([r["acc_cube"] for r in runs]),
            mean_std([r["acc_unseen"] for r in runs]), mean_std([r["mdi_agreement"] for r in runs]),
            mean_std(mass, percent=False), paper(task, init)]
        print("| " + " | ".join(cells) + " |")
    print(f"\nmean ± std over seeds; measured on: {', '.join(sorted(devices))}")


if __name__ == "__main__":
    main(sys.argv)
