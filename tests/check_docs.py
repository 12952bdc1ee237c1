#!/usr/bin/env python3
"""tests/check_docs.py [--root DIR] [FILE.md ...]: the documents name only what exists.

It checks the names in the code spans, code blocks and links of the FILEs, or of README.md,
docs/*.md and every markdown file git tracks under --root (default: the folder above tests/):

  paths  a word with a '/' that starts at a top-level file or folder (or at one beside the
         document) must exist, and so must a relative link and its #anchor; a name from inside
         the tree (a bare x.cu, x.cuh, x.h, x.c, x.cpp, x.py; fuzz/) must end some path of it, in
         a table row whose first cell is a folder (| `layers/` | ...) a path under that folder.
         Not checked: placeholders (< > * { } $ ..., DIR, N), absolute paths, URLs, and what
         git ignores (builds, runs/, fetched data).
  make   a `make ...` command's targets must be the Makefile's (variables and pattern rules
         included), its VAR=value words variables that the Makefile or a project script reads.
  flags  a --flag of ./maskprior (maskprior-emulated, ...) must be in `$MASKPRIOR_BINARY --help`
         (default ROOT/maskprior); of a project script or program, in its argparse options or
         among the flags its source parses; of a code span that starts with a flag (`--init
         mask`) or of a VAR=value, a flag of one of those or of a program in EXTERNAL_FLAGS.
  counts a count of a table's runs (3 seeds, 45 runs, 3 tasks x 5 variants x 3 seeds) on a line
         that names the table's command must be what its script lists under SCHEDULER=list
         (tests/table_counts.py says which counts and how they are read).
  figures the numbers README.md's "Results in brief" quotes (tests/quoted_figures.py says where).
Without FILEs it also checks the reverse: every flag `--help` prints is named in
docs/command-line.md, every make target the Makefile's header names is named in a document, and
the header's counts are those of its tables' runs.

A FILE outside ROOT is read as if it sat at ROOT's top (test_docs.sh's copy of README.md). One
line per problem, FILE:LINE: <what> is named but <why> (the reverse: <what> is in <where>, but
...), then a count. Exit 0: no problem; 1: problems; 2: no binary to ask for its flags, or a bad
command line. Standard library only; it never runs make (its $(shell ...) writes .build-settings).
"""
import argparse
import functools
import glob
import os
import pathlib
import re
import subprocess
import sys

import quoted_figures
import table_counts

# Flags of programs that are not the project's, which the documents use: keep it to those.
EXTERNAL_FLAGS = {
    "sbatch": {"--array", "--partition", "--time", "--gres", "--requeue", "--signal"},
    "gdb": {"--args"},
    "git": {"--always", "--dirty"},  # git describe, metrics.json's git_commit
}
INTERPRETERS = {"sh", "bash", "python", "python3", "/usr/bin/python3", "$PYTHON", "${PYTHON}"}
MASKPRIOR_PROGRAMS = {"maskprior", "maskprior-emulated", "maskprior-sanitize"}
# Paths of other projects that the documents name on purpose: llm.c's kernel lab, the model of dev/.
FOREIGN_PATHS = {"dev/cuda"}
# A bare file name with one of these endings is a source file name: it must exist somewhere
# (not .sh or .md: the tables write scripts such as array.sh into their run folders).
SOURCE_ENDINGS = (".cu", ".cuh", ".h", ".c", ".cpp", ".py")
# This checker and its test plant stale names: their text is not a source of valid names.
SELF = {"tests/check_docs.py", "tests/table_counts.py", "tests/test_docs.sh"}

FLAG_RE = re.compile(r"--[A-Za-z0-9][A-Za-z0-9_-]*")
# The flags a shell script parses: its case patterns, tests and usage lines; another program's:
# its quoted "--flag" strings.
SHELL_FLAGS_RE = re.compile(r"(--[A-Za-z0-9][\w-]*)\*?(?:\)|\|(?=-))"  # --paper)  --seeds|-s)
                            r"|=\s*[\"']?(--[A-Za-z0-9][\w-]*)[\"']?\s*\]"  # [ "$1" = --quick ]
                            r"|\[(--[A-Za-z0-9][\w-]*)")  # [--seeds N]
