"""tests/table_counts.py: the counts a document gives for a table's runs, against the runs its
script makes (tests/check_docs.py calls it; standard library only).

A table's script (experiments/*_table.sh, sweep_2parity.sh, headline.sh) prints its runs instead
of running them under SCHEDULER=list, one a line: the run's folder, then its flags. From those
lines come the counts a document may give:

  runs       the lines
  seeds      the --seed values of each configuration (its folder less -sN): the same for all
  tasks, inits, fractions   the distinct --task, --init and --data-frac values
  variants   the distinct inits as the runs name them: --init with --freeze-mask, --pe-scale,
             --mask-prior (mask-frozen, default-pe18, mask-alibi)
  data sets  the distinct (--task, --data-dir) pairs
  settings   the distinct folders the runs' folders sit in (a sweep's settings)
  epochs, steps   the one --epochs or --steps value every run passes (else not checked)

A count is "N unit" (N in digits or a word from two to twenty: "3 seeds", "four inits"; not
"one", which is as often an article: "in one run"), "seeds A-B",
or a product "A unit x B unit x ...", whose value must be the number of runs. The counts are
read on a line that names the table's command, in its comment when the command is in a code
block, and in the Makefile's header, in each target's entry.
"""
import os
import re
import shlex
import subprocess
import tempfile

NUMBER_WORDS = dict(zip("two three four five six seven eight nine ten eleven twelve thirteen fourteen "
                        "fifteen sixteen seventeen eighteen nineteen twenty".split(), range(2, 21)))
UNITS = {"run": "runs", "seed": "seeds", "task": "tasks", "init": "inits", "variant": "variants",
         "fraction": "fractions", "setting": "settings", "data set": "data sets", "dataset": "data sets",
         "epoch": "epochs", "step": "steps"}
NUMBER = r"(\d+|%s)" % "|".join(NUMBER_WORDS)
UNIT = r"(%s)s?" % "|".join(sorted(UNITS, key=len, reverse=True))
COUNT_RE = re.compile(r"(?<![\w.=-])%s\s+%s\b" % (NUMBER, UNIT), re.I)
PRODUCT_RE = re.compile(r"%s\s+%s(?:\s*[x×]\s*%s\s+%s)+" % (NUMBER, UNIT, NUMBER, UNIT), re.I)
SEED_RANGE_RE = re.compile(r"\bseeds (\d+)\s*[-–]\s*(\d+)\b", re.I)
# A table's recipe or command: its variables, then sh experiments/x.sh and the script's arguments.
SCRIPT_RE = re.compile(r"^(?:\w+=(?:\"[^\"]*\"|\S*)\s+)*(?:sh\s+)?(experiments/\w+\.sh)(?:\s[^;&|<>`$\\]*)?$")
# The data folders the tables' scripts look for before they list their runs, and the files they test.
DATA_FOLDERS = {"CIFAR10_DIR": ["data_batch_1.bin"], "TINYSTORIES_DIR": ["train.bin"], "WIKITEXT_DIR": ["train.bin"]}
SAFE_RE = re.compile(r"[\w ./:=+,-]*")  # a value that may go into a shell command as it is


def number(word):
    return NUMBER_WORDS.get(word.lower()) or int(word)


class Runs:
    """The counts of a table's runs, from its SCHEDULER=list lines."""

    def __init__(self, lines):
        self.runs = [(words[0], self.flags(words[1:])) for words in map(str.split, lines) if words]
        self.counts = {"runs": {len(self.runs)}}
        for unit, key in (("tasks", lambda f: f.get("--task")), ("inits", lambda f: f.get("--init")),
                          ("fractions", lambda f: f.get("--data-frac")),
                          ("variants", lambda f: tuple(f.get(k) for k in ("--init", "--freeze-mask", "--pe-scale",
                                                                          "--mask-prior"))),
                          ("data sets", lambda f: (f.get("--task"), f.get("--data-dir")))):
            self.counts[unit] = {len({key(f) for _, f in self.runs if key(f) is not None})}
        self.counts["settings"] = {len({os.path.dirname(folder) for folder, _ in self.runs})}
        seeds = {}
        for folder, f in self.runs:
            seeds.setdefault(re.sub(r"-s\d+$", "", folder), set()).add(f.get("--seed"))
        self.counts["seeds"] = {len(s) for s in seeds.values()}
        self.seed_sets = {frozenset(s) for s in seeds.values()}
        for unit in ("epochs", "steps"):
            values = [f.get("--" + unit) for _, f in self.runs]
            if all(values):
                self.counts[unit] = {int(v) for v in values}

    @staticmethod
    def flags(words):
        """A run's flags, --flag: its value (True for a switch)."""
        flags = {}
        for k, word in enumerate(words):
            if word.startswith("--"):
                value = words[k + 1] if k + 1 < len(words) and not words[k + 1].startswith("--") else True
                flags[word] = value
        return flags

    def problems(self, text):
        """(the count named, why it is wrong) for each count in text that the runs do not have."""
        found = []
        for m in COUNT_RE.finditer(text):
            n, unit = number(m.group(1)), UNITS[m.group(2).lower()]
            have = self.counts.get(unit)
            if have is not None and have != {n}:
                found.append((m.group(0), "the runs have %s" % self.say(unit, have)))
        for m in SEED_RANGE_RE.finditer(text):
            named = frozenset(str(s) for s in range(int(m.group(1)), int(m.group(2)) + 1))
            if self.seed_sets != {named}:
                found.append((m.group(0), "the runs' seeds are %s" % " or ".join(
                    ",".join(sorted(s, key=int)) for s in self.seed_sets)))
        for m in PRODUCT_RE.finditer(text):
            value = 1
            for n in re.findall(NUMBER, m.group(0), re.I):
                value *= number(n)
            if {value} != self.counts["runs"]:
                found.append((m.group(0), "that is %d runs, and there are %d" % (value, len(self.runs))))
        return found

    @staticmethod
    def say(unit, have):
        return "%d %s" % (min(have), unit) if len(have) == 1 else "%d to %d %s" % (min(have), max(have), unit)


