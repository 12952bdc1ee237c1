#!/usr/bin/env python3
"""tests/check_packages.py [--root DIR] [--plant SET=PACKAGE ...]: each package set covers its builds.

A make target that runs something installs a package set first (tools/install-deps.sh, through a
deps-SET prerequisite), then builds. For every such target, in each kind of build (CUDA=1 where
make finds nvcc, CUDA=0, and CUDA=0 CXX=clang++ where there is clang++), this asks make for the
target's commands (make -n -B, in a copy of the tree's top made of links, so that the tree's
.build-settings stays as it is), and for each compile command it finds what the compiler reads:

  headers    every system header, from the compiler's dependency output (-M);
  libraries  each library and object of the link: the command's -l, found in its -L folders and
             the compiler's; for g++ and clang++ the whole link the driver would run (-###:
             OpenMP's runtime, the sanitizers' and libFuzzer's), for nvcc the host link it would
             run (-dryrun: cuBLAS, zlib).

Each file resolves to the Debian package that owns it (dpkg -S), and that package must be among
what the target's sets bring for building, their -dev packages and, as installed here, everything
those depend on (what a set's Python package happens to pull in does not count: python3-matplotlib
pulls in zlib's and Boost's headers), or the compiler's own: its package and what that depends on
(gcc's runtime, libstdc++, libc), and for nvcc the CUDA toolkit (the folder above its bin/, not a
Debian package here) and the host compiler's. make and g++ are in no set: the README assumes them.
A build whose compiler is missing here, which reads a file not installed here, or whose compiler
does not say what it reads, is named and left unchecked.

--plant SET=PACKAGE (repeatable): after the real check, a copy of tools/install-deps.sh with
PACKAGE taken out of SET's list must make the check fail for a target that installs SET; the
builds' files are not read again, so a plant costs nothing.

One line per problem, then a count. Exit 0: every set covers its builds and every plant is caught;
1: a package missing from a set, or a plant not caught; 2: a bad command line, or make failed;
77: no dpkg (not a Debian machine: the sets are Debian's): skipped. Standard library only.
"""
import argparse
import collections
import os
import re
import shlex
import shutil
import subprocess
import sys
import tempfile

# The kinds of build: make's command-line variables, and the program each needs
VARIANTS = [("CUDA=1", "nvcc"), ("CUDA=0 CXX=g++", "g++"), ("CUDA=0 CXX=clang++", "clang++")]
COMPILER_RE = re.compile(r"(.*-)?(nvcc|gcc|g\+\+|cc|c\+\+|clang|clang\+\+)(-[0-9.]+)?$")
SOURCE_RE = re.compile(r"\.(cu|cpp|cc|c)$")
LINKERS = {"collect2", "ld", "ld.bfd", "ld.gold", "ld.lld"}
# make's own variables and the Makefile's compiler choices: the parent make's must not reach ours
UNSET = ("MAKEFLAGS", "MFLAGS", "MAKELEVEL", "MAKEOVERRIDES", "CUDA", "CXX", "CC", "EMU_CXX", "FUZZ_CXX", "HOST_CC")


def run(args, cwd=None, env=None):
    return subprocess.run(args, cwd=cwd, env=env, capture_output=True, text=True, errors="replace")


def fail(message, code=2):
    print("check_packages: " + message)
    sys.exit(code)


