"""The systemd quoting helpers, read back with the systemd reader of conftest.py."""
import pytest

from ansible_collections.sglang_ops.serving.plugins.module_utils.host import api_key_config
from ansible_collections.sglang_ops.serving.plugins.plugin_utils.shared import systemd_quoting

from conftest import resolve_specifiers, systemd_split

VALUES = ["plain", "", "two words", "it's", 'say "hi"', "back\\slash", "$HOME ${PATH} $$", "100% %n %%",
          "`id`; rm -rf / #", "=", ";", "ünïcode"]


@pytest.mark.parametrize("value", VALUES)
def test_exec_argument_is_one_word_handed_over_unchanged(value):
    rendered = systemd_quoting.exec_argument(value)
    words = systemd_split(resolve_specifiers(rendered))
    assert len(words) == 1 and words[0].replace("$$", "$") == value


@pytest.mark.parametrize("value", VALUES)
def test_environment_assignment_sets_exactly_one_variable(value):
    rendered = systemd_quoting.environment_assignment("NAME", value)
    assert rendered.startswith('"') and rendered.endswith('"')
    assert systemd_split(resolve_specifiers(rendered)) == ["NAME=" + value]


@pytest.mark.parametrize("value", VALUES)
def test_directive_value_only_escapes_specifiers(value):
    assert resolve_specifiers(systemd_quoting.directive_value(value)) == value


@pytest.mark.parametrize("value", ["a\nExecStartPre=+/bin/sh", "a\rb", "a\x00b", "tab\there", "esc\x1b", "del\x7f",
                                   "ends with \\", "kimi\u2028MainPID=1", "kimi\u2029Result=success", "nel\x85NRestarts=0",
                                   "vt\x0bx", "ff\x0cx", "fs\x1cx", "gs\x1dx", "rs\x1ex", "csi\x9bx"])
@pytest.mark.parametrize("render", [systemd_quoting.exec_argument, systemd_quoting.directive_value,
                                    lambda v, what="x": systemd_quoting.environment_assignment("NAME", v, what)])
def test_values_that_could_break_a_line_are_refused_with_their_name(value, render):
    with pytest.raises(ValueError, match="my_variable"):
        render(value, "my_variable")


def test_every_character_splitlines_splits_on_is_refused_by_name():
    separators = [chr(c) for c in range(0x110000) if len(("a%sb" % chr(c)).splitlines()) == 2]
    assert {"\n", "\x85", "\u2028", "\u2029"} <= set(separators)
    for separator in separators:
        with pytest.raises(ValueError, match="^sglang_service_served_model_name holds the .*U\\+%04X" % ord(separator)):
            systemd_quoting.check_line_safe("kimi" + separator + "MainPID=1", "sglang_service_served_model_name")


@pytest.mark.parametrize("name", ["", "1X", "A B", "A=B", "A\nB", "A-B", "A\u2028B"])
def test_environment_names_must_be_variable_names(name):
    with pytest.raises(ValueError):
        systemd_quoting.environment_assignment(name, "x")


@pytest.mark.parametrize("key, problem", [
    ("fine key $ \" ' \\ ` %", None),
    ("line\nbreak", "\\n"),
    ("tab\tkey", "\\t"),
    ("ümlaut", "U+00FC"),
    ("-looks-like-a-flag", "starts with '-'"),
])
def test_api_key_problems_name_the_character_never_the_key(key, problem):
    found = api_key_config.problem(key)
    if problem is None:
        assert found is None
    else:
        assert problem in found and key not in found
