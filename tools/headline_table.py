"""Prints the headline table of `make run` from the runs' metrics.json files (never from stdout).

    python3 tools/headline_table.py RUNS_DIR TASK

Reads RUNS_DIR/TASK-<init>-s<seed>/metrics.json for every init and seed found, and prints one
row per init: the cube accuracy of each seed, then mean and range over the seeds of the cube accuracy, the unseen accuracy, the MDI
agreement (share of unseen points closer to the min-degree interpolator than to f), the MSE on
the cube and the final prior mass per layer; then the MDI's own cube accuracy.
"""
import glob
import json
import os
import statistics
import sys

from names import variant_rank  # the inits in the program's order (maskprior --list)


def summary(values):
    """'mean' for one value, 'mean (min-max)' for several."""
    mean = statistics.mean(values)
    if len(values) == 1 or max(values) - min(values) < 5e-5:
        return f"{mean:.4f}"
    return f"{mean:.4f} ({min(values):.3f}-{max(values):.3f})"


def main(runs_dir, task):
    by_init = {}
    for path in sorted(glob.glob(os.path.join(runs_dir, f"{task}-*-s*", "metrics.json"))):
        with open(path) as f:
            m = json.load(f)
        by_init.setdefault(m["init"], []).append(m)
    if not by_init:
        sys.exit(f"no runs of {task} under {runs_dir}")
    columns = [("acc_cube", "cube acc"), ("acc_unseen", "unseen acc"), ("mdi_agreement", "MDI agreement"),
               ("mse_cube", "MSE cube")]
    header = ["init", "seeds", "cube acc per seed"] + [name for _, name in columns] + ["prior mass per layer", "seconds"]
    rows = []
    for init, runs in sorted(by_init.items(), key=lambda item: variant_rank(item[0])):
        layers = len(runs[0]["prior_mass"])
        mass = " / ".join(f"{statistics.mean(r['prior_mass'][l] for r in runs):.3f}" for l in range(layers))
        per_seed = " ".join(f"{r['acc_cube']:.3f}" for r in sorted(runs, key=lambda r: r["seed"]))
        rows.append([init, str(len(runs)), per_seed] + [summary([r[key] for r in runs]) for key, _ in columns]
                    + [mass, f"{statistics.mean(r['seconds'] for r in runs):.0f}"])
    widths = [max(len(h), *(len(r[i]) for r in rows)) for i, h in enumerate(header)]
    line = lambda cells: "| " + " | ".join(c.ljust(w) for c, w in zip(cells, widths)) + " |"
    first = by_init[next(iter(by_init))][0]
    print(f"\n{task}, optimizer {first.get('optimizer', '?')}: mean over seeds (min-max); device: {first['device']}")
    print(line(header))
    print("|" + "|".join("-" * (w + 2) for w in widths) + "|")
    for r in rows:
        print(line(r))
    mdi = first["mdi_acc_cube"]
    print(f"the min-degree interpolator itself: cube acc {mdi:.4f}")


if __name__ == "__main__":
    if len(sys.argv) != 3:
        sys.exit(__doc__)
    main(sys.argv[1], sys.argv[2])