QUOTED_FLAGS_RE = re.compile(r"[\"'](--[A-Za-z0-9][\w-]*)[\"']")
ASSIGN_RE = re.compile(r"^([A-Za-z_][A-Za-z0-9_]*)=(.*)$", re.S)
UPPER_RE = re.compile(r"^[A-Z][A-Z0-9_]*(\+[0-9]+)?$")  # DIR, RUN_DIR, N, N+1
PLACEHOLDER_RE = re.compile(r"<[^<>\n]*>")  # <run dir>, spaces and all
# A code span (CommonMark): a run of backquotes, then the shortest text without a blank line
# up to a run of the same length.
SPAN_RE = re.compile(r"(?<!`)(`+)(?!`)((?:(?!\n[ \t]*\n).)+?)(?<!`)\1(?!`)", re.S)
# A shell word, its quotes and backslashes still in it, or a run of separators; what unquotes it.
SHELL_WORD_RE = re.compile(r"""(?:[^\s;&|()'"\\]|\\.|'[^']*'?|"[^"]*"?)+|[;&|()]+""")
QUOTED_RE = re.compile(r"""\\(.)|'([^']*)'?|"([^"]*)"?""")


def fail(message):
    """A bad command line, or nothing to check against: exit code 2."""
    print("check_docs: " + message)
    sys.exit(2)


def help_flags(binary):
    """The flags `binary --help` prints; exit code 2 when it prints none."""
    try:
        p = subprocess.run([binary, "--help"], capture_output=True, text=True, errors="replace", timeout=20)
        flags = set(FLAG_RE.findall(p.stdout + p.stderr))
    except (OSError, subprocess.SubprocessError):
        flags = set()
    if "--help" not in flags:
        fail("%s --help printed no flags: build it with `make` (or set MASKPRIOR_BINARY)" % binary)
    return flags


def is_placeholder(word):
    """Whether a word stands for names rather than being one: <dir>, *.cu, $RUN, x..., DIR/x, N."""
    if any(c in word for c in "<>*{}$?") or "..." in word or "…" in word:
        return True
    return any(UPPER_RE.match(part) for part in word.replace("=", "/").split("/") if part)


def shell_commands(text):
    """The simple commands of a shell line, each the list of its words, unquoted: ';', '&',
    '|' and parentheses separate them, a word that starts with '#' ends the line, and a
    <placeholder> is one word."""
    commands = [[]]
    for m in SHELL_WORD_RE.finditer(PLACEHOLDER_RE.sub("<PH>", text)):
        word = m.group(0)
        if word[0] in ";&|()":
            commands.append([])
        elif word.startswith("#"):
            break
        else:
            commands[-1].append(QUOTED_RE.sub(lambda q: "".join(filter(None, q.groups())), word))
    return [c for c in commands if c]


def slug(heading):
    """GitHub's anchor for a heading: lower case, punctuation dropped, spaces to '-'."""
    h = re.sub(r"!?\[([^\]]*)\]\([^)]*\)", r"\1", heading.replace("`", "")).strip().lower()
    return re.sub(r"[^\w\- ]", "", h).replace(" ", "-")


def line_of(text, offset):
    return text.count("\n", 0, offset) + 1


