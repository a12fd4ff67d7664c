"""Each role's README is in the shape users know (requirements, variables, an example
playbook, what is verified and what is not), and its variables table is the one
bin/role-readme writes from the role's argument spec."""
import importlib.machinery
import importlib.util

import pytest
import yaml

from conftest import ROOT

ROLES = ["cuda", "sglang", "sglang_service", "sglang_metrics"]
SECTIONS = ["## Requirements", "## Role variables", "## Example playbook", "## What is verified here, and what is not"]


def _tool():
    loader = importlib.machinery.SourceFileLoader("role_readme", str(ROOT / "bin" / "role-readme"))
    spec = importlib.util.spec_from_loader("role_readme", loader)
    module = importlib.util.module_from_spec(spec)
    loader.exec_module(module)
    return module


role_readme = _tool()


@pytest.mark.parametrize("role", ROLES)
def test_the_readme_has_the_usual_sections_in_order(role):
    text = (ROOT / "roles" / role / "README.md").read_text()
    where = [text.find(s) for s in SECTIONS]
    assert -1 not in where, "%s lacks %s" % (role, [s for s, w in zip(SECTIONS, where) if w < 0])
    assert where == sorted(where), role


@pytest.mark.parametrize("role", ROLES)
def test_the_variables_table_is_the_one_written_from_the_argument_spec(role):
    text = (ROOT / "roles" / role / "README.md").read_text()
    assert role_readme.with_table(text, role_readme.variables_table(str(ROOT / "roles" / role))) == text, \
        "roles/%s/README.md is out of date: run bin/role-readme" % role


@pytest.mark.parametrize("role", ROLES)
def test_every_option_of_the_spec_is_in_the_table_with_its_default(role):
    table = role_readme.variables_table(str(ROOT / "roles" / role))
    options = yaml.safe_load((ROOT / "roles" / role / "meta" / "argument_specs.yml").read_text())
    for name, option in options["argument_specs"]["main"]["options"].items():
        (row,) = [line for line in table.splitlines() if line.startswith("| `%s` |" % name)]
        assert "| %s |" % option["type"] in row
        if isinstance(option.get("default"), (int, float)) and not isinstance(option["default"], bool):
            assert "`%s`" % option["default"] in row


@pytest.mark.parametrize("role", ROLES)
def test_the_example_playbook_is_yaml_that_names_the_role(role):
    text = (ROOT / "roles" / role / "README.md").read_text()
    example = text.split("## Example playbook", 1)[1].split("```yaml\n", 1)[1].split("```", 1)[0]
    (play,) = yaml.safe_load(example)
    assert "sglang_ops.serving.%s" % role in [r["role"] if isinstance(r, dict) else r for r in play["roles"]]


def test_a_readme_without_the_markers_is_refused_and_the_table_between_them_is_replaced():
    with pytest.raises(ValueError, match="needs one"):
        role_readme.with_table("# role\n", "| table |")
    text = "intro\n%s\nold\n%s\nafter\n" % (role_readme.BEGIN, role_readme.END)
    assert role_readme.with_table(text, "new") == "intro\n%s\nnew\n%s\nafter\n" % (role_readme.BEGIN, role_readme.END)
