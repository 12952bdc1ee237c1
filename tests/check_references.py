#!/usr/bin/env python3
"""tests/check_references.py [--root DIR] [--as REL FILE]...: what the documents and the comments say
about the code is where they say it is.

tests/check_docs.py checks that the names the documents use exist; this checks what they say of
them, in README.md, docs/*.md and every markdown file git tracks, and in the comments of the
source files (.cu .cuh .h .c .cpp .py .sh):

  keys    the keys docs/runs.md lists for log.jsonl and metrics.json (its bullets `log.jsonl`:
          and `metrics.json`:) are the keys a run writes, read from the code that writes them
          (RunLog::evaluation, evaluation_json and metrics_json in run/report.cuh, RunKeeper::finish
          in run/keeper.cuh, the tasks' metrics in tasks/*.h, the ema_ and train_acc of run/evaluate.cuh):
          each written key named, and each snake_case word of the bullets a written key.
  sets    a table of package sets (its header `| set | ... targets ... | ... packages |`): each row's
          `make X` targets are the Makefile's targets with a deps-SET prerequisite, and its packages
          those `sh tools/install-deps.sh --list SET` prints ("run's, and x" is run's set and x).
  places  a `file:N` or `file:N-M` names a file of the tree and lines within it, and a code name in
          the same parentheses (cudaMalloc, `worth_threads`) is written within 3 lines of them.
  names   in a document, "`name` (`file`)", "`name`, `file`" and "`name` in `file`": the file defines
          name (a function, type, field, constant or macro; def or NAME= in a script); in a comment,
          "name (file)", "(name, file)" and "name in file", name with a '_' or '()': the file's code
          or strings (not its comments) use it; an #include's comment (going on in '//' lines in its
          column below): each name before its ':' is defined by the header or a header it includes
          (x_* a prefix; _y after x_z means x_y), in the lesson's files (LESSON_FILES) by the header
          itself; and those files name in their include comments every name they use that a project
          header defines at its top level (llm.c's way: the reader sees where each name comes from;
          a name missing is reported as FILE:LINE: <name> is used but ...).
  figures the table README.md's "What `make run` shows" quotes has, per init, the figures of
          docs/results.md's headline row for maj3 and that init (0.9500 and 0.950 are the same); a
          figure with a unit right before a link to a page (0.48 nats below a bigram ([language](...)))
          is written in the section the link names; and a bullet of "Results in brief" whose linked
          sections were measured only on machines other than the one the section's first line names
          says which.

--as REL FILE checks FILE (a planted copy, tests/test_docs.sh) in place of the tree's REL. One line
per problem, FILE:LINE: <what> is named but <why>, then a count. Exit 0: no problem; 1: problems;
2: a bad command line. Standard library only; it runs tools/install-deps.sh --list, never make.
"""
import argparse
import functools
import os
import re
import subprocess
import sys

import check_docs
import quoted_figures

CODE = (".cu", ".cuh", ".h", ".c", ".cpp")
SOURCES = CODE + (".py", ".sh")
# The lesson's files: every name they take from a project header is named in an include's comment.
LESSON_FILES = ("attention.cuh", "model.cuh", "main.cu")
# Not a project header for that rule: CUDA itself (emu/ stands in for it without a GPU).
NOT_PROJECT = ("emu/",)
C_KEYWORDS = set("""alignas alignof asm auto bool break case catch char class const constexpr
    const_cast continue decltype default delete do double dynamic_cast else enum explicit extern false
    float for friend goto if inline int long mutable namespace new noexcept nullptr operator private
    protected public register reinterpret_cast return short signed sizeof static static_assert
    static_cast struct switch template this throw true try typedef typeid typename union unsigned using
    virtual void volatile while define include pragma once ifdef ifndef endif elif undef""".split())
# Words before a name that make it no definition: return x;, else y = 1;, new T(...)
NOT_TYPES = {"return", "else", "case", "new", "throw", "delete", "goto", "sizeof", "do", "if", "for", "while",
             "switch", "typename", "template", "operator", "using", "namespace", "define", "include", "pragma"}
