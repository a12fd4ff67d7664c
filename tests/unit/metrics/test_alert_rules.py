"""The shipped alert rules: valid for promtool, each covered by a promtool unit test that
expects it to fire, and each with a runbook link to an existing section of docs/runbook.md."""
import os
import re
import shutil
import subprocess
from urllib.parse import urlparse

import pytest
import yaml

from ansible_collections.sglang_ops.serving.plugins.plugin_utils.report.runbook import parse_runbook

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__)))))
RULES = os.path.join(ROOT, "monitoring", "sglang-ops.rules.yml")
RULE_TESTS = os.path.join(ROOT, "monitoring", "sglang-ops.rules.test.yml")
RUNBOOK = os.path.join(ROOT, "docs", "runbook.md")


def _alerts():
    with open(RULES, encoding="utf-8") as fh:
        return [r for g in yaml.safe_load(fh)["groups"] for r in g["rules"] if "alert" in r]


ALERTS = _alerts()


def test_the_rules_hold_alerts():
    assert len(ALERTS) >= 5


@pytest.mark.parametrize("rule", ALERTS, ids=[r["alert"] for r in ALERTS])
def test_every_alert_links_to_its_runbook_section(rule):
    url = urlparse(rule["annotations"]["runbook_url"])
    assert url.path.endswith("/docs/runbook.md"), url
    with open(RUNBOOK, encoding="utf-8") as fh:
        sections = parse_runbook(fh.read())
    assert url.fragment in sections, "%s links to #%s, which docs/runbook.md lacks" % (rule["alert"], url.fragment)


@pytest.mark.parametrize("rule", ALERTS, ids=[r["alert"] for r in ALERTS])
def test_every_alert_has_a_promtool_test_that_expects_it_to_fire(rule):
    with open(RULE_TESTS, encoding="utf-8") as fh:
        tests = yaml.safe_load(fh)["tests"]
    firing = [case for t in tests for case in t.get("alert_rule_test", ())
              if case["alertname"] == rule["alert"] and case.get("exp_alerts")]
    quiet = [case for t in tests for case in t.get("alert_rule_test", ())
             if case["alertname"] == rule["alert"] and not case.get("exp_alerts")]
    assert firing, "no promtool test expects %s to fire" % rule["alert"]
    assert quiet, "no promtool test expects %s to stay quiet" % rule["alert"]


def test_promtool_checks_the_rules_and_runs_their_tests():
    promtool = shutil.which("promtool")
    assert promtool, "promtool is missing: apt-get install prometheus (.ci/run installs it)"
    check = subprocess.run([promtool, "check", "rules", RULES], capture_output=True, text=True)
    assert check.returncode == 0, check.stdout + check.stderr
    run = subprocess.run([promtool, "test", "rules", RULE_TESTS], capture_output=True, text=True)
    assert run.returncode == 0, run.stdout + run.stderr


def _with_host(series, host):
    """A promtool input series ('name{labels}' or 'name') labelled `host`=host."""
    name, _, labels = series.partition("{")
    labels = [l for l in re.findall(r'\w+="[^"]*"', labels) if not l.startswith("host=")]
    return "%s{%s}" % (name, ",".join(['host="%s"' % host] + labels))


def test_every_alert_keeps_the_host_label(tmp_path):
    """Each firing promtool case, replayed with `host` on every input series, must fire
    with `host` too: an aggregation or join that drops it fails here."""
    promtool = shutil.which("promtool")
    assert promtool, "promtool is missing: apt-get install prometheus (.ci/run installs it)"
    with open(RULE_TESTS, encoding="utf-8") as fh:
        suite = yaml.safe_load(fh)
    suite["rule_files"] = [RULES]
    covered = set()
    for case in suite["tests"]:
        for series in case.get("input_series", ()):
            series["series"] = _with_host(series["series"], "gpu-x9")
        for check in case.get("alert_rule_test", ()):
            for alert in check.get("exp_alerts") or ():
                alert["exp_labels"]["host"] = "gpu-x9"
                covered.add(check["alertname"])
    assert covered >= {rule["alert"] for rule in ALERTS}, "alerts without a firing case"
    path = tmp_path / "rules-with-host.test.yml"
    path.write_text(yaml.safe_dump(suite, sort_keys=False))
    run = subprocess.run([promtool, "test", "rules", str(path)], capture_output=True, text=True)
    assert run.returncode == 0, run.stdout + run.stderr


@pytest.mark.parametrize("doc", ["README.md", os.path.join("docs", "metrics.md")])
def test_the_alert_tables_of_the_docs_list_every_alert(doc):
    with open(os.path.join(ROOT, doc), encoding="utf-8") as fh:
        listed = set(re.findall(r"^\| `(SGLang\w+)` \|", fh.read(), re.M))
    assert listed == {rule["alert"] for rule in ALERTS}, "%s lists %s" % (doc, sorted(listed))
