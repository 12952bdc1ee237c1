#!/usr/bin/python3
"""The tables and the figure of experiments/prior_robustness.sh, from the runs' metrics.json and
log.jsonl files (never from stdout).

    tools/prior_robustness_table.py ROOT

ROOT holds <G>/<task>-<variant>-s<seed>/ folders, as the script lays them out: <G> is the prior
the run was given (true, noise0.1, noise0.3, drop1; with -c2 at c = 2, else c = 6), <variant>
the init (default, mask, mask-frozen, qk-opt, or mask-lr10 / mask-lr100: the mask at 10 or 100
times lr). Prints two markdown tables, one row per (G, task, variant), mean ± std over the seeds:

  1. the wrong prior at c = 6: every G, with the mask, the frozen mask, qk-opt and default;
  2. the mask's speed: c = 2 and 6, the mask at 1, 10 and 100 times lr beside the frozen mask.

Columns: cube and unseen accuracy (%); each run's paired difference against mask-frozen of the
same G, c, task and seed (points); the final prior mass on the G the run was given, and on the
true G at step 0 and at the end (the same G for the true prior's runs); log σ(M)'s drift at the
end (mean over layers); seconds a run. Draws ROOT/prior-robustness.png: cube accuracy against
the noise P (the true G is P = 0), one panel per task and c, the learnable masks at their
speeds against the frozen one, and qk-opt.
Bad input: one line "prior_robustness_table.py: error: ..." on stderr, exit 2.
"""
import glob
import json
import os
import re
import statistics
import sys

TASKS = ["maj3", "cyclic3", "2parity"]
PRIORS = ["true", "noise0.1", "noise0.3", "drop1"]  # c = 6; "-c2" after one: c = 2
PRIOR_TEXT = {"true": "the task's", "noise0.1": "noise 0.1", "noise0.3": "noise 0.3", "drop1": "drop 1"}
NOISE = {"true": 0.0, "noise0.1": 0.1, "noise0.3": 0.3}
VARIANTS = ["default", "mask", "mask-lr10", "mask-lr100", "mask-frozen", "qk-opt"]
FOLDER = re.compile(r"^(?P<task>[^-]+)-(?P<variant>.+)-s(?P<seed>\d+)$")


def fail(message):
    print(f"prior_robustness_table.py: error: {message}", file=sys.stderr)
    sys.exit(2)


def read_json(path):
    try:
        with open(path) as f:
            return json.load(f)
    except (OSError, ValueError) as e:
        fail(f"{path}: {e}")


def first_log_row(folder):
    """The step-0 evaluation: log.jsonl's first line."""
    path = os.path.join(folder, "log.jsonl")
    try:
        with open(path) as f:
            return json.loads(f.readline())
    except (OSError, ValueError) as e:
        fail(f"{path}: {e}")


def mean(values):
    return sum(values) / len(values)


def load(root):
    """{(prior folder, task, variant): {seed: run}}, a run being the numbers the tables need."""
    runs = {}
    for path in sorted(glob.glob(os.path.join(root, "*", "*", "metrics.json"))):
        folder = os.path.dirname(path)
        prior, name = os.path.relpath(folder, root).split(os.sep)
        match = FOLDER.match(name)
        if not match:
            fail(f"{folder}: not a <task>-<variant>-s<seed> folder")
        m, step0 = read_json(path), first_log_row(folder)
        true_key = "prior_mass_true" if "prior_mass_true" in m else "prior_mass"  # the true G's runs: G itself
        drift = m.get("mask_drift")
        runs.setdefault((prior, match["task"], match["variant"]), {})[int(match["seed"])] = {
            "cube": 100 * m["acc_cube"], "unseen": 100 * m["acc_unseen"], "mass": mean(m["prior_mass"]),
            "true0": mean(step0[true_key]), "true": mean(m[true_key]), "seconds": m["seconds"],
            "drift": mean([d for d in drift if d is not None]) if drift else None, "device": m["device"]}
    if not runs:
        fail(f"no metrics.json under {root}/<G>/<run>/")
    return runs


def mean_std(values, digits):
    if not values:
        return "-"
    std = statistics.stdev(values) if len(values) > 1 else 0.0
    return f"{statistics.mean(values):.{digits}f} ± {std:.{digits}f}"


def row(runs, prior, task, variant):
    """One table row's cells, or None when the group has no run."""
    group = runs.get((prior, task, variant))
    if not group:
        return None
    seeds = sorted(group)
    frozen = runs.get((prior, task, "mask-frozen"), {})
    paired = [group[s]["cube"] - frozen[s]["cube"] for s in seeds if s in frozen and variant != "mask-frozen"]
    values = lambda key: [group[s][key] for s in seeds if group[s][key] is not None]
    true_mass = f"{mean_std(values('true0'), 3)} → {mean_std(values('true'), 3)}"
    return [str(len(seeds)), mean_std(values("cube"), 2), mean_std(values("unseen"), 2), mean_std(paired, 2),
            mean_std(values("mass"), 3), true_mass, mean_std(values("drift"), 4), f"{mean(values('seconds')):.0f}"]