PATH = r"(?:\./)?[\w-]+(?:/[\w.-]+)*\.(?:cuh|cu|h|c|cpp|py|sh)"
IDENT = r"[A-Za-z_]\w*"
# "name (file)", "(name, file)", "name in file" in a comment; in a document each part in backquotes
COMMENT_PAIRS = [re.compile(r"\b(%s)(?:\(\))?\s*\((%s)[),;:]" % (IDENT, PATH)),
                 re.compile(r"\((%s)(?:\(\))?,\s*(%s)\)" % (IDENT, PATH)),
                 re.compile(r"\b(%s)(?:\(\))?\s+(?:is\s+)?in\s+(%s)\b" % (IDENT, PATH))]
DOC_PAIRS = [re.compile(r"`(%s)(?:\(\))?`\s*\(`(%s)`" % (IDENT, PATH)),
             re.compile(r"`(%s)(?:\(\))?`,\s*`(%s)`" % (IDENT, PATH)),
             re.compile(r"`(%s)(?:\(\))?`\s+in\s+`(%s)`" % (IDENT, PATH))]
PLACE_RE = re.compile(r"(?<![\w/.-])(%s|[\w-]+(?:/[\w.-]+)*\.md):(\d+)(?:-(\d+))?(?![\w.-])" % PATH)
INCLUDE_RE = re.compile(r'^\s*#\s*include\s+(?:"([^"]+)"|<([^>]+)>)\s*(?://\s*(.*))?$')
UNIT = r"(?:s|ms|µs|us|%|x|points|nats|GB|MB|KB)"
# a figure, a unit, at most 60 characters of the same clause (no other figure), then a link
LINKED_FIGURE_RE = re.compile(r"(?<![\w.])(\d+(?:\.\d+)?)\s*%s(?![\w/])((?:(?!\d+(?:\.\d+)?\s*%s(?![\w/]))[^.;:,\n`]){0,60}?)"
                              r"((?:\[[^\]]*\]\([\w./-]*\.md(?:#[\w-]+)?\),?\s*)+)" % (UNIT, UNIT))
# a C++ line's definitions (definitions()): a type, a macro, an alias; a name after a type; the first of a line
TYPE_DEF_RE = re.compile(r"\b(?:struct|class|union|enum(?:\s+class)?)\s+(\w+)|#\s*define\s+(\w+)"
                         r"|\busing\s+(\w+)\s*=|\btypedef\b[^;]*?\b(\w+)\s*;")
NAME_DEF_RE = re.compile(r"([\w>*&\]]+)\s*[*&]*\s*\b(%s)\s*(?:\(|(?:\[[^\]]*\])*\s*(?:=(?!=)|;|\{|,|\)))" % IDENT)
LAUNCH_BOUNDS_DEF_RE = re.compile(r"\b__launch_bounds__\s*\([^()]*\)\s*(%s)\s*\(" % IDENT)
FIRST_DEF_RE = re.compile(r"\b(?:struct|class|union|enum(?:\s+class)?)\s+(\w+)|#\s*define\s+(\w+)"
                          r"|\busing\s+(\w+)\s*=|([\w>*&\]]+)\s*[*&]*\s*\b(%s)\s*[(\[=;{]" % IDENT)
C_COMMENT_RE, SCRIPT_COMMENT_RE = re.compile(r"//(.*)$"), re.compile(r"(?:^|\s)#(?![!\s]*include)(.*)$")
MACHINES = ("Intel Xeon", "AMD EPYC", "H200", "H100", "ARM64")
QUOTED_TABLE = ("README.md", "What `make run` shows", "docs/results.md",
                "the-headline-make-run-on-the-boolean-tasks", "maj3")


def strip_c(text, strings=False):
    """C/C++ text with its comments (and unless strings, its string literals) blanked, lines kept."""
    def blank(m):
        token = m.group(0)
        if token.startswith("/"):
            return re.sub(r"[^\n]", " ", token)
        return token if strings or token.startswith("'") else '""'
    return re.sub(r"//[^\n]*|/\*.*?\*/|\"(?:\\.|[^\"\\\n])*\"|'(?:\\.|[^'\\\n])*'", blank, text, flags=re.S)


