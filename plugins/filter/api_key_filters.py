# The api-key line of SGLang's --config file (plugins/module_utils/host/api_key_config.py).
# Documented in api_key_config_line.yml and api_key_problem.yml beside this file.
from ansible.errors import AnsibleFilterError

from ansible_collections.sglang_ops.serving.plugins.module_utils.host import api_key_config


def api_key_config_line(key):
    try:
        return api_key_config.render(key)
    except ValueError as e:
        raise AnsibleFilterError(str(e)) from None


def api_key_problem(key):
    return api_key_config.problem(key) or ""


class FilterModule:
    def filters(self):
        return {"api_key_config_line": api_key_config_line, "api_key_problem": api_key_problem}
