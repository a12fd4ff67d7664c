"""Each role's meta/argument_specs.yml mirrors its defaults/main.yml."""
import re
from pathlib import Path

import pytest
import yaml

ROOT = Path(__file__).resolve().parents[3]
ROLES = ["cuda", "sglang", "sglang_service", "sglang_metrics"]
PY_TYPES = {"str": str, "bool": bool, "int": int, "float": float, "list": list, "dict": dict, "raw": object}


def _defaults(role):
    return yaml.safe_load((ROOT / "roles" / role / "defaults" / "main.yml").read_text()) or {}


def _options(role):
    spec = yaml.safe_load((ROOT / "roles" / role / "meta" / "argument_specs.yml").read_text())
    return spec["argument_specs"]["main"]["options"]


def _templated(value):
    return "{{" in str(value)


@pytest.mark.parametrize("role", ROLES)
def test_every_default_has_a_spec_and_every_spec_a_default(role):
    assert set(_defaults(role)) == set(_options(role))


@pytest.mark.parametrize("role", ROLES)
def test_spec_defaults_equal_the_role_defaults(role):
    defaults, options = _defaults(role), _options(role)
    for name, option in options.items():
        if _templated(defaults[name]):
            assert "default" not in option, f"{name}: templated default must not be copied into the spec"
        else:
            assert option.get("default") == defaults[name], name


@pytest.mark.parametrize("role", ROLES)
def test_spec_types_match_the_default_values(role):
    defaults, options = _defaults(role), _options(role)
    for name, option in options.items():
        value = defaults[name]
        if isinstance(value, str) and _templated(value):
            continue
        expected = PY_TYPES[option["type"]]
        assert isinstance(value, expected) and not (expected is int and isinstance(value, bool)), name


@pytest.mark.parametrize("role", ROLES)
def test_choices_contain_the_default(role):
    defaults, options = _defaults(role), _options(role)
    for name, option in options.items():
        if "choices" in option:
            assert defaults[name] in option["choices"], name


@pytest.mark.parametrize("role", ROLES)
def test_every_variable_is_prefixed_with_the_role_name_and_commented(role):
    lines = (ROOT / "roles" / role / "defaults" / "main.yml").read_text().splitlines()
    for number, line in enumerate(lines):
        match = re.match(r"^([a-z0-9_]+):", line)
        if match:
            assert match.group(1).startswith(role + "_"), match.group(1)
            assert lines[number - 1].startswith("# "), f"{match.group(1)} has no comment line above it"


@pytest.mark.parametrize("role", ROLES)
def test_every_spec_option_is_described(role):
    for name, option in _options(role).items():
        assert option.get("description"), name


def test_api_key_is_marked_no_log():
    assert _options("sglang_service")["sglang_service_api_key"]["no_log"] is True


def test_speculative_choices_match_the_role_list():
    role_vars = yaml.safe_load((ROOT / "roles" / "sglang_service" / "vars" / "main.yml").read_text())
    choices = _options("sglang_service")["sglang_service_speculative_algorithm"]["choices"]
    assert [c for c in choices if c] == role_vars["_sglang_service_speculative_algorithms"]