class Document:
    """A markdown file: the commands of its code blocks, its code spans, links and headings'
    anchors. rel is where it sits in the tree, shown the name its problems are reported by."""

    def __init__(self, rel, text, shown=None):
        self.rel, self.dir, self.shown = rel, os.path.dirname(rel), shown or rel
        self.lines = text.split("\n")
        self.commands, code = self.code_blocks()
        # the text outside code blocks, their lines blanked so that offsets stay the text's
        prose = "\n".join(" " * len(line) if i in code else line for i, line in enumerate(self.lines))
        self.spans = [(line_of(prose, m.start()), m.group(2).replace("\n", " ").strip())
                      for m in SPAN_RE.finditer(prose)]
        outside = SPAN_RE.sub(lambda m: re.sub(r"[^\n]", " ", m.group(0)), prose)
        self.outside_lines = outside.split("\n")  # the prose, its code spans blanked
        inline = r"\]\(\s*<?([^()\s<>]+)>?(?:\s+\"[^\"]*\")?\s*\)"  # [text](target "title")
        definition = r"(?m)^ {0,3}\[[^\]]+\]:\s*<?(\S+?)>?(?:\s.*)?$"  # [label]: target
        self.links = [(line_of(outside, m.start(1)), m.group(1))
                      for regex in (inline, definition) for m in re.finditer(regex, outside)]
        slugs = [slug(m.group(1)) for i, line in enumerate(self.lines) if i not in code
                 for m in [re.match(r"^ {0,3}#{1,6}\s+(.*?)\s*#*\s*$", line)] if m]
        # a repeated heading's anchor gets -1, -2, ...
        self.anchors = {s + ("-%d" % slugs[:k].count(s) if s in slugs[:k] else "") for k, s in enumerate(slugs)}

    def code_blocks(self):
        """The command lines of the fenced and indented code blocks, each [line number, text],
        and the set of the indexes of every code line (fences included). In a block, a line that
        ends in '\\' goes on with the next, and a line that starts with a flag belongs to the
        command before it."""
        commands, code, indented = [], set(), set()
        fence = None  # the fence of the open fenced block
        first = joined = False  # whether the next code line starts a block; the last one ended in '\'
        for i, line in enumerate(self.lines):
            s = line.strip()
            opening = re.match(r" {0,3}(`{3,}|~{3,})", line)
            after_blank = i == 0 or not self.lines[i - 1].strip()
            if fence and s.startswith(fence) and not s.strip(fence[0]):  # the closing fence
                fence = None
                code.add(i)
            elif opening and not fence:
                fence, first = opening.group(1), True
                code.add(i)
            elif fence or line.startswith("    ") and s and (after_blank or i - 1 in indented):
                if not fence:  # an indented block, which a blank line ends
                    first = i - 1 not in indented
                    indented.add(i)
                if first or not (joined or re.match(r"\[?--?[A-Za-z]", s)):
                    commands.append([i + 1, s.rstrip("\\")])
                else:
                    commands[-1][1] += " " + s.rstrip("\\")
                first, joined = False, s.endswith("\\")
                code.add(i)
        return commands, code


class Tree:
    """The files under root: tracked, and untracked ones git does not ignore."""

    def __init__(self, root):
        self.root = root
        self.files = set(self.git("ls-files", "-z", "--cached", "--others", "--exclude-standard"))
        self.markdown = sorted(self.git("ls-files", "-z", "*.md"))
        self.top = {f.split("/")[0] for f in self.files}
        self.dirs = {f.rsplit("/", k)[0] for f in self.files for k in range(1, f.count("/") + 1)}

    def git(self, *args):
        p = subprocess.run(["git", "-C", self.root, *args], capture_output=True, text=True)
        if p.returncode != 0:
            fail("%s is not a git work tree (git %s: %s)" % (self.root, args[0], p.stderr.strip()[:200]))
        return [f for f in p.stdout.split("\0") if f]

    def exists(self, rel):
        return os.path.exists(os.path.join(self.root, rel))

    def ignored(self, rel):
        """Whether git ignores a path, as a file or as a folder: an output (a build, runs/,
        fetched data), which need not be there."""
        rel = rel.rstrip("/")
        p = subprocess.run(["git", "-C", self.root, "check-ignore", "--", rel, rel + "/"], capture_output=True)
        return p.returncode == 0

    @functools.cache
    def text(self, rel):
        path = pathlib.Path(self.root, rel)
        return path.read_text(encoding="utf-8", errors="replace") if path.is_file() else ""


