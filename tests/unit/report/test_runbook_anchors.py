"""Every link into docs/runbook.md lands on a section, with its anchors read as GitHub renders
the page (an explicit `<a id>` or a heading's slug): each alert's runbook_url on the alert's own
section, the incident report's links (one per failure class, the start limit, reading a
report), and every `runbook.md#...` written anywhere in the tree. The procedures the
runbook_drill case runs (`<!-- drill: NAME -->` blocks) are read from the runbook itself."""
import os
import re
import subprocess
import sys
from urllib.parse import urlparse

import pytest
import yaml

from ansible_collections.sglang_ops.serving.plugins.module_utils.domain.failure_classes import FAILURE_CLASSES
from ansible_collections.sglang_ops.serving.plugins.plugin_utils.report import runbook as runbook_mod
from ansible_collections.sglang_ops.serving.plugins.plugin_utils.report.incident_model import START_LIMIT_SECTION

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__)))))
RUNBOOK = os.path.join(ROOT, "docs", "runbook.md")
RULES = os.path.join(ROOT, "monitoring", "sglang-ops.rules.yml")
DRILLS = [os.path.join(ROOT, "molecule", "ee", "tasks", "runbook_drill.yml"),
          os.path.join(ROOT, "molecule", "restart", "cases", "runbook_cold_restart.yml")]
_LINK = re.compile(r"runbook\.md#([A-Za-z0-9_.-]+)")


def github_slug(heading):
    """The id GitHub gives a Markdown heading: its text lower-cased, markup and punctuation
    other than '-' and '_' dropped, each space a '-'."""
    text = re.sub(r"<[^>]+>", "", heading)                        # inline HTML
    text = re.sub(r"\[([^\]]*)\]\([^)]*\)", r"\1", text)          # a link's words
    text = text.strip().lower()
    text = re.sub(r"[^\w\- ]", "", text)
    return text.replace(" ", "-")


def anchors(text):
    """Every fragment a Markdown page answers to on GitHub: explicit ids and heading slugs
    (a repeated slug gets -1, -2, ...). Fenced code is not a heading."""
    found, seen = set(), {}
    in_fence = False
    for line in text.splitlines():
        if line.lstrip().startswith("```"):
            in_fence = not in_fence
            continue
        if in_fence:
            continue
        found.update(re.findall(r'<a\s+(?:id|name)="([^"]+)"', line))
        m = re.match(r"^#{1,6}\s+(.+?)\s*#*\s*$", line)
        if m:
            slug = github_slug(m.group(1))
            n = seen.get(slug, 0)
            seen[slug] = n + 1
            found.add(slug if n == 0 else "%s-%d" % (slug, n))
    return found


def _runbook():
    with open(RUNBOOK, encoding="utf-8") as fh:
        return fh.read()


def _rules():
    with open(RULES, encoding="utf-8") as fh:
        return [r for g in yaml.safe_load(fh)["groups"] for r in g["rules"] if "alert" in r]


def _tree_links():
    files = subprocess.run(["git", "ls-files"], cwd=ROOT, capture_output=True, text=True, check=True).stdout.split()
    links = []
    for rel in files:
        if rel.startswith("tests/unit/report/test_runbook_anchors.py"):
            continue
        try:
            with open(os.path.join(ROOT, rel), encoding="utf-8") as fh:
                text = fh.read()
        except (UnicodeDecodeError, OSError):
            continue
        links += [(rel, frag) for frag in _LINK.findall(text)]
        if rel == "docs/runbook.md":
            links += [(rel, frag) for frag in re.findall(r"\]\(#([A-Za-z0-9_.-]+)\)", text)]
    return links


def test_github_slugs_of_headings():
    assert github_slug("Stop the automation") == "stop-the-automation"
    assert github_slug("fatal_oom: GPU out of memory") == "fatal_oom-gpu-out-of-memory"
    assert github_slug("`bin/sglang-ops`: commands and exit statuses") == "binsglang-ops-commands-and-exit-statuses"
    assert anchors("## A b\n## A b\n```\n## not a heading\n```\n<a id=\"x_y\"></a>") == {"a-b", "a-b-1", "x_y"}


@pytest.mark.parametrize("rule", _rules(), ids=lambda r: r["alert"])
def test_each_alert_lands_on_its_own_section(rule):
    url = urlparse(rule["annotations"]["runbook_url"])
    assert url.path.endswith("/docs/runbook.md"), url
    assert url.fragment in anchors(_runbook()), "%s links to #%s, which the runbook lacks" % (rule["alert"], url.fragment)
    section = runbook_mod.parse_runbook(_runbook()).get(url.fragment)
    assert section is not None and rule["alert"] in section.title, (
        "%s lands on %r, not a section of its own" % (rule["alert"], section.title if section else url.fragment))


def test_the_reports_links_land_on_sections():
    page = anchors(_runbook())
    wanted = set(FAILURE_CLASSES) | {START_LIMIT_SECTION, "reading-a-report"}
    assert wanted - page == set()


def test_every_runbook_link_in_the_tree_resolves():
    links = _tree_links()
    assert len(links) > 20, links
    page = anchors(_runbook())
    broken = sorted({"%s: runbook.md#%s" % (rel, frag) for rel, frag in links if frag not in page})
    assert broken == []


def test_a_broken_link_is_caught():
    assert "no-such-section" not in anchors(_runbook())
    assert "stop-the-automation" in anchors(_runbook())


def test_every_procedure_the_drill_runs_is_a_marked_block_of_the_runbook():
    names = set()
    for drill in DRILLS:
        with open(drill, encoding="utf-8") as fh:
            names |= set(re.findall(r"drill_name: ([a-z0-9-]+)", fh.read()))
    assert {"hold", "release", "api-key-change", "start-limit-reset", "held-verdict", "fix-once", "force-cold-restart"} <= names
    blocks = runbook_mod.drill_blocks(_runbook())
    assert names - set(blocks) == set()
    assert blocks["start-limit-reset"].startswith("systemctl reset-failed sglang-k26-ddtree")
    assert all(text.strip() for text in blocks.values())


def test_drill_blocks_are_read_after_their_marker_and_dedented():
    text = "1. Hold:\n\n   <!-- drill: a -->\n   ```sh\n   one\n     two\n   ```\n\n```sh\nnot marked\n```\n"
    assert runbook_mod.drill_blocks(text) == {"a": "one\n  two\n"}
    with pytest.raises(ValueError):
        runbook_mod.drill_blocks(text + "<!-- drill: a -->\n```sh\nx\n```\n")


def test_the_block_reader_fails_on_a_missing_block():
    script = os.path.join(ROOT, "plugins", "plugin_utils", "report", "runbook.py")
    ok = subprocess.run([sys.executable, script, RUNBOOK, "hold"], capture_output=True, text=True, check=False)
    assert ok.returncode == 0 and "sglang-ops-hold.conf" in ok.stdout, ok.stderr
    missing = subprocess.run([sys.executable, script, RUNBOOK, "no-such-procedure"], capture_output=True, text=True,
                             check=False)
    assert missing.returncode == 1 and "no-such-procedure" in missing.stderr and missing.stdout == ""
