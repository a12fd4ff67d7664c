# Filters that quote values for a systemd unit (plugins/module_utils/systemd_quoting.py).
# Documented in the .yml files beside this one.
from ansible.errors import AnsibleFilterError

from ansible_collections.sglang_ops.serving.plugins.plugin_utils.shared import systemd_quoting


def _guarded(function):
    def run(*args):
        try:
            return function(*args)
        except ValueError as e:
            raise AnsibleFilterError(str(e)) from None
    run.__name__ = function.__name__
    return run


def unit_value_problems(values):
    """One message per value of `values` ({variable: value}; lists and dicts are walked)
    that no systemd quoting can carry: a control character or a trailing backslash."""
    problems = []

    def walk(where, value):
        if isinstance(value, dict):
            for key, item in value.items():
                walk("%s key %r" % (where, key), key)
                walk("%s[%r]" % (where, key), item)
        elif isinstance(value, (list, tuple)):
            for index, item in enumerate(value):
                walk("%s[%d]" % (where, index), item)
        elif value is not None and not isinstance(value, (bool, int, float)):
            try:
                systemd_quoting.check_line_safe(value, where)
            except ValueError as e:
                problems.append(str(e))

    for name in sorted(values):
        walk(name, values[name])
    return problems


def systemd_value(value, what="value"):
    return systemd_quoting.directive_value(value, what)


def systemd_env(value, name, what="environment variable"):
    return systemd_quoting.environment_assignment(name, value, what)


def systemd_exec_arg(value, what="ExecStart argument"):
    return systemd_quoting.exec_argument(value, what)


class FilterModule:
    def filters(self):
        return {
            "systemd_value": _guarded(systemd_value),
            "systemd_env": _guarded(systemd_env),
            "systemd_exec_arg": _guarded(systemd_exec_arg),
            "unit_value_problems": unit_value_problems,
        }