class Makefile:
    """The Makefile's targets and variables, read without running make: its rules' targets
    ($(VAR) expanded), .PHONY's, and its pattern rules (a static pattern rule's pattern too)."""

    ASSIGNMENT = re.compile(r"\s*(?:export\s+|override\s+)?([A-Za-z_]\w*)\s*(:=|::=|\?=|\+=|=)\s*(.*)")
    RULE = re.compile(r"([^:=#]+?)\s*::?(?!=)\s*(.*)")

    def __init__(self, tree):
        self.tree = tree
        self.vars, self.targets = {}, set()
        self.patterns = []  # (a target with a '%', its prerequisites with a '%')
        self.recipes, rule_targets = {}, []  # target: its recipe's lines; the last rule's targets
        for line in tree.text("Makefile").replace("\\\n", " ").split("\n"):
            if line.startswith("\t"):
                for target in rule_targets:
                    self.recipes.setdefault(target, []).append(line.strip())
                continue
            line = line.split("#", 1)[0].rstrip()
            if not line.strip():
                continue
            assignment, rule = self.ASSIGNMENT.match(line), self.RULE.match(line)
            rule_targets = []
            if assignment:
                name, op, value = assignment.groups()
                self.vars[name] = self.vars.get(name, "") + " " + value if op == "+=" else value
            elif rule:
                rule_targets = self.expand(rule.group(1)).split()
                self.add_rule(rule_targets, rule.group(2))

    def add_rule(self, targets, rest):
        """A rule, targets: prerequisites, or a static pattern rule, targets: pattern: prerequisites."""
        pattern, static, prerequisites = rest.partition(":")
        prerequisites = self.expand(prerequisites if static else pattern).split()
        if ".PHONY" in targets:
            self.targets.update(prerequisites)
        for t in targets + ([pattern.strip()] if static else []):
            if "%" in t:
                self.patterns.append((t, [p for p in prerequisites if "%" in p]))
            elif not t.startswith("."):
                self.targets.add(t)

    def expand(self, text, depth=0, overrides=None):
        """Make's $(VAR) and ${VAR} in text, overrides ({VAR: value}, make's command line) first;
        any other reference (a function call) expands to nothing."""
        def value(m):
            name = m.group(1) or m.group(2) or ""
            if name in (overrides or {}):
                return overrides[name]
            return self.expand(self.vars.get(name, ""), depth + 1) if re.fullmatch(r"\w+", name) and depth < 8 else ""
        return re.sub(r"\$\(([^()]*)\)|\$\{([^{}]*)\}", value, text)

    def is_target(self, name):
        """A rule's target, or a pattern rule's whose '%' prerequisites exist (fuzz_x needs fuzz_x.cpp)."""
        if name in self.targets:
            return True
        for target, prerequisites in self.patterns:
            stem = re.fullmatch(re.escape(target).replace("%", "(.+)", 1), name)
            needs = [p.replace("%", stem.group(1), 1) for p in prerequisites] if stem else []
            if stem and all(self.tree.exists(p) or p in self.targets for p in needs):
                return True
        return False


