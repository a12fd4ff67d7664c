"""Read docs/runbook.md into sections keyed by anchor (reason code or host fix).

The runbook is the single source of what on-call should do; the incident report quotes
the section for its failure class instead of keeping its own copy. A section starts with
an anchor line `<a id="CODE"></a>` directly above its `## ` heading and runs to the next
anchored section; `### ` headings inside it are its parts (Symptoms, Confirm, Next steps,
Escalate).
"""
import os
import re
from dataclasses import dataclass, field

RUNBOOK_RELPATH = os.path.join("docs", "runbook.md")

_ANCHOR = re.compile(r'^<a id="([A-Za-z0-9_\-]+)"></a>\s*$')
_H2 = re.compile(r"^##\s+(.+?)\s*$")
_H3 = re.compile(r"^###\s+(.+?)\s*$")


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
    """docs/runbook.md of the collection this file belongs to (plugins/plugin_utils/..)."""
    root = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
    return os.path.join(root, RUNBOOK_RELPATH)
