#!/usr/bin/python3
"""Turns run folders into PNG plots (docs/runs.md, "What a run leaves"; docs/method.md, "Measuring persistence").

    tools/plot.py RUN_DIR [RUN_DIR ...] --out DIR [--title TEXT]

Each RUN_DIR is what one run of maskprior leaves: log.jsonl, one JSON object per evaluation
(step, loss, eval_loss, the task's metrics, the per-layer persistence lists), and
metrics.json (task, init, seed, ...). Writes into DIR, and prints the path of each file:

    loss.png         training loss (log y) and eval loss against step, one colour per init
    prior_mass.png   prior mass against step, one panel per init, one colour per layer
    persistence.png  one column per init; row 1 mask drift and QK cosine to step 0,
                     row 2 the norms of the mask and QK gradients (log y)
    accuracy.png     the task's accuracy against step (cube and unseen, answer, or top-1), one
                     panel per init

A metric may be missing or null in any line; a figure whose metrics no run logged is left
out, with a note on stderr. Bad input: one line "plot.py: error: ..." on stderr, exit 2.
"""
import argparse
import json
import os
import sys

import matplotlib
matplotlib.use("Agg")  # write files only; no display needed
import matplotlib.pyplot as plt

from names import VARIANT_ORDER, variant_rank  # the inits in the program's order (maskprior --list)

# the colour of each init in loss.png (its place in the program's order)
INIT_COLOUR = {init: f"C{i % 10}" for i, init in enumerate(VARIANT_ORDER)}
LAYER_STYLE = ["-", "--", ":", "-."]  # persistence.png: the line style of layer 0, 1, ...
plt.rcParams.update({"font.size": 11, "axes.titlesize": 12, "legend.fontsize": 9})


def fail(message):
    print(f"plot.py: error: {message}", file=sys.stderr)
    sys.exit(2)


def parse(text, where):
    """The JSON value in text; `where` names it in the error message."""
    try:
        return json.loads(text)
    except ValueError as e:
        fail(f"{where}: malformed JSON ({e})")


def load_run(folder):
    """One run as {'init', 'task', 'rows'}, rows being log.jsonl's objects in order."""
    texts = {}
    for name in ("metrics.json", "log.jsonl"):
        try:
            with open(os.path.join(folder, name)) as f:
                texts[name] = f.read()
        except (OSError, UnicodeDecodeError) as e:
            fail(f"{folder}: cannot read {name} ({getattr(e, 'strerror', None) or e})")
    metrics = parse(texts["metrics.json"], f"{folder}/metrics.json")
    if not isinstance(metrics, dict) or "init" not in metrics:
        fail(f"{folder}/metrics.json: no init")
    rows = [parse(line, f"{folder}/log.jsonl line {number}")
            for number, line in enumerate(texts["log.jsonl"].splitlines(), 1) if line.strip()]
    if not rows or not all(isinstance(row, dict) and isinstance(row.get("step"), (int, float)) for row in rows):
        fail(f"{folder}/log.jsonl: no evaluations, or one that is not an object with a step")
    # the init with its variant (mask-alibi, mask-frozen: language runs), so that variants are panels of their own
    return {"init": str(metrics.get("variant", metrics["init"])), "task": metrics.get("task"), "rows": rows}


def logged(runs, key):
    """Whether any evaluation of any run has a value for key."""
    return any(row.get(key) is not None for run in runs for row in run["rows"])


def layer_count(run, key):
    """How many layers the per-layer list key has in this run (0 if never logged)."""
    return max((len(row[key]) for row in run["rows"] if isinstance(row.get(key), list)), default=0)


def draw(ax, run, key, layer=None, **style):
    """Plots key (entry `layer` of it, for a per-layer list) against step, leaving out the
    evaluations where it is missing or null, and on a log axis the values <= 0 it cannot
    show."""
    steps, values = [], []
    for row in run["rows"]:
        value = row.get(key)
        if layer is not None:
            value = value[layer] if isinstance(value, list) and layer < len(value) else None
        if isinstance(value, (int, float)) and (ax.get_yscale() != "log" or value > 0):
            steps.append(row["step"])
            values.append(value)
    if steps:
        ax.plot(steps, values, lw=1, alpha=0.85, **style)


def legend(ax):
    """A legend with one entry per distinct label (the seeds of one init share a label)."""
    handles, labels = ax.get_legend_handles_labels()
    unique = dict(zip(labels, handles))
    if unique:
        ax.legend(unique.values(), unique.keys())


def not_logged(ax):
    """Marks a panel with nothing to plot; its frame stays, so that a shared
    y axis keeps its tick labels."""
    ax.set(xticks=[], xlabel="")
    ax.text(0.5, 0.5, "no data", transform=ax.transAxes, ha="center", color="gray")


def figure(rows, columns, title, sharey="row"):
    """A grid of panels whose width grows with the number of columns; by default the panels
    of a row share their y axis, so that the inits compare at a glance."""
    fig, axes = plt.subplots(rows, columns, figsize=(1 + 4.2 * columns, 0.8 + 3.4 * rows),
                             squeeze=False, sharey=sharey)
    fig.suptitle(title)
    return fig, axes


def init_title(init, runs):
    """'mask (5 seeds)': a panel's title."""
    return f"{init} ({len(runs)} seed{'s' if len(runs) != 1 else ''})"