class Checker:
    """Checks a document's names against the tree, its Makefile and the programs' flags."""

    def __init__(self, tree, binary, binary_shown):
        self.tree = tree
        self.make = Makefile(tree)
        self.tables = table_counts.Tables(tree, self.make)
        self.found = []  # (line, problem) of the document being checked
        self.named_targets = set()  # the make targets the documents checked so far name
        self.binary_shown = binary_shown
        self.counts = dict.fromkeys(("paths", "anchors", "targets", "variables", "flags", "counts", "figures"), 0)
        self.maskprior_flags = help_flags(binary)
        self.maskprior_whose = "%s --help" % binary_shown
        self.any_whose = ("%s --help, in what a script or program of the project takes, nor in the table of "
                          "external programs' flags in tests/check_docs.py" % binary_shown)

    def problem(self, doc, line, what, why):
        self.found.append((line, "%s:%d: %s is named but %s" % (doc.shown, line, what, why)))

    @functools.cache
    def document(self, rel):
        return Document(rel, self.tree.text(rel))

    def check_document(self, doc):
        """The problems of a document, in the order of its lines."""
        self.found = []
        counted = set()  # the lines whose counts were checked, against their first table command
        for line, content in doc.spans:
            self.check_paths(doc, line, content, self.row_folder(doc.lines[line - 1]))
            self.check_command_line(doc, line, content, span=True)
            if line not in counted and self.check_counts(doc, line, content, doc.outside_lines[line - 1]):
                counted.add(line)
        for line, text in doc.commands:
            self.check_paths(doc, line, text)
            self.check_command_line(doc, line, text)
            self.check_counts(doc, line, text, text.partition(" #")[2])
        for line, target in doc.links:
            self.check_link(doc, line, target)
        return [text for _, text in sorted(dict.fromkeys(self.found), key=lambda problem: problem[0])]

    # ---- paths

    def row_folder(self, text):
        """The folder a table row is about when its first cell is one (| `layers/` | ...), as 'layers/'."""
        m = re.match(r"\s*\|\s*`([\w.+-][\w./+-]*/)`\s*\|", text)
        folder = os.path.normpath(m.group(1)) if m else ""
        return folder + "/" if folder in self.tree.dirs else ""

    def check_paths(self, doc, line, text, row_folder=""):
        """The paths among the words of a code span or command (in a folder's table row, .sh names too)."""
        endings = SOURCE_ENDINGS + (".sh",) if row_folder else SOURCE_ENDINGS
        for word in re.split(r"[\s=,|`]+", PLACEHOLDER_RE.sub("<PH>", text)):
            kind, name = self.path_named(doc, word, endings)
            if kind == "path":
                self.check_path(doc, line, name, name)
            elif kind == "inside":
                self.check_inside(doc, line, name, row_folder)

    def path_named(self, doc, word, endings):
        """What a word of code names: ("path", P), P a path from the top of the tree; ("inside",
        N), a file or folder named from inside the tree (x.cu, fuzz/); or (None, word)."""
        w = re.sub(r"^[(\[\"']+|(:\d+(-\d+)?)?[)\]\"',.:;!?]*$", "", word)  # x.cuh:158, its place dropped
        if not w or "://" in w or w[0] in "/~-@=" or is_placeholder(word) or is_placeholder(w):
            return None, w
        w = (w[2:] if w.startswith("./") else w).split("#", 1)[0]
        first = w.split("/")[0]
        if "/" in w and first in self.tree.top:
            return "path", w
        if "/" in w and doc.dir and self.tree.exists(os.path.join(doc.dir, first)):
            return "path", doc.dir + "/" + w
        parts = w.rstrip("/").split("/")
        if parts[0] != ".." and all(re.fullmatch(r"[\w+-][\w.+-]*", p) for p in parts) and w.endswith(("/",) + endings):
            return "inside", w
        return None, w

    def check_path(self, doc, line, rel, shown):
        """A path from the top of the tree must exist, unless git ignores it. True when it exists."""
        self.counts["paths"] += 1
        norm = os.path.normpath(rel)
        if norm in FOREIGN_PATHS:
            return True
        if not self.tree.exists(norm):
            if not self.tree.ignored(norm):
                self.problem(doc, line, "path %s" % shown, "it does not exist in the tree")
            return False
        if rel.endswith("/") and not os.path.isdir(os.path.join(self.tree.root, norm)):
            self.problem(doc, line, "folder %s" % shown, "it is a file, not a folder")
        return True

    def check_inside(self, doc, line, name, row_folder):
        """A name from inside the tree must end some path of it (one under row_folder when given)."""
        self.counts["paths"] += 1
        kind, pool = ("folder", self.tree.dirs) if name.endswith("/") else ("file", self.tree.files)
        found = sorted(p for p in pool if p == name.rstrip("/") or p.endswith("/" + name.rstrip("/")))
        if any(p.startswith(row_folder) for p in found) or self.tree.ignored(name):
            return
        if found:  # only outside the row's folder
            self.problem(doc, line, "%s %s" % (kind, name), "nothing under %s has that name (%s has)"
                         % (row_folder, ", ".join(found[:3])))
        else:
            self.problem(doc, line, "%s %s" % (kind, name), "no %s of the tree has that name" % kind)

    def check_link(self, doc, line, target):
        """A relative link's path must exist, and its #anchor be a heading of the markdown file."""
        if re.match(r"[a-z][a-z0-9+.-]*:|/", target, re.I):
            return  # a URL, mailto: and the like, or an absolute path
        path, _, anchor = target.partition("#")
        rel = os.path.normpath(os.path.join(doc.dir, path)) if path else doc.rel
        if path and not self.check_path(doc, line, rel + ("/" if path.endswith("/") else ""), path):
            return
        if anchor and rel.endswith(".md") and (rel == doc.rel or os.path.isfile(os.path.join(self.tree.root, rel))):
            self.counts["anchors"] += 1
            target_doc = doc if rel == doc.rel else self.document(rel)
            if anchor.lower() not in target_doc.anchors:
                self.problem(doc, line, "anchor #%s" % anchor, "%s has no heading with that anchor" % target_doc.shown)

    # ---- flags

    @functools.cache
    def program_flags(self, path):
        """(the flags a project program takes, whose they are): a python script's argparse
        options, else the flags its source parses: itself, or the x.cu, x.cpp or x.c that x is
        built from (dev/x-emulated from dev/x.cu, tests/fuzz/bin/fuzz_x from tests/fuzz/fuzz_x.cpp).
        (None, None) when it has no source."""
        built = re.sub(r"(-emulated|-sanitize|_asan|_sanitize)$", "", path).replace("/bin/", "/")
        source = next((s for s in (path, built + ".cu", built + ".cpp", built + ".c") if s in self.tree.files), None)
        if source is None:
            return None, None
        text = self.tree.text(source)
        if source.endswith(".py") and "argparse" in text:
            names = re.findall(r"add_argument\(\s*((?:[rbuf]?['\"][^'\"]*['\"]\s*,\s*)*[rbuf]?['\"][^'\"]*['\"])", text)
            flags = {"-h", "--help"} | set(re.findall(r"['\"](-[^'\"]*)['\"]", " ".join(names)))
            return flags, "%s's options (argparse)" % source
        return self.parsed_flags(source), "%s's source" % source

    def parsed_flags(self, source):
        """The flags a source parses (SHELL_FLAGS_RE, QUOTED_FLAGS_RE), in itself or in the files of
        its own folder that it includes (#include "x.h") or sources (. experiments/table_common.sh)."""
        text = self.tree.text(source)
        folder = os.path.dirname(source)
        used = {os.path.normpath(os.path.join(base, a or b)) for base in (folder, "")  # beside it, or from the top
                for a, b in re.findall(r'(?m)#\s*include\s+"([^"]+)"|^\s*(?:\.|source)\s+(\S+\.sh)\b', text)}
        used = [f for f in used if folder and f.startswith(folder + "/") and f in self.tree.files]
        regex = SHELL_FLAGS_RE if source.endswith(".sh") else QUOTED_FLAGS_RE
        text = "\n".join([text] + [self.tree.text(f) for f in used])
        return {"".join(m.groups("")) for m in regex.finditer(text)}  # the one group that matched

    @functools.cached_property
    def any_flags(self):
        """Every flag a standalone --flag may mean: maskprior's, the external table's, and those
        of every project script and of every program of the kernel lab and the tools."""
        flags = self.maskprior_flags.union(*EXTERNAL_FLAGS.values())
        for f in self.tree.files - SELF:
            if f.endswith((".py", ".sh")) or f.startswith(("dev/", "tools/")) and f.endswith((".cu", ".cpp", ".c")):
                flags |= self.program_flags(f)[0]
        return flags

    def check_flags(self, doc, line, words, allowed, whose):
        """Each --flag among the words must be one of allowed (the flags of whose)."""
        for word in words:
            m = re.match(r"[\[(]*(--[A-Za-z0-9][A-Za-z0-9_-]*)", word)
            if m and not is_placeholder(m.group(1)):
                self.counts["flags"] += 1
                if m.group(1) not in allowed:
                    self.problem(doc, line, "flag %s" % m.group(1), "it is not in %s" % whose)

    # ---- commands

    def check_command_line(self, doc, line, text, span=False):
        """The commands of a code block's command line or of a code span."""
        commands = shell_commands(text)
        if span and commands and re.match(r"\[?--[A-Za-z0-9]", commands[0][0]):
            # a code span that starts with a flag (`--init mask`): flags of some program here
            self.check_flags(doc, line, [w for c in commands for w in c], self.any_flags, self.any_whose)
            return
        for words in commands:
            self.check_command(doc, line, words)

    def runs_project_program(self, word):
        """Whether a command word is a path into the tree (tests/x.sh, ./dev/x; ../x from below the top)."""
        name = os.path.normpath(word)
        return "/" in name and name.split("/")[0] in self.tree.top | {".."}

    def check_command(self, doc, line, words):
        """The names of a simple command: make's targets, or the flags of the program it runs."""
        n = next((k for k, w in enumerate(words) if not ASSIGN_RE.match(w)), len(words))
        if n == len(words):
            return
        assignments, program, args = words[:n], words[n], words[n + 1:]
        interpreted = program in INTERPRETERS and bool(args) and not args[0].startswith("-")
        if interpreted:  # sh script.sh ...: the script's command line
            program, args = args[0], args[1:]
        name = os.path.normpath(program)
        if name in ("make", "gmake"):
            self.check_make(doc, line, assignments, args)
        elif name in MASKPRIOR_PROGRAMS:
            self.check_flags(doc, line, args, self.maskprior_flags, self.maskprior_whose)
        elif interpreted or self.runs_project_program(program):
            flags, whose = (None, None) if is_placeholder(program) else self.program_flags(name)
            if flags is None:  # a script that is not the project's, or a placeholder
                flags, whose = self.any_flags, self.any_whose
            self.check_flags(doc, line, args, flags, whose)
        else:  # another program: its own flags, when the table has them, then what it runs (gdb --args ./maskprior)
            k = next((k for k, w in enumerate(args) if os.path.normpath(w) in MASKPRIOR_PROGRAMS or w in INTERPRETERS
                      or self.runs_project_program(w)), len(args))
            if name in EXTERNAL_FLAGS:
                self.check_flags(doc, line, args[:k], EXTERNAL_FLAGS[name],
                                 "the table of external programs' flags in tests/check_docs.py (%s)" % name)
            if args[k:]:
                self.check_command(doc, line, args[k:])

    def check_make(self, doc, line, assignments, args):
        """make's targets must be the Makefile's (its options and their numbers, -j 4, are not
        targets), each VAR=value a variable the Makefile or a project script reads, with flags
        in its value that some program takes."""
        assignments = assignments + [w for w in args if ASSIGN_RE.match(w)]
        targets = [w for w in args if not (w.startswith("-") or w.isdigit() or ASSIGN_RE.match(w) or is_placeholder(w))]
        for t in targets:
            self.counts["targets"] += 1
            self.named_targets.add(t)
            if not self.make.is_target(t):
                self.problem(doc, line, "make target %s" % t, "the Makefile has no such target")
        for name, value in (ASSIGN_RE.match(a).groups() for a in assignments):
            self.counts["variables"] += 1
            if name not in self.make.vars and name not in self.script_words:
                self.problem(doc, line, "variable %s" % name, "neither the Makefile nor a project script reads it")
            self.check_flags(doc, line, value.split(), self.any_flags, self.any_whose)  # BOOLEAN_ARGS="--paper"

    @functools.cached_property
    def script_words(self):
        """The words of the project's scripts: among them the variables make's environment hands them."""
        scripts = [f for f in self.tree.files - SELF if f.endswith((".sh", ".py"))]
        return set(re.findall(r"\w+", "\n".join(self.tree.text(f) for f in scripts)))

    # ---- counts, and the reverse: what the program and the Makefile offer, the documents name

    def check_counts(self, doc, line, command, text):
        """The counts text gives (tests/table_counts.py) against the runs of the first table command
        among command's; True when command runs a table."""
        for words in shell_commands(command):
            n = next((k for k, w in enumerate(words) if not ASSIGN_RE.match(w)), len(words))
            assignments = dict(ASSIGN_RE.match(w).groups() for w in words if ASSIGN_RE.match(w))
            runs = self.tables.of_command(words[n:], assignments)
            if runs is not None:
                self.report_counts(doc.shown, line, runs, text, self.found)
                return True
        return False

    def report_counts(self, shown, line, runs, text, found):
        """Each wrong count of text, a problem of shown:line (runs: table_counts.Runs, or why there are none)."""
        named = [m.group(0) for regex in (table_counts.COUNT_RE, table_counts.SEED_RANGE_RE, table_counts.PRODUCT_RE)
                 for m in regex.finditer(text)]
        self.counts["counts"] += len(named)
        wrong = runs.problems(text) if isinstance(runs, table_counts.Runs) else [(n, runs) for n in named[:1]]
        for count, why in wrong:
            found.append((line, "%s:%d: count %s is named but %s" % (shown, line, count, why)))

    def check_reverse(self):
        """After every document: each flag --help prints is named in docs/command-line.md; each make
        target the Makefile's header names is named in a document, and the counts of the header's
        entries are those its tables' scripts run."""
        found = []
        page = self.document("docs/command-line.md")
        named = set(FLAG_RE.findall(" ".join(text for _, text in page.spans + page.commands)))
        for flag in sorted(self.maskprior_flags - named):
            found.append((0, "%s: flag %s is in %s --help, but this page does not name it"
                          % (page.shown, flag, self.binary_shown)))
        for line, text, words in table_counts.header_entries(self.tree.text("Makefile")):
            targets = [t for t in words if self.make.is_target(t)]
            for t in targets:
                if t not in self.named_targets:
                    found.append((line, "Makefile:%d: make target %s is in the Makefile's header, but no document "
                                  "names it" % (line, t)))
            runs = next(filter(None, (self.tables.of_make(t, {}) for t in targets)), None)
            if runs is not None:
                self.report_counts("Makefile", line, runs, text, found)
        return [text for _, text in found]