class Dpkg:
    """The installed packages: who owns a file, and what installing a package brings."""

    def __init__(self):
        self.arch = run(["dpkg", "--print-architecture"]).stdout.strip()
        fields = "${binary:Package}\t${db:Status-Abbrev}\t${Depends}, ${Pre-Depends}\t${Provides}\n"
        self.depends, self.providers = {}, collections.defaultdict(set)
        for line in run(["dpkg-query", "-W", "-f", fields]).stdout.splitlines():
            name, status, depends, provides = line.split("\t")
            if not status.startswith("ii"):
                continue
            name = self.plain(name)
            # each dependency: its alternatives (a | b), any of which installed counts
            self.depends[name] = [[self.plain(a.split()[0]) for a in d.split("|")] for d in depends.split(",") if d.strip()]
            for p in provides.split(","):
                if p.strip():
                    self.providers[self.plain(p.split()[0])].add(name)
        self.owner_cache = {}

    def plain(self, name):
        """A package's name without the native architecture or :any (libc6:amd64 is libc6)."""
        for suffix in (":any", ":" + self.arch):
            name = name[:-len(suffix)] if name.endswith(suffix) else name
        return name

    def closure(self, packages):
        """The installed packages among `packages` and everything they depend on (a virtual
        package: its installed providers)."""
        seen, stack = set(), list(packages)
        while stack:
            p = stack.pop()
            for q in ([p] if p in self.depends else []) + sorted(self.providers.get(p, ())):
                if q not in seen:
                    seen.add(q)
                    stack.extend(a for alternatives in self.depends[q] for a in alternatives)
        return seen

    def owners(self, paths):
        """{path: [package, ...]} for the paths a package owns; a path that dpkg does not know as
        given is asked again with its folder's links resolved (/lib/x is /usr/lib/x), never the
        file's own (libz.so is zlib1g-dev's link to zlib1g's libz.so.1)."""
        todo = [p for p in paths if p not in self.owner_cache]
        for attempt in (lambda p: p, lambda p: os.path.join(os.path.realpath(os.path.dirname(p)), os.path.basename(p))):
            ask = {attempt(p): p for p in todo if self.owner_cache.get(p) is None}
            names = sorted(ask)
            for k in range(0, len(names), 400):
                for line in run(["dpkg", "-S", *names[k:k + 400]]).stdout.splitlines():
                    packages, _, path = line.partition(": ")
                    if path in ask and not line.startswith("diversion "):
                        self.owner_cache[ask[path]] = [self.plain(x.strip()) for x in packages.split(",")]
            for p in todo:
                self.owner_cache.setdefault(p, None)
        return {p: self.owner_cache[p] for p in paths if self.owner_cache.get(p)}


class Build:
    """One compile command of make's: the files its compiler reads and the compiler's own packages."""

    def __init__(self, words, root, dpkg):
        self.words, self.root = words, root
        self.compiler = words[0]
        self.output = words[words.index("-o") + 1] if "-o" in words else "?"
        self.why_unchecked = None
        self.files = {}  # file: what it is to this build ("reads", "links")
        path = shutil.which(self.compiler)
        if path is None:
            self.why_unchecked = "%s is not installed here" % self.compiler
            return
        self.nvcc = os.path.basename(path) == "nvcc"
        # nvcc: the CUDA toolkit (the folder above bin/) and g++, to which it hands the host code
        self.toolkit = os.path.dirname(os.path.dirname(os.path.realpath(path))) + "/" if self.nvcc else None
        host = shutil.which("g++") if self.nvcc else path
        owned = dpkg.owners(sorted({p for c in (path, host) if c for p in (c, os.path.realpath(c))}))
        self.own_packages = {p for owners in owned.values() for p in owners}
        self.read_headers()
        if not self.why_unchecked:
            self.read_link(host)

    def run_variant(self, extra, drop=()):
        """The command without its -o FILE and the flags in drop, with extra added."""
        words, out = [], iter(range(len(self.words)))
        for k in out:
            w = self.words[k]
            if w in ("-o", "-MF"):
                next(out, None)
            elif w not in drop:
                words.append(w)
        return run(words + extra, cwd=self.root)

    def read_headers(self):
        p = self.run_variant(["-M"], drop=("-MMD", "-MP"))
        if p.returncode != 0:
            error = next((l for l in p.stderr.splitlines() if "error" in l), p.stderr.strip()[:200])
            self.why_unchecked = "its compiler could not list its headers here (%s)" % error.strip()
            return
        for w in p.stdout.replace("\\\n", " ").split():
            if w.startswith("/") and not w.startswith(self.root + "/"):
                self.files[os.path.normpath(w)] = "reads"

    def read_link(self, host):
        """The libraries and objects the link reads: from the linker's line that the driver prints
        (g++, clang++: -###; nvcc: the host compiler's link, from -dryrun)."""
        if self.nvcc:
            lines = [l[3:] for l in self.run_variant(["-dryrun", "-o", self.output]).stderr.splitlines()
                     if l.startswith("#$ ") and re.search(r"\s-o\s+\"?%s\"?\s*$" % re.escape(self.output), l)]
            link = shlex.split(lines[-1]) if lines else []
            search = self.search_dirs(host)
        else:
            printed = self.run_variant(["-###", "-o", self.output]).stderr.splitlines()
            commands = [shlex.split(l) for l in printed if l.startswith(" ")]  # its commands, one a line
            link = next((c for c in commands if os.path.basename(c[0]) in LINKERS), [])
            search = self.search_dirs(self.compiler)
        if not link:
            self.why_unchecked = "its compiler printed no link command"
            return
        dirs, libraries = [], []
        words = iter(link[1:])
        for w in words:
            if w in ("-L", "-l"):
                w += next(words, "")
            if w.startswith("-L"):
                dirs.append(w[2:])
            elif w.startswith("-l"):
                libraries.append(w[2:])
            elif w.startswith("/") and re.search(r"\.(a|o|so)(\.[0-9]+)*$", w) and not w.startswith("/tmp/"):
                self.files[os.path.normpath(w)] = "links"
        for name in dict.fromkeys(libraries):
            files = [name[1:]] if name.startswith(":") else ["lib%s.so" % name, "lib%s.a" % name]
            found = next((os.path.join(d, f) for d in dirs + search for f in files if os.path.exists(os.path.join(d, f))),
                         None)
            if found is None:
                self.why_unchecked = "its -l%s is not installed here" % name
                return
            self.files[os.path.normpath(found)] = "links -l%s:" % name

    @staticmethod
    def search_dirs(compiler):
        out = run([compiler, "-print-search-dirs"]).stdout
        line = next((l for l in out.splitlines() if l.startswith("libraries: ")), "libraries: =")
        return [d for d in line.partition("=")[2].split(":") if d]

    def described(self):
        return "%s's build (%s)" % (self.output, os.path.basename(self.compiler))


