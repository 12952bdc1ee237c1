#!/usr/bin/env python3
"""tests/check_ptxas_report.py [--root DIR] [--report FILE]: dev/ptxas-report.txt names exactly the
kernels that main.cu's build compiles.

The kernels: every `__global__ ... name(` in main.cu and in the project files it includes
("..." includes, followed recursively from ROOT, default the folder above tests/), comments
stripped; not emu/ or tests/, and not the lines compiled only under MASKPRIOR_CUDA_EMULATION
(the branch of an #ifdef, #ifndef or #if defined() of it that holds when it is defined). A
template kernel is one name, as the report lists it. The report: the first word of each line of FILE (default
ROOT/dev/ptxas-report.txt) below its "kernel regs ..." header. No nvcc needed: `make
ptxas-report` writes the report, and this only says when it is stale.

Exit 0 with one line when the two sets agree; 1 with one line naming the kernels the report
lacks (or names that no kernel has) and the command that regenerates it; 2 when a file is missing.
"""
import argparse
import os
import re
import sys

INCLUDE_RE = re.compile(r'^\s*#\s*include\s*"([^"]+)"', re.M)
KERNEL_RE = re.compile(r"\b__global__\s+(?:\w+\s+)*?void\s+(?:__launch_bounds__\s*\([^()]*\)\s*)?(\w+)\s*\(")
COMMENT_RE = re.compile(r"//[^\n]*|/\*.*?\*/", re.S)
EMULATION = "MASKPRIOR_CUDA_EMULATION"
SKIPPED = ("emu/", "tests/")


def branch(word, condition):
    """What an #ifdef / #ifndef / #if opens: "emulation" (compiled only with the emulation),
    "nvcc" (only without it) or "both" (any other condition: either branch may hold a kernel)."""
    condition = condition.strip()
    defined = condition == EMULATION if word != "if" else re.fullmatch(
        r"(!\s*)?defined\s*(\(\s*%s\s*\)|\s%s)" % (EMULATION, EMULATION), condition)
    if not defined:
        return "both"
    negated = word == "ifndef" or (word == "if" and condition.startswith("!"))
    return "nvcc" if negated else "emulation"


def nvcc_lines(text):
    """text without the lines that only the emulation compiles (the branch of a conditional on
    MASKPRIOR_CUDA_EMULATION that holds when it is defined); the directives themselves go too,
    but for #include."""
    kept, stack = [], []  # stack: what each open conditional's current branch is, as branch() says
    for line in text.split("\n"):
        directive = re.match(r"\s*#\s*(\w+)(.*)", line)
        word = directive.group(1) if directive else ""
        if word in ("if", "ifdef", "ifndef"):
            stack.append(branch(word, directive.group(2)))
        elif word == "else" and stack:
            stack[-1] = {"emulation": "nvcc", "nvcc": "emulation"}.get(stack[-1], "both")
        elif word == "elif" and stack:
            stack[-1] = "both"
        elif word == "endif" and stack:
            stack.pop()
        elif "emulation" not in stack:
            kept.append(line)
    return "\n".join(kept)


def compiled_kernels(root):
    """{kernel name: the file that declares it} over main.cu and what it includes."""
    kernels, seen, todo = {}, set(), ["main.cu"]
    while todo:
        path = todo.pop()
        if path in seen or path.startswith(SKIPPED):
            continue
        seen.add(path)
        with open(os.path.join(root, path), encoding="utf-8") as f:
            text = nvcc_lines(COMMENT_RE.sub("", f.read()))
        for name in KERNEL_RE.findall(text):
            kernels.setdefault(name, path)
        for included in INCLUDE_RE.findall(text):
            # "..." looks beside the including file first, then in -I. (the root)
            beside = os.path.normpath(os.path.join(os.path.dirname(path), included))
            todo.append(beside if os.path.isfile(os.path.join(root, beside)) else os.path.normpath(included))
    return kernels


def reported_kernels(report):
    """The kernel column of a report that dev/ptxas_report.py wrote."""
    names, table = set(), False
    with open(report, encoding="utf-8") as f:
        for line in f:
            words = line.split()
            if words[:2] == ["kernel", "regs"]:
                table = True
            elif table and len(words) == 6 and words[1].isdigit():
                names.add(words[0])
    return names


def main():
    root_default = os.path.normpath(os.path.join(os.path.dirname(os.path.abspath(__file__)), ".."))
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--root", default=root_default)
    parser.add_argument("--report", help="default: ROOT/dev/ptxas-report.txt")
    args = parser.parse_args()
    report = args.report or os.path.join(args.root, "dev", "ptxas-report.txt")
    try:
        kernels, listed = compiled_kernels(args.root), reported_kernels(report)
    except OSError as e:
        print("check_ptxas_report: %s" % e)
        sys.exit(2)
    inside = os.path.relpath(report, args.root)
    shown = report if inside.startswith("..") else inside  # as the message names it
    missing = sorted(set(kernels) - listed)
    stale = sorted(listed - set(kernels))
    if not missing and not stale:
        print("%s names all %d kernels main.cu's build compiles" % (shown, len(kernels)))
        return
    problems = []
    if missing:
        problems.append("lacks %s" % ", ".join("%s (%s)" % (k, kernels[k]) for k in missing))
    if stale:
        problems.append("names %s, which no kernel has" % ", ".join(stale))
    print("%s is stale: it %s; regenerate it with make ptxas-report (nvcc, no GPU)" % (shown, "; it ".join(problems)))
    sys.exit(1)


if __name__ == "__main__":
    main()
