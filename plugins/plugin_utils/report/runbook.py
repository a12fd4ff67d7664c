"""Read docs/runbook.md into sections keyed by anchor (reason code or host fix).

The runbook is the single source of what on-call should do; the incident report quotes
the section for its failure class instead of keeping its own copy. A section starts with
an anchor line `<a id="CODE"></a>` directly above its `## ` heading and runs to the next
anchored section; `### ` headings inside it are its parts (Symptoms, Confirm, Next steps,
Escalate).

A procedure the Molecule cases run (`runbook_drill`, molecule/ee/tasks/runbook_drill.yml;
`runbook_cold_restart`, molecule/restart/cases/runbook_cold_restart.yml) is a
fenced ```sh block right after a marker line `<!-- drill: NAME -->`; `drill_blocks` reads them,
and `python3 runbook.py RUNBOOK NAME` prints one, failing when the runbook has no such block,
so the test runs what the runbook says.
"""
import os
import re
import sys
from dataclasses import dataclass, field

RUNBOOK_RELPATH = os.path.join("docs", "runbook.md")

_ANCHOR = re.compile(r'^<a id="([A-Za-z0-9_\-]+)"></a>\s*$')
_H2 = re.compile(r"^##\s+(.+?)\s*$")
_H3 = re.compile(r"^###\s+(.+?)\s*$")
_DRILL = re.compile(r"^[ \t]*<!-- drill: ([a-z0-9][a-z0-9_-]*) -->[ \t]*\n[ \t]*```sh[ \t]*\n(.*?)^[ \t]*```[ \t]*$", re.M | re.S)


@dataclass(frozen=True)
class RunbookSection:
    anchor: str
    title: str
    intro: str
    parts: dict = field(default_factory=dict)  # part heading -> Markdown text

    def part(self, name):
        """The text under the `### name` heading (case-insensitive), '' when absent."""
        for heading, text in self.parts.items():
            if heading.lower() == name.lower():
                return text
        return ""


def parse_runbook(text):
    """{anchor: RunbookSection} for every anchored `## ` section of the Markdown text."""
    sections = {}
    lines = text.splitlines()
    starts = [i for i, line in enumerate(lines) if _ANCHOR.match(line)]
    for n, start in enumerate(starts):
        end = starts[n + 1] if n + 1 < len(starts) else len(lines)
        anchor = _ANCHOR.match(lines[start]).group(1)
        body = lines[start + 1:end]
        # A `## ` heading that is not anchored (e.g. a chapter title) ends the section too.
        title, rest = "", body
        for i, line in enumerate(body):
            m = _H2.match(line)
            if m:
                title, rest = m.group(1), body[i + 1:]
                break
        for i, line in enumerate(rest):
            if _H2.match(line) or line.startswith("# "):
                rest = rest[:i]
                break
        sections[anchor] = _split_parts(anchor, title, rest)
    return sections


def _split_parts(anchor, title, lines):
    intro, parts, current = [], {}, None
    for line in lines:
        m = _H3.match(line)
        if m:
            current = m.group(1)
            parts[current] = []
        elif current is None:
            intro.append(line)
        else:
            parts[current].append(line)
    return RunbookSection(
        anchor=anchor,
        title=title,
        intro="\n".join(intro).strip(),
        parts={k: "\n".join(v).strip() for k, v in parts.items()},
    )


def load_runbook(path):
    with open(path, encoding="utf-8") as f:
        return parse_runbook(f.read())


def default_runbook_path():
    """docs/runbook.md of the collection this file belongs to (plugins/plugin_utils/report/..)."""
    root = os.path.abspath(os.path.join(os.path.dirname(__file__), "..", "..", ".."))
    return os.path.join(root, RUNBOOK_RELPATH)


def drill_blocks(text):
    """{name: shell text} of every block marked `<!-- drill: NAME -->` (the line right above
    a ```sh fence); the text is dedented as the list item it sits in indents it."""
    blocks = {}
    for m in _DRILL.finditer(text):
        name, body = m.group(1), m.group(2)
        if name in blocks:
            raise ValueError("docs/runbook.md marks two blocks 'drill: %s'" % name)
        lines = body.splitlines()
        indent = min((len(line) - len(line.lstrip()) for line in lines if line.strip()), default=0)
        blocks[name] = "\n".join(line[indent:] for line in lines) + "\n"
    return blocks


def main(argv):
    """`runbook.py RUNBOOK NAME`: print the block marked `drill: NAME`; exit 1 without one."""
    if len(argv) != 2:
        sys.stderr.write("usage: runbook.py RUNBOOK NAME\n")
        return 2
    with open(argv[0], encoding="utf-8") as f:
        blocks = drill_blocks(f.read())
    if argv[1] not in blocks:
        sys.stderr.write("%s has no block marked '<!-- drill: %s -->' before a ```sh fence (it marks: %s)\n"
                         % (argv[0], argv[1], ", ".join(sorted(blocks)) or "none"))
        return 1
    sys.stdout.write(blocks[argv[1]])
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
