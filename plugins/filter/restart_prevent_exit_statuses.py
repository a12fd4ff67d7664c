# The supervisor's exit statuses from the failure-class table
# (plugins/module_utils/domain/failure_classes.py), for the unit's RestartPreventExitStatus=.
# Documented in the .yml file beside this one.
from ansible_collections.sglang_ops.serving.plugins.module_utils.domain import failure_classes


def restart_prevent_exit_statuses(_unused=None):
    return failure_classes.restart_prevent_exit_statuses()


class FilterModule:
    def filters(self):
        return {"restart_prevent_exit_statuses": restart_prevent_exit_statuses}