def documents(checker, files):
    """The documents to check: the FILEs (one outside the tree read as if at its top), or else
    README.md, docs/*.md and every markdown file git tracks."""
    tree, docs = checker.tree, []
    if not files:
        names = ["README.md"] + sorted(glob.glob("docs/*.md", root_dir=tree.root)) + tree.markdown
        return [checker.document(n) for n in dict.fromkeys(names) if os.path.isfile(os.path.join(tree.root, n))]
    for f in files:
        rel = os.path.relpath(os.path.abspath(f), tree.root)
        text = pathlib.Path(f).read_text(encoding="utf-8", errors="replace")
        docs.append(Document(os.path.basename(f) if rel.startswith("..") else rel, text, f))
    return docs


def main(argv):
    ap = argparse.ArgumentParser(prog="check_docs.py", description="The documents name only what exists.")
    ap.add_argument("--root", help="the tree the documents describe (default: the folder above tests/)")
    ap.add_argument("files", nargs="*", metavar="FILE.md")
    opts = ap.parse_args(argv)
    root = os.path.abspath(opts.root or os.path.join(os.path.dirname(__file__), ".."))
    binary = os.environ.get("MASKPRIOR_BINARY") or os.path.join(root, "maskprior")
    if not (os.path.isfile(binary) and os.access(binary, os.X_OK)):
        fail("no binary %s to ask for its flags: build it with `make` (or set MASKPRIOR_BINARY)" % binary)
    for f in opts.files:
        if not os.path.isfile(f):
            fail("no file %s" % f)
    shown = "./maskprior" if os.path.abspath(binary) == os.path.join(root, "maskprior") else binary
    checker = Checker(Tree(root), binary, shown)
    docs = documents(checker, opts.files)
    problems = [text for d in docs for text in checker.check_document(d) + quoted_figures.check(d, checker, slug)]
    if not opts.files:
        problems += checker.check_reverse()
    for text in problems:
        print(text)
    c, n = checker.counts, len(problems)
    print("check_docs: %d file%s: %d paths (%d anchors), %d make targets (%d variables), %d flags, %d counts, %d figures "
          "checked; %s" % (len(docs), "" if len(docs) == 1 else "s", *c.values(),
                           "%d problem%s" % (n, "" if n == 1 else "s") if n else "no problems"))
    return 1 if n else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
