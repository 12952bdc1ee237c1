#!/usr/bin/env python3
"""dev/ptxas_report.py OUT NVCC [ARGS...]: what ptxas says of every kernel, one line each.

Runs `NVCC ARGS... -Xptxas -v` (make ptxas-report passes main.cu for sm_90), reads ptxas's lines
per kernel (registers, stack frame, spill stores and loads, static shared memory) and writes them
to OUT as a table, with the nvcc version and the date. A per-thread array that ptxas cannot keep
in registers shows as a stack frame (layers/launch.cuh: UNROLL). Exit 1 when nvcc fails, when it reports
no kernel, or when a kernel has a stack frame or spills; the table is written in every case but
the first.
"""
import datetime
import os
import re
import subprocess
import sys
import textwrap

# ptxas -v, per entry function: "Function properties for NAME", then its stack and spills, then
# "Used N registers, ..., M bytes smem" (smem only when the kernel has static shared memory)
KERNEL_RE = re.compile(r"Function properties for (\S+)\n\s*(\d+) bytes stack frame, (\d+) bytes spill stores, "
                       r"(\d+) bytes spill loads\nptxas info\s*: Used (\d+) registers([^\n]*)")
SMEM_RE = re.compile(r"(\d+) bytes smem")


def kernel_name(mangled):
    """The name in an Itanium-mangled _Z<length><name>..., else the symbol itself."""
    m = re.match(r"_Z(\d+)", mangled)
    return mangled[m.end():m.end() + int(m.group(1))] if m else mangled


def main():
    if len(sys.argv) < 3:
        sys.exit(__doc__)
    out, command = sys.argv[1], sys.argv[2:]
    p = subprocess.run(command + ["-Xptxas", "-v"], capture_output=True, text=True)
    if p.returncode != 0:
        sys.stderr.write(p.stdout + p.stderr)
        sys.exit("ptxas_report: nvcc failed (exit %d)" % p.returncode)
    version = [line for line in subprocess.run([command[0], "--version"], capture_output=True, text=True).stdout
               .splitlines() if "release" in line]
    rows = []
    for m in KERNEL_RE.finditer(p.stdout + p.stderr):
        smem = SMEM_RE.search(m.group(6))
        rows.append((kernel_name(m.group(1)), int(m.group(5)), int(m.group(2)), int(m.group(3)), int(m.group(4)),
                     int(smem.group(1)) if smem else 0))
    rows.sort()
    bad = [r[0] for r in rows if r[2] or r[3] or r[4]]
    with open(out, "w") as f:
        f.write("# ptxas -v for every kernel (make ptxas-report):\n")
        shown = " ".join([os.path.basename(command[0])] + command[1:])
        f.write("".join("#   %s\n" % line for line in textwrap.wrap(shown, 100, break_on_hyphens=False)))
        f.write("# %s, %s\n" % (version[0] if version else "nvcc version unknown", datetime.date.today()))
        f.write("# bytes; smem is the static shared memory (the dynamic part is the launch's)\n")
        f.write("%-44s %5s %6s %9s %9s %6s\n" % ("kernel", "regs", "stack", "spill st", "spill ld", "smem"))
        for r in rows:
            f.write("%-44s %5d %6d %9d %9d %6d\n" % r)
        f.write("%d kernels; %s\n" % (len(rows), "with a stack frame or spills: " + " ".join(bad) if bad
                                      else "every one at 0 bytes of stack, no spills"))
    print("ptxas_report: %d kernels in %s; %s" % (len(rows), out, "stack or spills: " + " ".join(bad) if bad
                                                   else "every one at 0 bytes of stack, no spills"))
    sys.exit(1 if bad or not rows else 0)


if __name__ == "__main__":
    main()