def codelike(name):
    """Whether a word of prose is a name of code: x_y, camelCase, CONSTANT, TypeName (3+ characters)."""
    return len(name) > 2 and bool("_" in name or re.search(r"[a-z][A-Z]", name) or re.fullmatch(r"[A-Z]\w*", name))


class Code:
    """The project's source files: what each defines, includes and uses."""

    def __init__(self, tree):
        self.tree = tree

    def text(self, rel):
        return self.tree.text(rel)

    @functools.cache
    def definitions(self, rel):
        """(every name rel defines, those it defines at its top level: not indented, an enumerator,
        a macro). A C++ definition is a type, a macro, an alias, a kernel's name after
        __launch_bounds__(...), or a name after a type and before
        '(', '=', ';', '{', ',', ')' or '['; a script's a def, class or NAME=."""
        text, every, top = self.text(rel), set(), set()
        if rel.endswith(".py"):
            code = re.sub(r"#[^\n]*", "", text)
            every = set(re.findall(r"(?m)^\s*(?:def|class)\s+(\w+)|^\s*(\w+)\s*(?::[^=\n]*)?=(?!=)", code))
            every = {a or b for a, b in every}
            top = set(re.findall(r"(?m)^(?:def|class)\s+(\w+)|^(\w+)\s*=", code))
            return every, {a or b for a, b in top}
        if rel.endswith(".sh"):
            names = set(re.findall(r"(?m)^\s*(\w+)\s*\(\)|^\s*(\w+)=", re.sub(r"(?m)#[^\n]*", "", text)))
            names = {a or b for a, b in names}
            return names, names
        code = strip_c(text)
        every = {n for group in TYPE_DEF_RE.findall(code) for n in group if n}
        every |= {m.group(2) for m in NAME_DEF_RE.finditer(code) if m.group(1) not in NOT_TYPES}
        every |= set(LAUNCH_BOUNDS_DEF_RE.findall(code))  # a kernel after __launch_bounds__(...)
        every -= C_KEYWORDS
        for line in code.split("\n"):
            if line[:1] not in ("", " ", "\t", "}", ")"):  # a top-level line: its first name, not parameters
                first = FIRST_DEF_RE.search(line)
                if first and (first.group(4) or "") not in NOT_TYPES:
                    top |= {n for n in first.group(1, 2, 3, 5) if n} - C_KEYWORDS
        for body in re.findall(r"\benum\b[^{;]*\{([^}]*)\}", code):  # enumerators
            enumerators = set(re.findall(r"(?:^|,)\s*(\w+)", body))
            every |= enumerators
            top |= enumerators
        return every, top

    @functools.cache
    def includes(self, rel):
        """[(line number, the project file it includes or None, the system header or None, comment)]; a
        comment goes on in the lines below whose only text is a '//' comment in the same column."""
        found, lines = [], self.text(rel).split("\n")
        for i, line in enumerate(lines):
            m = INCLUDE_RE.match(line)
            if not m:
                continue
            local = m.group(1) and next((p for p in (os.path.normpath(os.path.join(os.path.dirname(rel), m.group(1))),
                                                     m.group(1)) if p in self.tree.files), None)
            comment, column = m.group(3) or "", line.find("//")
            for below in lines[i + 1:]:
                if column < 0 or not re.fullmatch(r" {%d}//\s*(.*)" % column, below):
                    break
                comment += " " + below[column + 2:].strip()
            found.append((i + 1, local, m.group(2), comment))
        return found

    @functools.cache
    def closure(self, rel):
        """rel and the project headers it includes, directly or not."""
        seen = [rel]
        for f in seen:
            seen += [p for _, p, _, _ in self.includes(f) if p and p not in seen]
        return tuple(seen)

    def defined_through(self, rel, name):
        """Whether rel or a project header it includes defines name."""
        return any(name in self.definitions(f)[0] for f in self.closure(rel))

    @functools.cache
    def used(self, rel):
        """The words of rel's code and strings, its comments left out."""
        if rel.endswith(CODE):
            return set(re.findall(r"\w+", strip_c(self.text(rel), strings=True)))
        return set(re.findall(r"\w+", re.sub(r"(?m)(^|\s)#[^\n]*", " ", self.text(rel))))