class Checker:
    def __init__(self, root, dpkg):
        self.root, self.dpkg = root, dpkg
        self.builds = {}  # the compile command's words: Build
        self.targets = self.deps_targets()
        self.shadow = tempfile.mkdtemp(prefix="maskprior-packages-")
        for name in os.listdir(root):
            if name != ".build-settings":
                os.symlink(os.path.join(root, name), os.path.join(self.shadow, name))
        self.env = {k: v for k, v in os.environ.items() if k not in UNSET}
        self.notes, self.plans = [], []  # plans: (make's words, target, sets, [Build])
        try:
            for variables, program in VARIANTS:
                if program != "nvcc" and not shutil.which(program):
                    self.notes.append("no %s here: the builds of make %s are not checked" % (program, variables))
                    continue
                for target in self.targets:
                    self.plan(variables.split(), target)
        except BaseException:  # make failed (fail() exits): the links go with it
            shutil.rmtree(self.shadow)
            raise

    def deps_targets(self):
        """The Makefile's targets with a deps-SET prerequisite: those that install a set first."""
        text = open(os.path.join(self.root, "Makefile")).read().replace("\\\n", " ")
        targets = []
        for m in re.finditer(r"(?m)^([A-Za-z][\w./ -]*?)\s*:(?!=)([^\n]*)", text):
            if re.search(r"(^|\s)deps-\w+", m.group(2)) and not m.group(1).startswith("deps-"):
                targets += m.group(1).split()
        return list(dict.fromkeys(targets))

    def plan(self, variables, target):
        """make -n -B's commands for the target: the sets it installs, the builds it makes."""
        p = run(["make", "--no-print-directory", "-n", "-B", *variables, target], cwd=self.shadow, env=self.env)
        if p.returncode != 0:
            if variables == ["CUDA=1"] and "no nvcc" in p.stderr:
                note = "no nvcc here: the builds of make CUDA=1 are not checked"
                self.notes += [] if note in self.notes else [note]
                return
            fail("make -n -B %s %s failed: %s" % (" ".join(variables), target, p.stderr.strip()[-300:]))
        sets, builds = None, []
        for line in p.stdout.replace("\\\n", " ").splitlines():
            words = shlex.split(line) if line.strip() else []
            if "tools/install-deps.sh" in words:
                sets = words[words.index("tools/install-deps.sh") + 1:]
            elif words and COMPILER_RE.match(os.path.basename(words[0])) and any(SOURCE_RE.search(w) for w in words):
                key = tuple(words)
                if key not in self.builds:
                    self.builds[key] = Build(words, self.root, self.dpkg)
                builds.append(self.builds[key])
        if sets is None:
            fail("make -n %s %s runs no tools/install-deps.sh" % (" ".join(variables), target))
        self.plans.append((variables, target, sets, builds))

    def problems(self, deps_script):
        """Each package a target's build needs that neither its sets nor its compiler bring."""
        found, listed = [], {}
        files = sorted({f for b in self.builds.values() for f in b.files})
        owners = self.dpkg.owners(files)
        for variables, target, sets, builds in self.plans:
            key = tuple(sets)
            if key not in listed:
                p = run(["sh", deps_script, "--list", *sets])
                if p.returncode != 0:
                    fail("sh %s --list %s failed: %s" % (deps_script, " ".join(sets), p.stderr.strip()))
                listed[key] = p.stdout.split()
            brought = self.dpkg.closure([p for p in listed[key] if re.search(r"-dev(:\w+)?$", p)])
            for b in builds:
                if b.why_unchecked:
                    continue
                own = self.dpkg.closure(b.own_packages)
                missing = collections.OrderedDict()  # package: (file, what), the first of its files
                for f, what in sorted(b.files.items()):
                    packages = owners.get(f)
                    if packages is None:
                        if b.toolkit and os.path.realpath(f).startswith(b.toolkit):
                            continue
                        found.append("make %s %s: %s %s %s, which no Debian package holds"
                                     % (" ".join(variables), target, b.described(), what, f))
                    elif not any(p in brought or p in own for p in packages):
                        missing.setdefault(packages[0], (f, what))
                for package, (f, what) in missing.items():
                    found.append("make %s %s: %s %s %s, from %s, which is in none of the sets %s nor the "
                                 "compiler's own (%s)" % (" ".join(variables), target, b.described(), what, f, package,
                                                          " ".join(sets), " ".join(sorted(b.own_packages))))
        return list(dict.fromkeys(found))

    def plant(self, set_name, package):
        """A copy of tools/install-deps.sh without `package` in set_name's list: its problems."""
        text = open(os.path.join(self.root, "tools/install-deps.sh")).read()
        line_re = re.compile(r"(?m)^\s*(%s=\"|%s\) needed=).*$" % (re.escape(set_name), re.escape(set_name)))
        m = line_re.search(text)
        if not m or not re.search(r"(?<![\w:-])%s(?![\w:-])" % re.escape(package), m.group(0)):
            fail("--plant %s=%s: tools/install-deps.sh's list of %s has no %s" % (set_name, package, set_name, package))
        line = re.sub(r"\s*(?<![\w:-])%s(?![\w:-])" % re.escape(package), "", m.group(0))
        copy = os.path.join(self.shadow, "install-deps-planted.sh")
        with open(copy, "w") as f:
            f.write(text[:m.start()] + line + text[m.end():])
        return self.problems(copy)


