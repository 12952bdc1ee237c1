#!/usr/bin/python3
"""A markdown table of Boolean-target runs (experiments/boolean_targets_table.sh), from their
metrics.json files (never from stdout).

    tools/boolean_targets_table.py ROOT

Reads every ROOT/*/metrics.json and groups the runs by their folder less its -sN (NAME-VARIANT,
as the script names them). One row per group: its name, the target (a named task's
name) and the held-out subcube, the init variant, the number of seeds, then mean ± std over the seeds of the cube
accuracy, the unseen accuracy, the exact-match rate (rounded to the target's grid), the MDI
agreement (share of unseen points closer to the min-degree interpolator than to the target) and
the final prior mass (mean over layers), and beside them the MDI's own cube accuracy. Then the
runs' summed seconds and the machine.
"""
import glob
import json
import os
import re
import statistics
import sys

from boolean_table import mean_std  # mean ± std over seeds, in percent or not
from names import variant_rank       # the inits in the program's order (maskprior --list)


def cell(values, percent=True):
    """mean ± std of the values that exist (acc_unseen and exact_cube may be null)."""
    present = [v for v in values if v is not None]
    return mean_std(present, percent) if present else "-"


def load(root):
    """The Boolean runs (those with an MDI) grouped by folder less -sN, and when each group's first
    run finished."""
    groups, finished = {}, {}
    for path in glob.glob(os.path.join(root, "*", "metrics.json")):
        with open(path) as f:
            m = json.load(f)
        if "mdi_acc_cube" not in m:
            continue
        group = re.sub(r"-s\d+$", "", os.path.basename(os.path.dirname(path)))
        groups.setdefault(group, []).append(m)
        finished[group] = min(finished.get(group, float("inf")), os.path.getmtime(path))
    return groups, finished


def main(argv):
    if len(argv) != 2:
        sys.exit(__doc__)
    groups, finished = load(argv[1])
    if not groups:
        sys.exit(f"boolean_targets_table.py: error: no metrics.json of a Boolean run under {argv[1]}")
    # the targets in the order their first run finished (the script's order), the variants in the program's
    targets = {}
    for group, runs in groups.items():
        name = group[:-len(runs[0]["variant"]) - 1]
        targets[name] = min(targets.get(name, float("inf")), finished[group])
    order = sorted(groups, key=lambda g: (targets[g[:-len(groups[g][0]["variant"]) - 1]],
                                          variant_rank(groups[g][0]["variant"])))
    header = ["name", "target", "unseen", "init", "seeds", "cube acc %", "unseen acc %", "exact %", "MDI agreement %",
              "prior mass", "MDI cube acc %"]
    print("| " + " | ".join(header) + " |")
    print("|" + "|".join("---" for _ in header) + "|")
    devices, seconds = set(), 0.0
    for group in order:
        runs = groups[group]
        first = runs[0]
        devices.update(r["device"] for r in runs)
        seconds += sum(r["seconds"] for r in runs)
        name = group[:-len(first["variant"]) - 1]
        named = first["task"] != "boolean"  # a named task: its name (its metrics.json has its target too)
        target = first["task"] if named else first["target"]
        target = f"`{target if len(target) <= 40 else target[:37] + '...'}`"
        unseen = "its own" if named else f"`{first['unseen']}`"
        cells = [name, target, unseen, first["variant"], str(len(runs)), cell([r["acc_cube"] for r in runs]),
                 cell([r["acc_unseen"] for r in runs]), cell([r["exact_cube"] for r in runs]),
                 cell([r["mdi_agreement"] for r in runs]),
                 cell([statistics.mean(r["prior_mass"]) for r in runs], percent=False),
                 f"{100 * first['mdi_acc_cube']:.2f}"]
        print("| " + " | ".join(cells) + " |")
    print(f"\nmean ± std over seeds; {seconds / 60:.1f} minutes of runs in all; measured on: "
          f"{', '.join(sorted(devices))}")


if __name__ == "__main__":
    main(sys.argv)
