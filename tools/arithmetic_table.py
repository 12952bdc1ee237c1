#!/usr/bin/python3
"""Markdown table of arithmetic runs (docs/method.md), from their metrics.json files (never stdout).

    tools/arithmetic_table.py ROOT

Reads every ROOT/**/metrics.json of an add3 or mul2 run and groups the runs by task, training
set size and init. One row per group: the data fraction (training pairs / all 10^6 or 10^4
operand pairs), the training pairs, the number of seeds, then mean ± std over the seeds of the
held-out sequence accuracy (the whole greedily decoded answer right) and digit accuracy, the
final prior mass (mean over layers), and the paper's sequence accuracy where it gives one.
"""
import glob
import json
import os
import statistics
import sys

from names import variant_rank  # the inits in the program's order (maskprior --list)

PAIRS = {"add3": 10 ** 6, "mul2": 10 ** 4}
# The paper's test accuracy (%): addition at 0.4% of the pairs and multiplication at 3%.
PAPER = {("add3", 4000, "default"): "1.19", ("add3", 4000, "mask"): "77.49",
         ("mul2", 300, "default"): "5.01", ("mul2", 300, "mask"): "69.49"}


def mean_std(values, percent=True):
    scale = 100 if percent else 1
    mean = statistics.mean(values) * scale
    std = statistics.stdev(values) * scale if len(values) > 1 else 0.0
    return f"{mean:.2f} ± {std:.2f}" if percent else f"{mean:.3f} ± {std:.3f}"


def main(argv):
    if len(argv) != 2:
        sys.exit(__doc__)
    groups = {}
    for path in glob.glob(os.path.join(argv[1], "**", "metrics.json"), recursive=True):
        with open(path) as f:
            m = json.load(f)
        if m["task"] in PAIRS:
            groups.setdefault((m["task"], m["train_examples"], m["init"]), []).append(m)
    if not groups:
        sys.exit(f"arithmetic_table.py: error: no add3 or mul2 metrics.json under {argv[1]}")
    header = ["task", "data frac", "train pairs", "init", "seeds", "seq acc %", "digit acc %", "prior mass",
              "paper seq acc %"]
    print("| " + " | ".join(header) + " |")
    print("|" + "|".join("---" for _ in header) + "|")
    devices, tested = set(), set()
    order = lambda key: (list(PAIRS).index(key[0]), key[1], variant_rank(key[2]))
    for key in sorted(groups, key=order):
        task, train, init = key
        runs = groups[key]
        devices.update(r["device"] for r in runs)
        tested.update(r["eval_examples"] for r in runs)
        mass = [statistics.mean(r["prior_mass"]) for r in runs]
        cells = [task, f"{train / PAIRS[task]:g}", str(train), init, str(len(runs)),
                 mean_std([r["seq_acc"] for r in runs]), mean_std([r["digit_acc"] for r in runs]),
                 mean_std(mass, percent=False), PAPER.get(key, "-")]
        print("| " + " | ".join(cells) + " |")
    print(f"\nmean ± std over seeds; held-out test pairs per run: {', '.join(map(str, sorted(tested)))}; "
          f"measured on: {', '.join(sorted(devices))}")


if __name__ == "__main__":
    main(sys.argv)
