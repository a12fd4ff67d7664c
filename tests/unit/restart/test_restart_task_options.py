"""playbooks/tasks/sglang_restart.yml: every option of the sglang_restart action is set from
its sglang_restart_* variable (or, for the few that describe the service, from the
sglang_service role's variable), so no setting of an inventory is silently ignored."""
from pathlib import Path

import pytest
import yaml
from ansible.parsing.dataloader import DataLoader
from ansible.errors import AnsibleValueOmittedError
from ansible.template import Templar, trust_as_template

from ansible_collections.sglang_ops.serving.plugins.modules import sglang_restart as doc

ROOT = Path(__file__).resolve().parents[3]
TASK_FILE = ROOT / "playbooks" / "tasks" / "sglang_restart.yml"
ACTION = "sglang_ops.serving.sglang_restart"
# Options that describe the service rather than the restart: the role's variables set them,
# so the restart watches the unit the role installed.
FROM_THE_ROLE = {
    "unit": "sglang_service_unit_name",       # the unit the role installs
    "port": "sglang_service_port",            # the port the role's unit listens on
    "weight_cache": "sglang_service_weight_cache",   # the role installs the daemon's unit beside it
    "supervisor_detector": "sglang_service_supervisor_detector",   # the settings the role gives the supervisor
    "observe_only_min_ceiling_s": "sglang_service_observe_only_min_ceiling_s",   # rule 4's ceiling, as the supervisor has it
    "observe_only_ceiling_factor": "sglang_service_observe_only_ceiling_factor",
    # a later SGLang's delivery budget: the supervisor's starts go cold below the same number
    "weight_cache_min_deliveries": "sglang_service_weight_cache_min_deliveries",
}
# The server's nodes come from the inventory group named by sglang_service_nodes_group.
FROM_THE_INVENTORY = {"server"}
SAMPLES = {"str": "from-the-inventory", "path": "/from/the/inventory", "int": 4242, "float": 42.5, "bool": True,
           "dict": {"from": "the inventory"}}


def action_options():
    return yaml.safe_load(doc.DOCUMENTATION)["options"]


def task_args():
    tasks = yaml.safe_load(TASK_FILE.read_text())
    [task] = [t for t in tasks if ACTION in t]
    return task[ACTION]


def render(expression, variables):
    return Templar(loader=DataLoader(), variables=variables).template(trust_as_template(expression))


def test_every_option_of_the_action_is_in_the_task():
    assert set(task_args()) == set(action_options())


@pytest.mark.parametrize("name", sorted(set(action_options()) - set(FROM_THE_ROLE) - FROM_THE_INVENTORY))
def test_each_sglang_restart_variable_reaches_its_option(name):
    sample = SAMPLES[action_options()[name]["type"]]
    assert render(task_args()[name], {"sglang_restart_%s" % name: sample}) == sample


@pytest.mark.parametrize("name", ["host", "gpu_idle_mib", "backoff_max_s", "poll_s", "prewarm", "weight_cache", "cold"])
def test_an_unset_variable_leaves_the_actions_default(name):
    with pytest.raises(AnsibleValueOmittedError):
        render(task_args()[name], {})


@pytest.mark.parametrize("name, variable", sorted(FROM_THE_ROLE.items()))
def test_the_service_options_follow_the_roles_variables(name, variable):
    sample = SAMPLES[action_options()[name]["type"]]
    assert render(task_args()[name], {variable: sample}) == sample


def test_the_server_option_is_the_nodes_group_of_the_inventory():
    variables = {"sglang_service_nodes_group": "pair", "groups": {"pair": ["node-a", "node-b"]}}
    assert render(task_args()["server"], variables) == {"name": "pair", "nodes": ["node-a", "node-b"]}


def test_unset_service_variables_fall_back_on_the_roles_defaults():
    """unit, port and api_key_file where the inventory leaves them to the role: its defaults."""
    role = yaml.safe_load((ROOT / "roles" / "sglang_service" / "defaults" / "main.yml").read_text())
    args = task_args()
    assert render(args["unit"], {}) == role["sglang_service_unit_name"]
    assert int(render(args["port"], {})) == role["sglang_service_port"]
    assert render(args["api_key_file"], {}) == "%s/%s.yaml" % (role["sglang_service_config_dir"],
                                                               role["sglang_service_unit_name"])


def test_weight_cache_auto_leaves_the_choice_to_the_installed_units():
    """auto: the role installed the daemon's unit only where SGLang can run it; the restart looks."""
    with pytest.raises(AnsibleValueOmittedError):
        render(task_args()["weight_cache"], {"sglang_service_weight_cache": "auto"})