def plot_loss(by_init, title):
    fig, ((train, evaluation),) = figure(1, 2, f"{title}: loss", sharey=False)
    train.set_yscale("log")
    for init, runs in by_init.items():
        for run in runs:  # one thin line per seed, one colour per init
            draw(train, run, "loss", color=INIT_COLOUR.get(init), label=init)
            draw(evaluation, run, "eval_loss", color=INIT_COLOUR.get(init), label=init)
    train.set(title="training loss (last step)", xlabel="step", ylabel="loss (log scale)")
    evaluation.set(title="eval loss", xlabel="step", ylabel="loss")
    legend(train)
    return fig


def plot_per_init(by_init, title, ylabel, lines):
    """One panel per init, y from 0 to 1; lines(run) lists the (key, layer, colour, label) to draw."""
    fig, axes = figure(1, len(by_init), title)
    for ax, (init, runs) in zip(axes[0], by_init.items()):
        ax.set(title=init_title(init, runs), xlabel="step", ylim=(-0.02, 1.02))
        for run in runs:
            for key, layer, colour, label in lines(run):
                draw(ax, run, key, layer, color=colour, label=label)
        if ax.lines:
            legend(ax)
        else:
            not_logged(ax)
    axes[0][0].set_ylabel(ylabel)
    return fig


def plot_prior_mass(by_init, title):  # one line per (seed, layer), one colour per layer
    return plot_per_init(by_init, f"{title}: prior mass (attention on the keys G allows)", "prior mass",
                         lambda run: [("prior_mass", layer, f"C{layer}", f"layer {layer}")
                                      for layer in range(layer_count(run, "prior_mass"))])


# accuracy.png: Boolean runs log the sign accuracy on the cube, arithmetic runs the held-out
# accuracy of the greedily decoded answer, image runs the top-1 test accuracy; (key, colour,
# legend name)
ACCURACY_LINES = [("acc_cube", "C0", "whole cube"), ("acc_unseen", "C3", "unseen part"),
                  ("seq_acc", "C0", "whole answer"), ("digit_acc", "C3", "answer digits"),
                  ("acc", "C0", "test top-1")]


def plot_accuracy(by_init, title):  # one line per seed, one colour per part of the cube or answer
    return plot_per_init(by_init, f"{title}: accuracy", "accuracy",
                         lambda run: [(key, None, colour, name) for key, colour, name in ACCURACY_LINES])


# persistence.png, one row each: (key, legend name, colour), and the row's y label.
PERSISTENCE_ROWS = [
    ([("mask_drift", "mask drift", "C4"), ("qk_cosine", "QK cosine to step 0", "C1")], "drift / cosine"),
    ([("grad_norm_mask", "|grad mask|", "C4"), ("grad_norm_qk", "|grad QK|", "C1")], "gradient norm (log)"),
]


def plot_persistence(by_init, title):
    fig, axes = figure(2, len(by_init), f"{title}: persistence of the prior")
    for column, (init, runs) in enumerate(by_init.items()):
        for row, (metrics, ylabel) in enumerate(PERSISTENCE_ROWS):
            ax = axes[row][column]
            ax.set_yscale("log" if row == 1 else "linear")
            for key, name, colour in metrics:  # colour tells the metric, line style the layer
                for run in runs:
                    for layer in range(layer_count(run, key)):
                        draw(ax, run, key, layer, color=colour, ls=LAYER_STYLE[layer % len(LAYER_STYLE)],
                             label=f"{name}, layer {layer}")
            ax.set(title=init_title(init, runs), xlabel="step", ylabel=ylabel if column == 0 else "")
            if ax.lines:
                legend(ax)
            else:
                not_logged(ax)
    return fig


# Each figure: file name, the keys it shows (left out when no run logged any), how to draw it.
FIGURES = [
    ("loss.png", ["loss", "eval_loss"], plot_loss),
    ("prior_mass.png", ["prior_mass"], plot_prior_mass),
    ("persistence.png", ["mask_drift", "qk_cosine", "grad_norm_mask", "grad_norm_qk"], plot_persistence),
    ("accuracy.png", [key for key, _, _ in ACCURACY_LINES], plot_accuracy),
]


def main():
    parser = argparse.ArgumentParser(prog="plot.py", description="Plots maskprior run folders as PNG files.")
    parser.add_argument("runs", nargs="*", metavar="RUN_DIR", help="a folder with log.jsonl and metrics.json")
    parser.add_argument("--out", required=True, metavar="DIR", help="folder for the PNG files")
    parser.add_argument("--title", help="title above each figure (default: the task names)")
    parser.error = fail  # argparse's own errors too: one line, exit 2
    args = parser.parse_args()
    if not args.runs:
        fail("no run folders given")
    runs = [load_run(folder) for folder in args.runs]
    by_init = {}
    rank = lambda init: (variant_rank(init), init)
    for run in sorted(runs, key=lambda r: rank(r["init"])):
        by_init.setdefault(run["init"], []).append(run)
    title = args.title or ", ".join(sorted({str(r["task"]) for r in runs if r["task"] is not None})) or "runs"
    try:
        os.makedirs(args.out, exist_ok=True)
    except OSError as e:
        fail(f"cannot create {args.out} ({e.strerror})")
    for name, keys, plot in FIGURES:
        if not any(logged(runs, key) for key in keys):
            print(f"plot.py: note: {name} left out: no run logged {', '.join(keys)}", file=sys.stderr)
            continue
        fig = plot(by_init, title)
        fig.tight_layout()
        path = os.path.join(args.out, name)
        fig.savefig(path, dpi=120)
        plt.close(fig)
        print(path)


if __name__ == "__main__":
    main()