class Tables:
    """The tables' scripts run with SCHEDULER=list, each command once."""

    def __init__(self, tree, make):
        self.tree, self.make = tree, make
        self.listed = {}
        # the data folders, a folder each, with the files the scripts test for before they list
        # (vision_table.sh: CIFAR-10's binary version; lm_table.sh: a token folder's train.bin);
        # the listing reads none of them
        self.data = tempfile.TemporaryDirectory(prefix="maskprior-docs-")
        self.folders = {}
        for variable, files in DATA_FOLDERS.items():
            self.folders[variable] = os.path.join(self.data.name, variable)
            os.mkdir(self.folders[variable])
            for name in files:
                open(os.path.join(self.folders[variable], name), "w").close()

    def of_command(self, words, assignments):
        """The runs of a simple command, its words after its VAR=value ones (assignments: those of
        the whole command): make TARGET..., whose first table target counts, or sh experiments/x.sh;
        None when it runs no table."""
        if words[:1] in (["make"], ["gmake"]):
            return next(filter(None, (self.of_make(t, assignments) for t in words[1:] if "=" not in t)), None)
        return self.of_script(words, assignments) if words else None

    def of_make(self, target, assignments):
        """The runs of `make TARGET VAR=value...` (assignments {VAR: value}, before or after make),
        or None when the target's recipe does not run a table's script."""
        recipe = self.make.recipes.get(target, [])
        if len(recipe) != 1:
            return None
        return self.listing(self.make.expand(recipe[0], overrides=assignments), assignments)

    def of_script(self, words, assignments):
        """The runs of `[sh] experiments/x.sh ARGS...` (its words), or None when it is not a table's script."""
        words = words[1:] if words[0] in ("sh", "bash") else words
        return self.listing(" ".join(map(shlex.quote, ["sh", os.path.normpath(words[0])] + words[1:])), assignments)

    def listing(self, command, assignments):
        """Runs, or why there are none (a string), of a shell command that runs a table's script
        under SCHEDULER=list; None when the command runs no script that reads SCHEDULER (itself or
        the file it sources), or a value in it is not a plain word."""
        m = SCRIPT_RE.match(command.strip().lstrip("@"))
        if not m or m.group(1) not in self.tree.files or not all(SAFE_RE.fullmatch(v) for v in assignments.values()):
            return None
        text = self.tree.text(m.group(1))
        if "SCHEDULER" not in text + "".join(map(self.tree.text, re.findall(r"\. (experiments/\w+\.sh)", text))):
            return None
        key = (command, tuple(sorted(assignments.items())))
        if key not in self.listed:
            env = dict(os.environ, **assignments)
            env.update(self.folders, SCHEDULER="list")
            shown = "SCHEDULER=list " + m.group(0).strip()
            try:
                p = subprocess.run(m.group(0), shell=True, cwd=self.tree.root, env=env, capture_output=True,
                                   text=True, timeout=20)
                lines = [line for line in p.stdout.splitlines() if line.strip()]
                why = "" if p.returncode == 0 and lines else (p.stderr.strip() or "exit %d" % p.returncode)[:200]
            except subprocess.SubprocessError as e:
                lines, why = [], str(e)
            self.listed[key] = "%s listed no runs (%s)" % (shown, why) if why else Runs(lines)
        return self.listed[key]


def header_entries(makefile_text):
    """The Makefile's header comment as (line, text, the words after its "make"s) entries, one per
    '#   make ...' line with the lines indented below it."""
    entries = []
    for i, line in enumerate(makefile_text.split("\n")):
        if not line.startswith("#"):
            break
        if re.match(r"#   make\b", line):
            entries.append([i + 1, line[1:]])
        elif entries and re.match(r"#\s{5,}\S", line):
            entries[-1][1] += " " + line[1:].strip()
    return [(line, text, list(dict.fromkeys(w.rstrip(".,:;)") for w in re.findall(r"\bmake ([\w./-]+)", text))))
            for line, text in entries]
