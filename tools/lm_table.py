#!/usr/bin/python3
"""Markdown table of language-model runs, from their metrics.json and log.jsonl files (never stdout).

    tools/lm_table.py ROOT

Reads every ROOT/**/metrics.json of --task lm and groups the runs by data set (the run folder's
name up to the variant: tinystories, wikitext2) and init variant (default, mask, mask-frozen,
mask-alibi, mask-alibi-frozen, qk-svd). One row per group: the number of seeds; validation loss
(nats per token) and bits per byte, mean ± std over the seeds; each one's paired difference to
the default init on the same seeds (mean ± std of x(init, seed) - x(default, seed)); the prior
mass (mean over layers and seeds: the attention on the causal window G) at step 0 and at the
end; the mask's drift at the end; the mean minutes a run took. Then the data folders the runs
read, with what their meta.json says of the text files and the split.
"""
import glob
import json
import os
import statistics
import sys

from names import variant_rank  # the inits in the program's order (maskprior --list)

DATA_ORDER = ["tinystories", "wikitext2"]


def mean_std(values, digits=3):
    mean = statistics.mean(values)
    std = statistics.stdev(values) if len(values) > 1 else 0.0
    return f"{mean:.{digits}f} ± {std:.{digits}f}"


def first_prior_mass(run_dir):
    """The mean prior mass of the run's step-0 evaluation (the first line of log.jsonl)."""
    with open(os.path.join(run_dir, "log.jsonl")) as f:
        first = json.loads(f.readline())
    return statistics.mean(first["prior_mass"])


def main(argv):
    if len(argv) != 2:
        sys.exit(__doc__)
    runs = {}  # (data set, variant) -> {seed: (metrics, run folder)}
    for path in glob.glob(os.path.join(argv[1], "**", "metrics.json"), recursive=True):
        with open(path) as f:
            m = json.load(f)
        if m.get("task") != "lm":
            continue
        folder = os.path.basename(os.path.dirname(path))
        data = folder[:folder.index("-" + m["variant"] + "-s")]
        runs.setdefault((data, m["variant"]), {})[m["seed"]] = (m, os.path.dirname(path))
    if not runs:
        sys.exit(f"lm_table.py: error: no metrics.json of --task lm under {argv[1]}")
    header = ["data", "init", "seeds", "val loss (nats/token)", "minus default", "bits per byte", "minus default",
              "prior mass step 0 → end", "mask drift", "minutes / run"]
    print("| " + " | ".join(header) + " |")
    print("|" + "|".join("---" for _ in header) + "|")
    devices, folders = set(), {}
    order = lambda key: (DATA_ORDER.index(key[0]) if key[0] in DATA_ORDER else 99,
                         variant_rank(key[1]))
    for data, variant in sorted(runs, key=order):
        by_seed = runs[(data, variant)]
        metrics = [m for m, _ in by_seed.values()]
        devices.update(m["device"] for m in metrics)
        folders.setdefault(data, set()).update(m["data_dir"] for m in metrics)
        base = runs.get((data, "default"), {})
        cells = [data, variant, str(len(by_seed))]
        for key in ["val_loss", "bits_per_byte"]:
            paired = [by_seed[s][0][key] - base[s][0][key] for s in sorted(by_seed) if s in base]
            cells += [mean_std([m[key] for m in metrics]),
                      "-" if variant == "default" or not paired else mean_std(paired)]
        start = mean_std([first_prior_mass(d) for _, d in by_seed.values()])
        end = mean_std([statistics.mean(m["prior_mass"]) for m in metrics])
        drifts = [statistics.mean(m["mask_drift"]) for m in metrics if m.get("mask_drift")]
        cells += [f"{start} → {end}", mean_std(drifts, 4) if drifts else "-",
                  f"{statistics.mean(m['seconds'] for m in metrics) / 60:.1f}"]
        print("| " + " | ".join(cells) + " |")
    print(f"\nmean ± std over seeds; measured on: {', '.join(sorted(devices))}")
    for data in sorted(folders, key=lambda d: DATA_ORDER.index(d) if d in DATA_ORDER else 99):
        for folder in sorted(folders[data]):
            meta_path = os.path.join(folder, "meta.json")
            if not os.path.exists(meta_path):
                print(f"{data}: {folder}")
                continue
            with open(meta_path) as f:
                meta = json.load(f)
            inputs = os.path.basename(meta["input"])
            if meta.get("val_input"):
                inputs += f" (training), {os.path.basename(meta['val_input'])} (validation)"
            print(f"{data}: {folder}: {meta['tokenizer']} V {meta['vocab']}, from {inputs}; {meta['split']}; "
                  f"train {meta['train_tokens']} tokens, validation {meta['val_tokens']}")


if __name__ == "__main__":
    main(sys.argv)