def main(argv):
    ap = argparse.ArgumentParser(prog="check_packages.py", description="Each package set covers its builds.")
    ap.add_argument("--root", help="the tree (default: the folder above tests/)")
    ap.add_argument("--plant", action="append", default=[], metavar="SET=PACKAGE")
    opts = ap.parse_args(argv)
    root = os.path.realpath(opts.root or os.path.join(os.path.dirname(__file__), ".."))
    plants = [p.split("=", 1) for p in opts.plant]
    if any(len(p) != 2 or not all(p) for p in plants):
        fail("--plant takes SET=PACKAGE")
    if not (shutil.which("dpkg") and shutil.which("dpkg-query")):
        print("check_packages: SKIPPED: no dpkg here (not a Debian machine), and the package sets are Debian's")
        return 77
    checker = Checker(root, Dpkg())
    try:
        problems = checker.problems(os.path.join(root, "tools/install-deps.sh"))
        caught = []
        for set_name, package in plants:
            planted = [p for p in checker.plant(set_name, package) if p not in problems]
            if planted:
                caught.append("planted: %s taken out of %s: caught, %d problem%s, the first: %s"
                              % (package, set_name, len(planted), "" if len(planted) == 1 else "s", planted[0]))
            else:
                problems.append("planted: %s taken out of %s: NOT caught" % (package, set_name))
    finally:
        shutil.rmtree(checker.shadow)
    for line in checker.notes + caught + problems:
        print(line)
    builds = checker.builds.values()
    unchecked = [b for b in builds if b.why_unchecked]
    for b in unchecked:
        print("not checked: %s: %s" % (b.described(), b.why_unchecked))
    files = {f for b in builds for f in b.files}
    print("check_packages: %d targets in %d kinds of build, %d builds (%d not checked), %d system files; %s"
          % (len(checker.targets), len({tuple(v) for v, *_ in checker.plans}), len(builds), len(unchecked), len(files),
             "%d problem%s" % (len(problems), "" if len(problems) == 1 else "s") if problems else "no problems"))
    return 1 if problems else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
