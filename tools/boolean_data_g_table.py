#!/usr/bin/python3
"""A markdown table of G from the target against G from the seen data (experiments/boolean_data_g_table.sh),
from the runs' metrics.json files (never from stdout).

    tools/boolean_data_g_table.py ROOT

Reads every ROOT/*/metrics.json of a Boolean run and groups the runs by their folder less -sN
(NAME-default, NAME-mask: the oracle G, NAME-mask-g-data: the data's G, as the script names them).
One row per target: its name, f and the hold-out (as metrics.json records them), two readings of
it computed here from f's values, then the unseen accuracy (sign, over the held-out points where
f != 0) of the MDI (mdi_acc_unseen), the default init, the mask with the oracle G and the mask with
the data's G, each the mean over the seeds and, in parentheses, the seeds' own (seed 1 first), and
what the data's G was read off. The two readings:

  weight off U's bits  the share of f's Fourier weight (sum of f^(A)^2 over A != {}) on monomials
                       that hold no bit the hold-out's constraints read;
  shown by a symmetry  the share of the held-out points (f != 0) that some permutation of the bits
                       f reads, one that leaves f as it is (f^(sigma A) = f^(A) for every A), moves
                       onto a seen point, where f takes the same value.

f is evaluated from its text here (the grammar of --target is a subset of Python's expressions,
with the same precedence; sign() as the program's), its coefficients by a Walsh-Hadamard transform.
Then the runs' summed minutes and the machine.
"""
import statistics
import sys

from boolean_targets_table import load as boolean_runs  # the Boolean runs by folder less -sN

BITS = 15


def sign(v):
    return 1.0 if v > 0 else -1.0 if v < 0 else 0.0


def values(expr):
    """f at every point of the cube (point p: x_i = +1 where bit i of p is set)."""
    code = compile(expr, "<target>", "eval")
    out = []
    for p in range(1 << BITS):
        names = {"x%d" % i: (1.0 if p >> i & 1 else -1.0) for i in range(BITS)}
        names["sign"] = sign
        out.append(float(eval(code, {"__builtins__": {}}, names)))
    return out


def parities(cond):
    """The hold-out's constraints as (bit mask, sign): x0*x1=1 -> (0b11, 1)."""
    out = []
    for constraint in cond.replace(" ", "").split(","):
        product, value = constraint.split("=")
        mask = 0
        for bit in product.split("*"):
            mask |= 1 << int(bit[1:])
        out.append((mask, 1 if float(value) > 0 else -1))
    return out


def chi(mask, p):
    return -1 if bin(mask & ~p).count("1") % 2 else 1


def held_out(constraints, p):
    return all(chi(mask, p) == s for mask, s in constraints)


def coefficients(f):
    """f^(A) for every set A (a bit mask): f^(A) = 2^-n sum_x f(x) chi_A(x)."""
    c = list(f)
    half = 1
    while half < len(c):
        for block in range(0, len(c), 2 * half):
            for k in range(block, block + half):
                c[k], c[k + half] = c[k] + c[k + half], c[k] - c[k + half]
        half *= 2
    return [v / len(c) * (-1 if bin(A).count("1") % 2 else 1) for A, v in enumerate(c)]


def weight_off(f_hat, constraints):
    """The share of f's non-constant Fourier weight on monomials without a bit the constraints read."""
    read = 0
    for mask, _ in constraints:
        read |= mask
    total = sum(v * v for v in f_hat[1:])
    return sum(v * v for A, v in enumerate(f_hat) if A and not A & read) / total


def automorphisms(f_hat):
    """The permutations of the bits f reads that keep every coefficient, each as {bit: image}."""
    largest = max(abs(v) for v in f_hat[1:])
    support = {A: v for A, v in enumerate(f_hat) if A and abs(v) > 1e-12 * largest}
    read = sorted({i for A in support for i in range(BITS) if A >> i & 1})
    position = {b: k for k, b in enumerate(read)}
    complete_at = {}  # the monomials whose last bit (in read's order) is each bit
    for A in support:
        complete_at.setdefault(max(position[i] for i in range(BITS) if A >> i & 1), []).append(A)
    found = []

    def extend(k, image):
        if k == len(read):
            found.append(dict(image))
            return
        for b in read:
            if b in image.values():
                continue
            image[read[k]] = b
            if all(abs(support.get(sum(1 << image[i] for i in range(BITS) if A >> i & 1), 0.0) - support[A])
                   <= 1e-12 * largest for A in complete_at.get(k, [])):
                extend(k + 1, image)
            del image[read[k]]
    extend(0, {})
    return found


