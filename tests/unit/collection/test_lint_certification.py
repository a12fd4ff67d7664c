"""ansible-lint keeps every rule of the production profile, the one Galaxy's and
Automation Hub's importer lints with: the lint config skips none of them (by rule, by
sub-rule or by tag), excludes no collection content, and the shipped content silences
none of them inline."""
import os
import re

import pytest
import yaml
from ansiblelint.config import PROFILES
from ansiblelint.constants import DEFAULT_RULESDIR
from ansiblelint.rules import load_plugins

from .conftest import BIN, ROOT

LINT_CONFIG = os.path.join(ROOT, ".ansible-lint")
IGNORE_FILES = [os.path.join(ROOT, ".ansible-lint-ignore"), os.path.join(ROOT, ".config", "ansible-lint-ignore.txt")]
PROFILE = "production"
# The folders of the tarball that ansible-lint reads (Ansible content).
CONTENT = ("roles", "playbooks", "meta", "plugins", "changelogs")
# ansible-lint's rule modules carry their own tests, marked with marks of its test suite.
pytestmark = pytest.mark.filterwarnings("ignore::pytest.PytestUnknownMarkWarning")
NOQA = re.compile(r"#\s*noqa\b:?\s*(?P<rules>[^#\n]*)")


def profile_rules(name):
    """Rule ids a profile enables, with those of the profiles it extends."""
    rules = set()
    while name:
        rules |= set(PROFILES[name]["rules"])
        name = PROFILES[name].get("extends")
    return {rule.split("[")[0] for rule in rules}


CERTIFICATION_RULES = profile_rules(PROFILE)


@pytest.fixture(scope="module")
def rule_tags():
    """Every rule id ansible-lint knows, with its tags."""
    # Loading the rules asks `ansible` for its version: the virtualenv's.
    with pytest.MonkeyPatch.context() as patch:
        patch.setenv("PATH", BIN + os.pathsep + os.environ.get("PATH", ""))
        return {rule.id: set(rule.tags) for rule in load_plugins([DEFAULT_RULESDIR])}


def lint_config():
    with open(LINT_CONFIG) as f:
        return yaml.safe_load(f) or {}


def rules_named(entry, rule_tags):
    """The rules a skip or warn entry silences: a rule, a sub-rule (`name[casing]`) or a tag."""
    base = entry.split("[")[0]
    if base in rule_tags:
        return {base}
    return {rule for rule, tags in rule_tags.items() if entry in tags}


def certification_rules_silenced(entries, rule_tags):
    silenced = {}
    for entry in entries:
        rules = rules_named(str(entry), rule_tags)
        if not rules:
            silenced[entry] = "not a rule id or tag ansible-lint knows"
        elif rules & CERTIFICATION_RULES:
            silenced[entry] = sorted(rules & CERTIFICATION_RULES)
    return silenced


def test_the_production_profile_is_the_one_linted_with():
    assert lint_config()["profile"] == PROFILE
    assert {"sanity", "fqcn", "galaxy", "meta-runtime", "no-changelog"} <= CERTIFICATION_RULES


def test_an_entry_naming_a_certification_rule_is_detected(rule_tags):
    # The check itself: a rule, a sub-rule and a tag covering certification rules.
    found = certification_rules_silenced(["fqcn", "name[casing]", "idempotency", "no-such-rule"], rule_tags)
    assert set(found) == {"fqcn", "name[casing]", "idempotency", "no-such-rule"}


@pytest.mark.parametrize("key", ["skip_list", "warn_list"])
def test_lint_config_silences_no_certification_rule(key, rule_tags):
    assert certification_rules_silenced(lint_config().get(key) or [], rule_tags) == {}


def test_no_ignore_file_silences_certification_rules(rule_tags):
    silenced = {}
    for path in IGNORE_FILES:
        if not os.path.exists(path):
            continue
        with open(path) as f:
            for line in f:
                words = line.split("#")[0].split()
                if len(words) >= 2:
                    silenced.update(certification_rules_silenced(words[1:2], rule_tags))
    assert silenced == {}


def test_no_collection_content_is_excluded_from_lint():
    excluded = [os.path.normpath(p).rstrip("/") for p in lint_config().get("exclude_paths") or []]
    assert [p for p in excluded if p in (".", "") or p.split("/")[0] in CONTENT] == []


def test_shipped_content_silences_no_certification_rule_inline(rule_tags):
    silenced = {}
    for top in ("roles", "playbooks"):
        for folder, _, files in os.walk(os.path.join(ROOT, top)):
            for name in files:
                if not name.endswith((".yml", ".yaml", ".j2")):
                    continue
                path = os.path.join(folder, name)
                with open(path, encoding="utf-8") as f:
                    for number, line in enumerate(f, 1):
                        match = NOQA.search(line)
                        if not match:
                            continue
                        entries = match.group("rules").replace(",", " ").split() or ["(every rule)"]
                        found = certification_rules_silenced(entries, rule_tags)
                        if found:
                            silenced["%s:%d" % (os.path.relpath(path, ROOT), number)] = found
    assert silenced == {}
