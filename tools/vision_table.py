#!/usr/bin/python3
"""Markdown table of vision runs, from their metrics.json files (never from stdout).

    tools/vision_table.py ROOT

Reads every ROOT/**/metrics.json of an image task and groups the runs by data set (the run
folder's name up to the init variant: fashion-mnist, cifar10) and init variant (default,
default-pe18, ..., mask, mask-frozen). One row per group: the number of seeds; test top-1
accuracy mean ± std over the seeds; the paired difference to the default init on the same seeds
(mean ± std of acc(variant, seed) - acc(default, seed), over the seeds both have); the prior
mass at step 0 (the run's first row of log.jsonl) and at the end (metrics.json), each the mean
over layers, then mean ± std over seeds, of the attention on G's 3x3 neighbourhood and CLS; the
mean minutes a run took; and the paper's ViT-Tiny CIFAR-10 accuracy for that init.
"""
import glob
import json
import os
import statistics
import sys

from names import variant_rank  # the inits in the program's order (maskprior --list)

DATA_ORDER = ["fashion-mnist", "cifar10"]
# The paper's ViT-Tiny on CIFAR-10 (heavy recipe: RandAugment, Mixup/CutMix, EMA, 300 epochs)
PAPER = {("cifar10", "default"): "94.20", ("cifar10", "impulse"): "95.12", ("cifar10", "mask"): "95.66"}


def mean_std(values, scale=100, digits=2):
    mean = statistics.mean(values) * scale
    std = statistics.stdev(values) * scale if len(values) > 1 else 0.0
    return f"{mean:.{digits}f} ± {std:.{digits}f}"


def step0_prior_mass(folder):
    """The mean over layers of the prior mass of the run's step-0 evaluation (log.jsonl's first row)."""
    with open(os.path.join(folder, "log.jsonl")) as f:
        first = json.loads(f.readline())
    if first.get("step") != 0:
        sys.exit(f"vision_table.py: error: {folder}/log.jsonl does not start with the step-0 evaluation")
    return statistics.mean(first["prior_mass"])


def rank(variant):
    """default-pe18 right after default: a -peS control sits after the variant it scales."""
    base = variant.split("-pe")[0]
    return (variant_rank(base), variant != base)


def main(argv):
    if len(argv) != 2:
        sys.exit(__doc__)
    runs = {}  # (data set, variant) -> {seed: metrics, with "step0_prior_mass" added}
    for path in glob.glob(os.path.join(argv[1], "**", "metrics.json"), recursive=True):
        with open(path) as f:
            m = json.load(f)
        if "acc" not in m:
            continue
        variant = m.get("variant", m["init"])
        m["step0_prior_mass"] = step0_prior_mass(os.path.dirname(path))
        folder = os.path.basename(os.path.dirname(path))
        data = folder[:folder.index("-" + variant + "-s")]
        runs.setdefault((data, variant), {})[m["seed"]] = m
    if not runs:
        sys.exit(f"vision_table.py: error: no metrics.json of an image task under {argv[1]}")
    header = ["data", "init", "seeds", "test acc %", "minus default (paired) %", "prior mass, step 0",
              "prior mass, final", "minutes / run",
              "paper (ViT-Tiny, CIFAR-10) %"]
    print("| " + " | ".join(header) + " |")
    print("|" + "|".join("---" for _ in header) + "|")
    devices = set()
    order = lambda key: (DATA_ORDER.index(key[0]) if key[0] in DATA_ORDER else 99,
                         rank(key[1]))
    for data, variant in sorted(runs, key=order):
        by_seed = runs[(data, variant)]
        devices.update(m["device"] for m in by_seed.values())
        base = runs.get((data, "default"), {})
        paired = [by_seed[s]["acc"] - base[s]["acc"] for s in sorted(by_seed) if s in base]
        cells = [data, variant, str(len(by_seed)), mean_std([m["acc"] for m in by_seed.values()]),
                 "-" if variant == "default" or not paired else mean_std(paired),
                 mean_std([m["step0_prior_mass"] for m in by_seed.values()], scale=1, digits=3),
                 mean_std([statistics.mean(m["prior_mass"]) for m in by_seed.values()], scale=1, digits=3),
                 f"{statistics.mean(m['seconds'] for m in by_seed.values()) / 60:.1f}",
                 PAPER.get((data, variant), "-")]
        print("| " + " | ".join(cells) + " |")
    print(f"\nmean ± std over seeds; measured on: {', '.join(sorted(devices))}")


if __name__ == "__main__":
    main(sys.argv)
