"""One value per service default: the sglang_service role's defaults, its argument specs, the
restart action's defaults and documentation, the unit supervisor's settings and the
playbooks' fallbacks agree with plugins/module_utils/host/service_defaults.py; the action
waits for `systemctl stop` longer than the unit's TimeoutStopSec=, so systemd's kill comes first."""
from pathlib import Path

import pytest
import yaml

from ansible_collections.sglang_ops.serving.plugins.action import sglang_restart as action
from ansible_collections.sglang_ops.serving.plugins.module_utils.domain import observe_only_decision, weight_cache
from ansible_collections.sglang_ops.serving.plugins.module_utils.host import service_defaults
from ansible_collections.sglang_ops.serving.plugins.module_utils.services.supervisor_settings import SupervisorSettings
from ansible_collections.sglang_ops.serving.plugins.modules import sglang_restart as doc

ROOT = Path(__file__).resolve().parents[2]
ROLE = ROOT / "roles" / "sglang_service"
VALUES = {"sglang_service_unit_name": service_defaults.UNIT_NAME, "sglang_service_port": service_defaults.PORT,
          "sglang_service_config_dir": service_defaults.CONFIG_DIR,
          "sglang_service_timeout_stop_s": service_defaults.TIMEOUT_STOP_S}


def _role_defaults():
    return yaml.safe_load((ROLE / "defaults" / "main.yml").read_text())


@pytest.mark.parametrize("variable", sorted(VALUES))
def test_the_role_installs_the_shared_defaults(variable):
    assert _role_defaults()[variable] == VALUES[variable]
    spec = yaml.safe_load((ROLE / "meta" / "argument_specs.yml").read_text())["argument_specs"]["main"]["options"]
    assert spec[variable].get("default", VALUES[variable]) == VALUES[variable]


def test_the_supervisor_settings_default_to_the_roles_unit_and_port():
    settings, role = SupervisorSettings(), _role_defaults()
    assert settings.unit == role["sglang_service_unit_name"]
    assert settings.base_url == "http://127.0.0.1:%d" % role["sglang_service_port"]


def test_the_action_and_its_documentation_default_to_the_roles_unit_and_port():
    options, role = yaml.safe_load(doc.DOCUMENTATION)["options"], _role_defaults()
    for option, variable in (("unit", "sglang_service_unit_name"), ("port", "sglang_service_port")):
        assert action.ARGUMENT_SPEC[option]["default"] == options[option]["default"] == role[variable]


def test_the_stop_timeout_lets_systemds_kill_come_first_and_the_docs_say_so():
    options, role = yaml.safe_load(doc.DOCUMENTATION)["options"], _role_defaults()
    default = action.ARGUMENT_SPEC["stop_timeout_s"]["default"]
    assert default == options["stop_timeout_s"]["default"]
    assert role["sglang_service_timeout_stop_s"] < default <= role["sglang_service_timeout_stop_s"] + 60
    words = " ".join(options["stop_timeout_s"]["description"])
    assert "TimeoutStopSec=" in words and "%d s" % role["sglang_service_timeout_stop_s"] in words
    assert "SIGKILL after it" not in doc.DOCUMENTATION


def test_the_playbooks_fall_back_on_the_roles_unit_and_port():
    """Where the inventory leaves them to the role, the playbooks' fallbacks are its defaults."""
    role = _role_defaults()
    for path in sorted((ROOT / "playbooks").rglob("*.yml")):
        text = path.read_text()
        for variable, fallback in (("sglang_service_unit_name", "'%s'" % role["sglang_service_unit_name"]),
                                   ("sglang_service_port", str(role["sglang_service_port"]))):
            for found in text.split(variable + " | default(")[1:]:
                assert found.startswith(fallback + ")"), "%s: %s | default(%s" % (path, variable, found[:40])


def test_rule_4s_ceiling_has_one_default_for_the_role_the_supervisor_and_the_action():
    role, options = _role_defaults(), yaml.safe_load(doc.DOCUMENTATION)["options"]
    settings = SupervisorSettings()
    for option, variable, value in (("observe_only_min_ceiling_s", "sglang_service_observe_only_min_ceiling_s",
                                     observe_only_decision.MIN_CEILING_S),
                                    ("observe_only_ceiling_factor", "sglang_service_observe_only_ceiling_factor",
                                     observe_only_decision.CEILING_FACTOR)):
        assert role[variable] == value == getattr(settings, option)
        assert action.ARGUMENT_SPEC[option]["default"] == options[option]["default"] == value


def test_the_delivery_budgets_minimum_has_one_default_for_the_role_the_supervisor_and_the_action():
    role, options = _role_defaults(), yaml.safe_load(doc.DOCUMENTATION)["options"]
    value = weight_cache.DEFAULT_MIN_DELIVERIES
    assert role["sglang_service_weight_cache_min_deliveries"] == value == SupervisorSettings().weight_cache_min_deliveries
    assert action.ARGUMENT_SPEC["weight_cache_min_deliveries"]["default"] == \
        options["weight_cache_min_deliveries"]["default"] == value
