"""docs/runbook.md: one section per failure class, each with the parts a report quotes."""
import re

import pytest

from ansible_collections.sglang_ops.serving.plugins.module_utils.domain.failure_classes import FAILURE_CLASSES
from ansible_collections.sglang_ops.serving.plugins.plugin_utils.report.runbook import parse_runbook

from ansible_collections.sglang_ops.serving.tests.unit.report.report_fixtures import RUNBOOK, runbook_sections

HOST_FIXES = ("host-orphan-processes", "host-wedged-gpu", "host-nccl-p2p", "host-oom-config",
              "host-jit-caches", "host-disk")


@pytest.mark.parametrize("code", sorted(FAILURE_CLASSES))
def test_every_failure_class_has_a_runbook_section_with_all_parts(code):
    section = runbook_sections().get(code)
    assert section is not None, "docs/runbook.md has no section anchored %r" % code
    assert section.title.startswith(code), section.title
    for part in ("Symptoms", "Confirm", "Next steps", "Escalate"):
        assert section.part(part).strip(), "%s: empty or missing '### %s'" % (code, part)


def test_a_class_added_to_the_table_without_a_section_is_caught(monkeypatch):
    from ansible_collections.sglang_ops.serving.plugins.module_utils.domain import failure_classes as fc
    extra = fc.FailureClass("stall_brand_new", "stalled", "new", True, "why")
    monkeypatch.setitem(fc.FAILURE_CLASSES, extra.code, extra)
    missing = [code for code in fc.FAILURE_CLASSES if code not in runbook_sections()]
    assert missing == ["stall_brand_new"]


@pytest.mark.parametrize("anchor", HOST_FIXES)
def test_host_level_fixes_have_their_own_sections(anchor):
    section = runbook_sections()[anchor]
    assert "```" in section.intro, "%s should give commands" % anchor


def test_every_link_inside_the_runbook_points_at_an_existing_anchor():
    with open(RUNBOOK, encoding="utf-8") as fh:
        text = fh.read()
    targets = set(re.findall(r"\]\(#([A-Za-z0-9_\-]+)\)", text))
    assert targets, "the runbook should cross-link its sections"
    assert targets - set(runbook_sections()) == set()


def test_parser_splits_anchored_sections_and_their_parts():
    text = "\n".join([
        "# Title", "intro", '<a id="one"></a>', "## one: first", "opening", "### Symptoms", "s1",
        "### Next steps", "1. do", "2. do more", '<a id="two"></a>', "## two", "### Confirm", "c2",
        "# Chapter", "not part of two"])
    sections = parse_runbook(text)
    assert list(sections) == ["one", "two"]
    assert sections["one"].title == "one: first"
    assert sections["one"].intro == "opening"
    assert sections["one"].part("next steps") == "1. do\n2. do more"
    assert sections["one"].part("Escalate") == ""
    assert sections["two"].part("Confirm") == "c2"
