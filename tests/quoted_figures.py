"""tests/quoted_figures.py: the figures README.md's "Results in brief" quotes are those of the sections it links.

Each bullet of that section that quotes a figure must link the section(s) of docs/ the figures
come from ([results](docs/results.md#vision-...)), and every number of its text (the link
targets aside) must be written in one of those sections: the same digits, and a minus sign where
the section has one (+ and no sign are the same). A section runs from its heading to the next
heading of its level or above. So a figure that docs/results.md changes and the README does not,
or one the README rounds its own way, fails the docs check (tests/check_docs.py calls this).
"""
import re

SECTION = "Results in brief"
LINK_RE = re.compile(r"\]\(\s*<?([^()\s<>]+)>?\s*\)")
# a number: its sign where one stands right before it (not a range's hyphen: 13-23), its digits
NUMBER_RE = re.compile(r"(?:(?<![\w.])([-−+]))?(?<![\w.])(\d+(?:\.\d+)?)(?![\d])")
HEADING_RE = re.compile(r"^(#{1,6})\s+(.*?)\s*#*\s*$")


def numbers(text):
    """The numbers of a text, each (negative, digits)."""
    return [(sign in ("-", "−"), digits) for sign, digits in NUMBER_RE.findall(LINK_RE.sub("]", text))]


def sections(lines, slug):
    """{anchor: the text of the section under that heading} of a markdown file's lines (a fenced
    code block's lines are not headings)."""
    found, open_ = {}, []  # open_: (level, anchor, first line) of the headings still open
    fenced = False
    for i, line in enumerate(lines + ["# end"]):
        fenced ^= line.lstrip().startswith(("```", "~~~"))
        m = None if fenced else HEADING_RE.match(line)
        if not m:
            continue
        level = len(m.group(1))
        while open_ and open_[-1][0] >= level:
            _, anchor, first = open_.pop()
            found.setdefault(anchor, "\n".join(lines[first:i]))
        open_.append((level, slug(m.group(2)), i))
    return found


def check(doc, checker, slug):
    """The problems of README.md's quoted figures (doc: check_docs.Document; checker: its Checker,
    whose tree gives the files and whose counts["figures"] counts the figures checked; slug: a
    heading's anchor). Other documents have none."""
    if doc.rel != "README.md":
        return []
    problems = []
    start = next((i for i, line in enumerate(doc.lines) if line.strip() == "## " + SECTION), None)
    if start is None:
        return ["%s: the section \"%s\" is not there, whose figures this check reads" % (doc.shown, SECTION)]
    bullets, end = [], next((i for i in range(start + 1, len(doc.lines)) if doc.lines[i].startswith("#")),
                            len(doc.lines))
    for i in range(start + 1, end):  # each bullet: (its first line's number, its text)
        if doc.lines[i].startswith("- "):
            bullets.append((i + 1, doc.lines[i]))
        elif bullets and doc.lines[i].startswith("  "):
            bullets[-1] = (bullets[-1][0], bullets[-1][1] + "\n" + doc.lines[i])
    for line, text in bullets:
        quoted = numbers(text)
        if not quoted:
            continue
        sources = []
        for target in LINK_RE.findall(text):
            path, _, anchor = target.partition("#")
            if path.startswith("docs/") and path.endswith(".md"):
                whole = checker.tree.text(path).split("\n")
                sources.append(sections(whole, slug).get(anchor, "") if anchor else "\n".join(whole))
        if not sources:
            problems.append("%s:%d: a bullet of \"%s\" quotes figures but links no section of docs/ they come from"
                            % (doc.shown, line, SECTION))
            continue
        written = set(numbers("\n".join(sources)))
        for negative, digits in dict.fromkeys(quoted):
            checker.counts["figures"] += 1
            if (negative, digits) not in written:
                problems.append("%s:%d: figure %s%s is named but the sections this bullet links do not give it"
                                % (doc.shown, line, "-" if negative else "", digits))
    return problems