def shown_by_symmetry(f, f_hat, constraints):
    """The share of the held-out points with f != 0 that an automorphism of f moves onto a seen point.
    A point p moves to sigma(p) (its bit i at sigma(i)), which is held out where p meets the
    constraints pulled back, chi_{sigma^-1(T)}(p) = s."""
    pulled = set()
    for sigma in automorphisms(f_hat):
        inverse = {b: i for i, b in sigma.items()}
        pulled.add(tuple(sorted((sum(1 << inverse.get(i, i) for i in range(BITS) if mask >> i & 1), s)
                                for mask, s in constraints)))
    points = [p for p in range(1 << BITS) if held_out(constraints, p) and f[p] != 0]
    shown = sum(any(not held_out(back, p) for back in pulled) for p in points)
    return shown / len(points) if points else float("nan")


def percent(share):
    """A share in percent to two decimals, trailing zeros dropped: 87.5%, 99.98%, 20%."""
    return ("%.2f" % (100 * share)).rstrip("0").rstrip(".") + "%"


def kind(m):
    """default, mask (the oracle G) or mask-g-data, as the script's folders end."""
    return m["variant"] + ("-g-data" if m.get("g_from") == "data" else "")


def load(root):
    """The Boolean runs with G's source, grouped by target name then kind, and when each target's first
    run finished."""
    groups, group_finished = boolean_runs(root)
    targets, finished = {}, {}
    for group, runs in groups.items():
        if "g_from" not in runs[0]:
            continue
        suffix = "-" + kind(runs[0])
        name = group[:-len(suffix)] if group.endswith(suffix) else group
        targets.setdefault(name, {})[kind(runs[0])] = runs
        finished[name] = min(finished.get(name, float("inf")), group_finished[group])
    return targets, finished


def accuracy(runs):
    """The mean unseen accuracy over the seeds, then the seeds', in percent: 66.7 (100, 0, 100)."""
    if not runs:
        return "-"
    runs = sorted(runs, key=lambda m: m["seed"])
    each = [100 * m["acc_unseen"] for m in runs if m["acc_unseen"] is not None]
    text = lambda v: "%d" % round(v) if abs(v - round(v)) < 0.05 else "%.1f" % v
    return "%s (%s)" % (text(statistics.mean(each)), ", ".join(text(v) for v in each)) if each else "-"


def data_g(by_kind):
    """What the data's G was read off, beside the oracle's."""
    oracle = by_kind.get("mask", [{}])[0].get("g_support")
    data = by_kind.get("mask-g-data", [{}])[0].get("g_support")
    if data is None:
        return "-"
    if oracle == data:
        return "the oracle's"
    read = ", ".join("`%s`" % A for A in data) if len(data) <= 4 else "%d monomials" % len(data)
    return read + (" (oracle: by hand)" if oracle is None and "mask" in by_kind else "")


def main(argv):
    if len(argv) != 2:
        sys.exit(__doc__)
    targets, finished = load(argv[1])
    if not targets:
        sys.exit(f"boolean_data_g_table.py: error: no metrics.json of a Boolean run with g_from under {argv[1]}")
    header = ["name", "f", "unseen", "weight off U's bits", "shown by a symmetry", "MDI unseen %", "default",
              "mask, oracle G", "mask, data G", "data G read off"]
    print("| " + " | ".join(header) + " |")
    print("|" + "|".join("---" for _ in header) + "|")
    devices, seconds = set(), 0.0
    for name in sorted(targets, key=lambda n: finished[n]):
        by_kind = targets[name]
        first = next(iter(by_kind.values()))[0]
        for runs in by_kind.values():
            devices.update(m["device"] for m in runs)
            seconds += sum(m["seconds"] for m in runs)
        f = values(first["target"])
        constraints = parities(first["unseen"])
        f_hat = coefficients(f)
        target = first["target"] if first["task"] == "boolean" else first["task"]
        mdi = first["mdi_acc_unseen"]
        cells = [name, "`%s`" % (target if len(target) <= 40 else target[:37] + "..."), "`%s`" % first["unseen"],
                 percent(weight_off(f_hat, constraints)), percent(shown_by_symmetry(f, f_hat, constraints)),
                 "-" if mdi is None else "%.1f" % (100 * mdi),
                 accuracy(by_kind.get("default", [])), accuracy(by_kind.get("mask", [])),
                 accuracy(by_kind.get("mask-g-data", [])), data_g(by_kind)]
        print("| " + " | ".join(cells) + " |")
    print(f"\nunseen accuracy in %, the mean over seeds (each seed's); {seconds / 60:.1f} minutes of runs in all; "
          f"measured on: {', '.join(sorted(devices))}")


if __name__ == "__main__":
    main(sys.argv)