class References:
    """The checks, each adding its problems' lines to self.problems."""

    def __init__(self, tree, replaced):
        self.tree, self.code = tree, Code(tree)
        self.replaced = replaced  # {REL: FILE}: the planted copies read in place of the tree's files
        self.problems = []
        self.counts = dict.fromkeys(("keys", "sets", "places", "names", "figures"), 0)

    def shown(self, rel):
        return self.replaced.get(rel, rel)

    def problem(self, rel, line, what, why):
        self.problems.append("%s:%d: %s is named but %s" % (self.shown(rel), line, what, why))

    def lines(self, rel):
        return self.tree.text(rel).split("\n")

    # ---- keys

    def function_body(self, rel, name):
        """The text of the function name's body in rel (from its '{' to the matching '}')."""
        text = strip_c(self.tree.text(rel), strings=True)
        m = re.search(r"\b%s\s*\([^;{]*\)\s*(?:const\s*)?(?:override\s*)?\{" % re.escape(name), text)
        if not m:
            check_docs.fail("%s has no function %s, whose keys the keys check reads" % (rel, name))
        depth, i = 1, m.end()
        while depth and i < len(text):
            depth += {"{": 1, "}": -1}.get(text[i], 0)
            i += 1
        return text[m.end():i]

    def written_keys(self):
        """(log.jsonl's keys, metrics.json's keys) as the code writes them; a prefix ends in '_'."""
        keys = lambda body: set(re.findall(r'\["(\w+)"\]\s*=|\{\s*"(\w+)"\s*,', body))
        flat = lambda pairs: {a or b for a, b in pairs}
        evaluation = flat(keys(self.function_body("run/report.cuh", "evaluation_json")))
        for rel in sorted(f for f in self.tree.files if f.startswith("tasks/") and f.endswith(".h")):
            for name in ("metrics", "evaluate"):
                if re.search(r"Metrics\s+%s\s*\(" % name, self.tree.text(rel)):
                    evaluation |= flat(keys(self.function_body(rel, name)))
        scores = strip_c(self.tree.text("run/evaluate.cuh"), strings=True)  # ema_<metric>, train_acc
        evaluation |= set(re.findall(r'push_back\(\{"(\w+)"', scores)) | set(re.findall(r'"(\w+_)"\s*\+', scores))
        log = evaluation | flat(keys(self.function_body("run/report.cuh", "evaluation")))
        metrics = (evaluation | flat(keys(self.function_body("run/keeper.cuh", "finish")))
                   | flat(keys(self.function_body("run/report.cuh", "metrics_json")))
                   | flat(keys(self.function_body("run/setup.cuh", "boolean_facts"))))
        return log, metrics

    def check_keys(self):
        page = "docs/runs.md"
        lines = self.lines(page)
        bullets = {}  # the bullet's file name: (its first line, its text)
        for i, line in enumerate(lines):
            m = re.match(r"- `(log\.jsonl|metrics\.json)`:", line)
            if m:
                end = next((k for k in range(i + 1, len(lines)) if not lines[k].startswith("  ")), len(lines))
                bullets[m.group(1)] = (i + 1, "\n".join(lines[i:end]))
        if set(bullets) != {"log.jsonl", "metrics.json"}:
            self.problems.append("%s: the bullets `log.jsonl`: and `metrics.json`:, whose keys this check reads, are not "
                                 "both there" % self.shown(page))
            return
        log, metrics = self.written_keys()
        text = "\n".join(t for _, t in bullets.values())
        words = set(re.findall(r"\w+", re.sub(r"`[^`]*--[^`]*`", "", text)))  # a command's words are not keys
        for key in sorted(log | metrics):
            self.counts["keys"] += 1
            named = any(w.startswith(key) for w in words) if key.endswith("_") else key in words
            if not named:
                where = "log.jsonl and metrics.json" if key in log and key in metrics else \
                    "log.jsonl" if key in log else "metrics.json"
                self.problems.append("%s:%d: key %s is in %s as a run writes it, but this list does not name it"
                                     % (self.shown(page), bullets["metrics.json"][0], key, where))
        prefixes = [k for k in log | metrics if k.endswith("_")]
        for line, bullet in bullets.values():
            for k, row in enumerate(bullet.split("\n")):
                for word in re.findall(r"\b[a-z]\w*_\w+\b", re.sub(r"`[^`]*--[^`]*`", "", row)):
                    if word not in log | metrics and not any(word.startswith(p) for p in prefixes):
                        self.problem(page, line + k, "key %s" % word, "no run writes it to log.jsonl or metrics.json")

    # ---- sets

    @functools.cached_property
    def makefile_prerequisites(self):
        """{target: its prerequisites} of the Makefile's rules, $(VAR) expanded."""
        make = check_docs.Makefile(self.tree)
        found = {}
        for line in self.tree.text("Makefile").replace("\\\n", " ").split("\n"):
            m = None if line.startswith("\t") else check_docs.Makefile.RULE.match(line.split("#", 1)[0])
            if m and not check_docs.Makefile.ASSIGNMENT.match(line):
                for target in make.expand(m.group(1)).split():
                    found.setdefault(target, set()).update(make.expand(m.group(2)).split())
        return found

    @functools.cache
    def set_packages(self, name):
        p = subprocess.run(["sh", os.path.join(self.tree.root, "tools/install-deps.sh"), "--list", name],
                           capture_output=True, text=True)
        return set(p.stdout.split()) if p.returncode == 0 else None

    def check_sets(self, rel):
        lines = self.lines(rel)
        for i, line in enumerate(lines[:-1]):
            head = [c.strip().lower() for c in line.strip().strip("|").split("|")]
            if not (head[0] == "set" and lines[i + 1].startswith("|---")):
                continue
            targets_col = next((k for k, c in enumerate(head) if "targets" in c), None)
            packages_col = next((k for k, c in enumerate(head) if "packages" in c), None)
            for k in range(i + 2, len(lines)):
                if not lines[k].startswith("|"):
                    break
                cells = [c.strip() for c in lines[k].strip().strip("|").split("|")]
                name = cells[0].strip("`")
                self.counts["sets"] += 1
                if targets_col is not None:
                    self.check_set_targets(rel, k + 1, name, cells[targets_col])
                if packages_col is not None:
                    self.check_set_packages(rel, k + 1, name, cells[packages_col])

    def check_set_targets(self, rel, line, name, cell):
        named = set(re.findall(r"`make ([\w./-]+)`", cell))
        if not named:
            return  # "any of the above with CXX=clang++": no targets of its own
        installing = {t for t, prerequisites in self.makefile_prerequisites.items()
                      if "deps-" + name in prerequisites and not t.startswith(".")}
        for t in sorted(installing - named):
            self.problem(rel, line, "set %s" % name, "its targets leave out make %s, which installs it (deps-%s)" % (t, name))
        for t in sorted(named - installing):
            self.problem(rel, line, "make %s" % t, "it does not install the set %s (no deps-%s prerequisite)" % (name, name))

    def check_set_packages(self, rel, line, name, cell):
        actual = self.set_packages(name)
        if actual is None:
            self.problem(rel, line, "set %s" % name, "tools/install-deps.sh --list %s fails" % name)
            return
        cell = re.sub(r"\([^()]*\)", "", cell)  # (clang's OpenMP), (its sanitizers, ...)
        named = set()
        for item in cell.split(","):
            item = item.strip().removeprefix("and ").strip()
            m = re.fullmatch(r"`?([\w-]+)`?'s", item)
            if m:
                named |= self.set_packages(m.group(1)) or set()
            elif item:
                named.add(item.split()[0].strip("`"))
        for p in sorted(actual - named):
            self.problem(rel, line, "set %s" % name, "its packages leave out %s (tools/install-deps.sh --list %s)" % (p, name))
        for p in sorted(named - actual):
            self.problem(rel, line, "package %s" % p, "tools/install-deps.sh --list %s does not print it" % name)

    # ---- places

    def check_places(self, rel, number, text):
        """The `file:N[-M]` places of one line (of a document or a comment)."""
        for m in PLACE_RE.finditer(text) if ":" in text else ():
            self.counts["places"] += 1
            path, first = m.group(1), int(m.group(2))
            last = int(m.group(3) or first)
            target = next((p for p in (os.path.normpath(path), os.path.normpath(os.path.join(os.path.dirname(rel), path)))
                           if p in self.tree.files), None)
            if target is None:
                if not self.tree.ignored(os.path.normpath(path)):
                    self.problem(rel, number, "place %s" % m.group(0), "no file of the tree has that path")
                continue
            lines = self.lines(target)
            if not 1 <= first <= last <= len(lines):
                self.problem(rel, number, "place %s" % m.group(0), "%s has %d lines" % (target, len(lines)))
                continue
            group = self.parenthesis(text, m.start(), m.end())
            near = "\n".join(lines[max(0, first - 4):last + 3])
            for name in re.findall(r"`?(%s)(?:\(\))?`?" % IDENT, group):
                if codelike(name) and not re.search(r"\b%s\b" % re.escape(name), near):
                    self.problem(rel, number, "%s at %s" % (name, m.group(0)), "it is not within 3 lines of %s:%d%s"
                                 % (target, first, "-%d" % last if last != first else ""))

    @staticmethod
    def parenthesis(text, start, end):
        """The text of the parentheses around text[start:end], the place left out (or none)."""
        depth, i = 0, start - 1
        while i >= 0 and not (text[i] == "(" and depth == 0):
            depth += {")": 1, "(": -1}.get(text[i], 0)
            i -= 1
        j = text.find(")", end)
        if i < 0 or j < 0:
            return ""
        return text[i + 1:start] + text[end:j]

    # ---- names

    def check_document(self, rel):
        doc = check_docs.Document(rel, self.tree.text(rel), self.shown(rel))
        _, code = doc.code_blocks()
        prose = "\n".join("" if i in code else line for i, line in enumerate(doc.lines))
        for regex in DOC_PAIRS:
            for m in regex.finditer(prose):
                name, path = m.group(1), os.path.normpath(m.group(2))
                self.counts["names"] += 1
                if path in self.tree.files and name not in self.code.definitions(path)[0]:
                    self.problem(rel, check_docs.line_of(prose, m.start()), "`%s` (`%s`)" % (name, m.group(2)),
                                 "%s does not define it" % path)
        for i, line in enumerate(doc.lines):
            self.check_places(rel, i + 1, line)

    def check_comments(self, rel):
        """The places and the name-file pairs of rel's comments, and its includes' comments."""
        for i, line in enumerate(self.lines(rel)):
            m = (C_COMMENT_RE if rel.endswith(CODE) else SCRIPT_COMMENT_RE).search(line)
            if not m:
                continue
            comment = m.group(1)
            self.check_places(rel, i + 1, comment)
            if INCLUDE_RE.match(line) or not ("(" in comment or " in " in comment):
                continue
            for regex in COMMENT_PAIRS:
                for p in regex.finditer(comment):
                    name, path = p.group(1), os.path.normpath(p.group(2))
                    if ("_" in name or comment[p.end(1):p.end(1) + 2] == "()") and path in self.tree.files:
                        self.counts["names"] += 1
                        if name not in self.code.used(path):
                            self.problem(rel, i + 1, "%s (%s)" % (name, p.group(2)), "%s's code does not use it" % path)
        if rel.endswith(CODE):
            self.check_includes(rel)

    def check_includes(self, rel):
        """Each name an include's comment lists before its ':' is defined by that header or what it
        includes; for a lesson file, each name it uses from a project header is so listed."""
        listed = []  # the names listed, a prefix ending in '*'
        words = set()  # every word before the ':' of an include's comment (vexp)
        for line, header, system, comment in self.code.includes(rel):
            if not header:
                continue
            previous = ""
            for item in (s.strip() for s in comment.split(":")[0].split(",")):
                m = re.fullmatch(r"(%s)(\(\))?(\*)?" % IDENT, item)
                words.add(item.rstrip("()"))
                if not m or not codelike(m.group(1)):
                    previous = ""
                    continue
                name = m.group(1)
                names = [name]
                if name.startswith("_"):  # drop_path_forward, _backward: drop_path_backward
                    names = [previous[:k] + name for k in range(len(previous)) if previous[k] == "_"]
                self.counts["names"] += 1
                listed += [n + (m.group(3) or "") for n in names]
                if m.group(3):
                    ok = any(d.startswith(name) for f in self.code.closure(header) for d in self.code.definitions(f)[0])
                elif rel in LESSON_FILES:  # the header itself, as llm.c's comments say where a name is
                    ok = any(n in self.code.definitions(header)[0] for n in names)
                else:
                    ok = any(self.code.defined_through(header, n) for n in names) or any(
                        os.path.splitext(os.path.basename(s))[0] == name
                        for f in self.code.closure(header) for _, _, s, _ in self.code.includes(f) if s)
                if not ok:
                    self.problem(rel, line, "%s (#include \"%s\")" % (item, header), "%s does not define it" % header
                                 if rel in LESSON_FILES else "neither %s nor a header it includes defines it" % header)
                previous = name if not name.startswith("_") else previous
        if rel in LESSON_FILES:
            self.check_lesson_includes(rel, listed + sorted(words))

    def check_lesson_includes(self, rel, listed):
        code = strip_c(self.tree.text(rel))
        used = set(re.findall(r"(?<![.\w>:])(?<!->)(%s)" % IDENT, code)) - self.code.definitions(rel)[0] - C_KEYWORDS
        headers = [h for _, h, _, _ in self.code.includes(rel) if h]
        for name in sorted(used):
            source = next((f for h in headers for f in self.code.closure(h)
                           if not f.startswith(NOT_PROJECT) and name in self.code.definitions(f)[1]), None)
            if source is None:
                continue
            self.counts["names"] += 1
            if not any(n == name or n.endswith("*") and name.startswith(n[:-1]) for n in listed):
                line = check_docs.line_of(code, re.search(r"(?<![.\w>:])(?<!->)\b%s\b" % name, code).start())
                self.problems.append("%s:%d: %s is used but no include's comment names it (%s defines it)"
                                     % (self.shown(rel), line, name, source))

    # ---- figures

    def check_quoted_table(self):
        """README's make run table against docs/results.md's headline rows, init by init."""
        readme, section, page, anchor, task = QUOTED_TABLE
        lines = self.lines(readme)
        start = next((i for i, l in enumerate(lines) if l.strip() == "## " + section), None)
        rows = quoted_figures.sections(self.lines(page), check_docs.slug).get(anchor, "").split("\n")
        source = {}  # init: the numbers of its row for the task
        for row in rows:
            cells = [c.strip() for c in row.strip().strip("|").split("|")]
            if row.startswith("|") and len(cells) > 2 and cells[0].split()[0:1] == [task]:
                source.setdefault(cells[1], quoted_figures.numbers(" ".join(cells[2:])))
        if start is None or not source:
            self.problems.append("%s: the section \"%s\" or %s#%s's rows for %s, which this check compares, are not there"
                                 % (self.shown(readme), section, page, anchor, task))
            return
        for i in range(start + 1, len(lines)):
            if lines[i].startswith("#"):
                break
            cells = [c.strip() for c in lines[i].strip().strip("|").split("|")]
            if not (lines[i].startswith("    |") and cells[0] in source):
                continue
            for negative, digits in quoted_figures.numbers(" ".join(cells[1:])):
                self.counts["figures"] += 1
                if not any(n == negative and same_figure(d, digits) for n, d in source[cells[0]]):
                    self.problem(readme, i + 1, "figure %s of %s" % (digits, cells[0]),
                                 "%s#%s's %s row for %s does not give it" % (page, anchor, task, cells[0]))

    def check_linked_figures(self, rel):
        text = self.tree.text(rel)
        for m in LINKED_FIGURE_RE.finditer(text):
            sources = []
            for path, anchor in re.findall(r"\]\(([\w./-]*\.md)(?:#([\w-]+))?\)", m.group(3)):
                target = os.path.normpath(os.path.join(os.path.dirname(rel), path))
                whole = self.lines(target)
                sources.append(quoted_figures.sections(whole, check_docs.slug).get(anchor, "") if anchor else "\n".join(whole))
                self.counts["figures"] += 1
            if (False, m.group(1)) not in set(quoted_figures.numbers("\n".join(sources))):
                self.problem(rel, check_docs.line_of(text, m.start()), "figure %s" % m.group(1),
                             "the sections its links name do not give it")

    def check_machines(self):
        """Each "Results in brief" bullet names its machine where its sections name only others."""
        lines = self.lines("README.md")
        start = next((i for i, l in enumerate(lines) if l.strip() == "## " + quoted_figures.SECTION), None)
        if start is None:
            return
        first = next((l for l in lines[start + 1:] if l.strip()), "")
        default = next((m for m in MACHINES if m in first), None)
        bullet = None
        for i in range(start + 1, len(lines) + 1):
            line = lines[i] if i < len(lines) else "#"
            if bullet and not line.startswith("  "):
                self.check_machine(bullet, default)
                bullet = None
            if line.startswith("#"):
                break
            if line.startswith("- "):
                bullet = (i + 1, line)
            elif bullet:
                bullet = (bullet[0], bullet[1] + "\n" + line)

    def check_machine(self, bullet, default):
        line, text = bullet
        named = set()
        for target in quoted_figures.LINK_RE.findall(text):
            path, _, anchor = target.partition("#")
            if path.startswith("docs/") and path.endswith(".md") and anchor:
                section = quoted_figures.sections(self.lines(path), check_docs.slug).get(anchor, "")
                named |= {m for m in MACHINES if m in section}
        self.counts["figures"] += 1
        prose = quoted_figures.LINK_RE.sub("]", text)
        if named and default not in named and not any(m in prose for m in named):
            self.problem("README.md", line, "a bullet measured on %s" % " or ".join(sorted(named)),
                         "it does not say so, and the section's first line says %s" % default)