COLUMNS = ["seeds", "cube acc %", "unseen acc %", "minus mask-frozen (paired)", "prior mass, given G",
           "prior mass, true G: step 0 → end", "mask drift", "s / run"]


def print_table(header, lines):
    print("| " + " | ".join(header + COLUMNS) + " |")
    print("|" + "|".join("---" for _ in header + COLUMNS) + "|")
    for first, cells in lines:
        print("| " + " | ".join(first + cells) + " |")
    print()


def wrong_prior_table(runs):
    lines = []
    for task in TASKS:
        for prior in PRIORS:
            for variant in ["default", "mask", "mask-frozen", "qk-opt"]:
                cells = row(runs, prior, task, variant)
                if cells:
                    lines.append(([task, "-" if variant == "default" else PRIOR_TEXT[prior], variant], cells))
    print("**The wrong prior** (c = 6, the mask at lr): mean ± std over seeds; paired: minus mask-frozen of the "
          "same task, G and seed, in points\n")
    print_table(["task", "G", "init"], lines)


def speed_table(runs):
    lines = []
    for task in TASKS:
        for prior in PRIORS:
            for c, suffix in (("6", ""), ("2", "-c2")):
                for variant in ["mask-frozen", "mask", "mask-lr10", "mask-lr100"]:
                    if (prior + suffix, task, "mask-lr10") not in runs:
                        continue  # the speed grid's cells only
                    cells = row(runs, prior + suffix, task, variant)
                    if cells:
                        speed = {"mask-frozen": "0 (frozen)", "mask": "1", "mask-lr10": "10", "mask-lr100": "100"}
                        lines.append(([task, PRIOR_TEXT[prior], c, speed[variant]], cells))
    if lines:
        print("**The mask's speed**: M's learning rate = scale x lr (--mask-lr-scale), at c = 2 and 6\n")
        print_table(["task", "G", "c", "mask lr scale"], lines)


def figure(runs, out):
    """Cube accuracy against P, one panel per task and c (c = 6 above, c = 2 below), mean ± std over
    the seeds; each variant a little to the side so that the error bars do not hide each other. A
    variant run at P = 0 and 0.3 only (the speed grid) is drawn as points, without a line."""
    import matplotlib
    matplotlib.use("Agg")  # write files only; no display needed
    import matplotlib.pyplot as plt
    styles = {"mask-frozen": ("k", "--", "mask-frozen"), "mask": ("C0", "-", "mask, lr"),
              "mask-lr10": ("C1", "-", "mask, 10 x lr"), "mask-lr100": ("C3", "-", "mask, 100 x lr"),
              "qk-opt": ("C2", ":", "qk-opt")}
    fig, axes = plt.subplots(2, len(TASKS), figsize=(3.4 * len(TASKS), 5.6), squeeze=False)
    for row, suffix in enumerate(["", "-c2"]):
        for ax, task in zip(axes[row], TASKS):
            drawn = False
            for k, (variant, (colour, line, label)) in enumerate(styles.items()):
                points = [(NOISE[p], [r["cube"] for r in runs[(p + suffix, task, variant)].values()])
                          for p in NOISE if (p + suffix, task, variant) in runs]
                if not points:
                    continue
                drawn = True
                x = [p + 0.006 * (k - 2) for p, _ in points]
                y = [statistics.mean(v) for _, v in points]
                e = [statistics.stdev(v) if len(v) > 1 else 0 for _, v in points]
                ax.errorbar(x, y, yerr=e, color=colour, linestyle=line if len(points) == len(NOISE) else "none",
                            marker="o", ms=4, capsize=3, label=label)
            if not drawn:
                ax.axis("off")
                continue
            ax.set_title(f"{task}, c = {2 if suffix else 6}")
            ax.set_xticks(sorted(NOISE.values()))
            ax.grid(alpha=0.3)
            ax.set_xlabel("prior noise P")
        axes[row][0].set_ylabel("cube accuracy %")
    handles = {}
    for ax in axes.flat:
        for handle, label in zip(*ax.get_legend_handles_labels()):
            handles.setdefault(label, handle)
    legend_at = next((ax for ax in axes.flat if not ax.axison), axes[0][-1])
    legend_at.legend(handles.values(), handles.keys(), loc="center", fontsize=9)
    fig.tight_layout()
    fig.savefig(out, dpi=80)
    print(f"wrote {out}")


def main(argv):
    if len(argv) != 2:
        print(__doc__, file=sys.stderr)
        sys.exit(2)
    runs = load(argv[1])
    unknown = sorted({k[2] for k in runs} - set(VARIANTS)) + sorted({k[0] for k in runs} - set(
        PRIORS + [p + "-c2" for p in PRIORS]))
    if unknown:
        fail(f"unknown variants or priors under {argv[1]}: {', '.join(unknown)}")
    wrong_prior_table(runs)
    speed_table(runs)
    devices = sorted({run["device"] for group in runs.values() for run in group.values()})
    print(f"measured on: {', '.join(devices)}")
    figure(runs, os.path.join(argv[1], "prior-robustness.png"))


if __name__ == "__main__":
    main(sys.argv)
