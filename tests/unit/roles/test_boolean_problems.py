"""The roles' switch check (plugins/filter/boolean_problems.py): every bool option of a
role's argument spec must hold a boolean, not a string Ansible would only convert for
the argument check."""
import json

import pytest

from ansible_collections.sglang_ops.serving.plugins.filter.boolean_problems import boolean_problems


def test_booleans_and_unset_values_pass():
    assert boolean_problems({"a_switch": True, "b_switch": False, "unset": None}) == []


@pytest.mark.parametrize("value, shown, kind, meant", [
    ("false", '"false"', "a string", False),
    ("True", '"True"', "a string", True),
    ("no", '"no"', "a string", False),
    (1, "1", "a number", True),
    (0.0, "0.0", "a number", False),
    ([], "[]", "a list", False),
])
def test_each_non_boolean_is_named_with_its_value_and_how_to_write_it(value, shown, kind, meant):
    (message,) = boolean_problems({"sglang_service_supervisor": value, "sglang_cache_check": True})
    assert message.startswith("sglang_service_supervisor must be true or false, unquoted, got %s (%s)" % (shown, kind))
    assert message.endswith("-e '%s'" % json.dumps({"sglang_service_supervisor": meant}))


def test_several_are_named_in_order():
    found = boolean_problems({"z_switch": "yes", "a_switch": "off", "ok": False})
    assert [m.split(" ", 1)[0] for m in found] == ["a_switch", "z_switch"]