def same_figure(a, b):
    """Whether two written figures are the same to the shorter one's digits (0.950 and 0.9500)."""
    places = min(len(x.partition(".")[2]) for x in (a, b))
    return round(float(a), places) == round(float(b), places)


def main(argv):
    ap = argparse.ArgumentParser(prog="check_references.py", description=__doc__.split("\n")[0])
    ap.add_argument("--root", help="the tree (default: the folder above tests/)")
    ap.add_argument("--as", dest="replace", nargs=2, action="append", default=[], metavar=("REL", "FILE"),
                    help="check FILE in place of the tree's REL")
    opts = ap.parse_args(argv)
    root = os.path.abspath(opts.root or os.path.join(os.path.dirname(__file__), ".."))
    tree = check_docs.Tree(root)
    replaced, planted = {}, {}
    for rel, f in opts.replace:
        if not os.path.isfile(f) or rel not in tree.files:
            check_docs.fail("--as %s %s: %s" % (rel, f, "no file " + f if not os.path.isfile(f) else rel + " is not in the tree"))
        replaced[rel] = f
        with open(f, encoding="utf-8", errors="replace") as copy:
            planted[rel] = copy.read()
    if planted:  # every check reads the tree through tree.text
        read = tree.text
        tree.text = lambda rel: planted[rel] if rel in planted else read(rel)
    checks = References(tree, replaced)
    documents = ["README.md"] + sorted(f for f in tree.files if f.startswith("docs/") and f.endswith(".md")) + tree.markdown
    for rel in dict.fromkeys(documents):
        if rel in tree.files:
            checks.check_document(rel)
            checks.check_linked_figures(rel)
            checks.check_sets(rel)
    for rel in sorted(f for f in tree.files if f.endswith(SOURCES) and f not in check_docs.SELF | {"tests/check_references.py"}):
        checks.check_comments(rel)
    checks.check_keys()
    checks.check_quoted_table()
    checks.check_machines()
    for text in checks.problems:
        print(text)
    n = len(checks.problems)
    print("check_references: %d keys, %d sets, %d places, %d names, %d figures checked; %s"
          % (*checks.counts.values(), "%d problem%s" % (n, "" if n == 1 else "s") if n else "no problems"))
    return 1 if n else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
