"""The inits' names as the program's table holds them (maskprior --list variants, prior/inits.cuh):
in the order the tables and plots show them, each init with its mask variants (mask-frozen,
mask-alibi, ...). The tools take the order from here, so that no script repeats the names.
The program is $MASKPRIOR_BINARY, else ./maskprior at the repository's top (make builds it)."""
import os
import subprocess
import sys

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


def program_list(what):
    """The first word of each line of `maskprior --list WHAT`, in order."""
    binary = os.environ.get("MASKPRIOR_BINARY") or os.path.join(ROOT, "maskprior")
    try:
        out = subprocess.run([binary, "--list", what], capture_output=True, text=True, check=True).stdout
    except (OSError, subprocess.CalledProcessError) as e:
        sys.exit(f"{os.path.basename(sys.argv[0])}: error: cannot ask {binary} for its {what} ({e}); "
                 "build it with make")
    return [line.split()[0] for line in out.splitlines() if line.strip()]


VARIANT_ORDER = program_list("variants")


def variant_rank(name):
    """Where an init (or init variant) goes in a table: its place in the program's order; a name
    the program does not know goes last."""
    return VARIANT_ORDER.index(name) if name in VARIANT_ORDER else len(VARIANT_ORDER)
