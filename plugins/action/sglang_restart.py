# Controller side of sglang_ops.serving.sglang_restart (documented in
# plugins/modules/sglang_restart.py). A module cannot stream output, so like
# ansible.builtin.reboot this loop runs on the controller and drives small remote steps:
# preflight, stop, confirm stopped, start, probe every poll_s, decide.
import os
import random
import shlex
import time

from ansible.errors import AnsibleActionFail, AnsibleConnectionFailure
from ansible.plugins.action import ActionBase
from ansible.utils.display import Display

from ansible_collections.sglang_ops.serving.plugins.module_utils import restart_policy
from ansible_collections.sglang_ops.serving.plugins.plugin_utils import host_checks, prewarm_step
from ansible_collections.sglang_ops.serving.plugins.plugin_utils.artifacts import RunArtifacts, iso_utc
from ansible_collections.sglang_ops.serving.plugins.plugin_utils.restart_run import (
    RemoteStepFailed, RestartProcedure, default_artifacts_root, detector_factory, format_progress)

display = Display()

PROBE_MODULE = "sglang_ops.serving.sglang_probe"

ARGUMENT_SPEC = {
    "unit": {"type": "str", "default": "sglang-k26-ddtree"},
    "port": {"type": "int", "default": 30001},
    "host": {"type": "str", "default": "127.0.0.1"},
    "api_key_env_file": {"type": "path"},
    "poll_s": {"type": "float", "default": 5.0},
    "max_attempts": {"type": "int", "default": 3},
    "start_timeout_s": {"type": "float", "default": 7200.0},
    "stop_timeout_s": {"type": "float", "default": 330.0},
    "failed_stop_timeout_s": {"type": "float", "default": 20.0},
    "release_timeout_s": {"type": "float", "default": 120.0},
    "gpu_idle_mib": {"type": "int", "default": 1024},
    "kill_orphans": {"type": "bool", "default": False},
    "artifacts_dir": {"type": "path"},
    "detector": {"type": "dict", "default": {}},
    "completion_model": {"type": "str", "default": "default"},
    "backoff_base_s": {"type": "float", "default": 10.0},
    "backoff_max_s": {"type": "float", "default": 120.0},
    "prewarm": {"type": "dict", "default": {}},
}
PREWARM_LOOP_OPTIONS = ("step_s", "max_total_s")


class ActionModule(ActionBase):
    TRANSFERS_FILES = False
    _VALID_ARGS = frozenset(ARGUMENT_SPEC)
    _supports_check_mode = True

    def run(self, tmp=None, task_vars=None):
        task_vars = task_vars or {}
        result = super().run(tmp, task_vars)
        del tmp
        dummy_valid, args = self.validate_argument_spec(argument_spec=ARGUMENT_SPEC)
        problems = _arg_problems(args)
        if problems:
            raise AnsibleActionFail("sglang_restart: " + "; ".join(problems))
        try:
            make_detector, settings = detector_factory(args["detector"], args["poll_s"])
        except ValueError as exc:
            raise AnsibleActionFail("sglang_restart: detector settings: %s" % exc)

        host = task_vars.get("inventory_hostname", "unknown")
        root = args["artifacts_dir"] or default_artifacts_root(task_vars.get("playbook_dir"))
        started_epoch_s = time.time()
        artifacts = RunArtifacts(root, host, started_epoch_s)
        procedure = RestartProcedure(
            host=host, args=args, artifacts=artifacts, settings=settings,
            make_detector=make_detector,
            shell=self._shell_step, probe=lambda a: self._probe(a, task_vars),
            emit=lambda text: display.display("%s | %s" % (host, text)),
            format_progress=format_progress,
            clock=time.time, sleep=time.sleep,
            backoff=restart_policy.Backoff(base_s=args["backoff_base_s"], max_s=args["backoff_max_s"]),
            rng=random.Random().random,
            prewarm=lambda options, step_s, max_total_s: prewarm_step.prewarm(
                lambda module_args: self._execute_module(module_name=prewarm_step.PREWARM_MODULE,
                                                         module_args=module_args, task_vars=task_vars),
                lambda text: display.display("%s | %s" % (host, text)), options, step_s, max_total_s),
        )
        try:
            if self._task.check_mode:
                outcome = procedure.observe_once()
            else:
                outcome = procedure.restart()
        except RemoteStepFailed as exc:
            outcome = procedure.give_up_on_error(str(exc))
        except BaseException as exc:  # unreachable, Ctrl-C: keep run.json true to what happened
            procedure.note_interrupted("%s: %s" % (type(exc).__name__, exc))
            raise
        finally:
            self._remove_tmp_path(self._connection._shell.tmpdir)
        result.update(outcome)
        result["elapsed"] = round(time.time() - started_epoch_s, 1)
        result["started"] = iso_utc(started_epoch_s)
        return result

    def _shell_step(self, cmd, timeout_s=None):
        """Run a shell snippet on the target; (rc, stdout, stderr)."""
        # Always one quoted `sh -c`: Ansible appends `&& sleep 0` to what it runs, which a
        # multi-line script would not survive.
        cmd = "sh -c %s" % _sh_quote(cmd)
        if timeout_s:
            cmd = "timeout %d %s" % (int(timeout_s), cmd)
        res = self._low_level_execute_command(cmd, sudoable=True)
        return res.get("rc", 1), res.get("stdout", ""), res.get("stderr", "")

    def _probe(self, module_args, task_vars):
        # A connection that drops for a moment must not end a ten-minute watch: the
        # watch loop tolerates a few failed polls in a row.
        try:
            return self._execute_module(module_name=PROBE_MODULE, module_args=module_args,
                                        task_vars=task_vars)
        except AnsibleConnectionFailure as exc:
            try:
                self._connection.reset()
            except Exception:  # the next poll tries again either way
                pass
            return {"failed": True, "msg": "connection failed: %s" % exc}


def _sh_quote(text):
    return shlex.quote(text)


def _arg_problems(args):
    problems = []
    try:
        host_checks.check_unit_name(args["unit"])
    except ValueError as exc:
        problems.append(str(exc))
    if not 1 <= args["port"] <= 65535:
        problems.append("port %d is outside 1-65535" % args["port"])
    if args["poll_s"] <= 0:
        problems.append("poll_s must be > 0")
    if args["max_attempts"] < 1:
        problems.append("max_attempts must be >= 1 (1 = no automatic restart)")
    for name in ("start_timeout_s", "stop_timeout_s", "failed_stop_timeout_s", "release_timeout_s"):
        if args[name] <= 0:
            problems.append("%s must be > 0" % name)
    if args["start_timeout_s"] < args["poll_s"]:
        problems.append("start_timeout_s must be at least poll_s")
    if args["backoff_base_s"] < 0 or args["backoff_max_s"] < 0:
        problems.append("backoff_base_s and backoff_max_s must not be negative")
    unknown = set(args["prewarm"]) - set(prewarm_step.MODULE_OPTIONS) - set(PREWARM_LOOP_OPTIONS)
    if unknown:
        problems.append("unknown prewarm options: %s (known: %s)" % (
            ", ".join(sorted(unknown)), ", ".join(prewarm_step.MODULE_OPTIONS + PREWARM_LOOP_OPTIONS)))
    if args["artifacts_dir"] and os.path.isfile(args["artifacts_dir"]):
        problems.append("artifacts_dir %s is a file" % args["artifacts_dir"])
    return problems
