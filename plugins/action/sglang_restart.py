# Controller side of sglang_ops.serving.sglang_restart (documented in
# plugins/modules/sglang_restart.py). A module cannot stream output, so like
# ansible.builtin.reboot the run stays on the controller and drives small remote steps
# (shell snippets and sglang_probe calls). This file checks the options, sets up the
# artifacts folder and, for one node of a server, the nodes' meeting point, builds the
# host lock and the host access over Ansible's connection, then hands the run to
# plugin_utils/restart/restart_procedure.py: RestartProcedure.restart (the host lock taken;
# preflight, then the playbook's own attempts or, on a supervised unit, one restart
# followed), or in check mode RestartProcedure.observe_once (the same preflight decisions,
# one observation, what a restart would do). It reports the outcome, a lost host as
# unreachable. Stopping the unit is the procedure's (plugin_utils/restart/unit_stop.py):
# `systemctl stop` bounded by stop_timeout_s when it ends a serving instance and by the
# shorter of stop_timeout_s and failed_stop_timeout_s when it ends a failed start, then
# SIGKILL to the unit's processes when that stop fails or times out, and again while any
# is left (up to release_timeout_s).
import os
import random
import shlex
import time

from ansible import context
from ansible.errors import AnsibleActionFail, AnsibleConnectionFailure
from ansible.plugins.action import ActionBase
from ansible.utils.display import Display

from ansible_collections.sglang_ops.serving.plugins.plugin_utils.restart import retry_policy
from ansible_collections.sglang_ops.serving.plugins.module_utils.services import start_watch
from ansible_collections.sglang_ops.serving.plugins.module_utils.domain.detector_settings import from_overrides
from ansible_collections.sglang_ops.serving.plugins.module_utils.domain.number_range import range_problem
from ansible_collections.sglang_ops.serving.plugins.module_utils.domain import observe_only_decision, weight_cache
from ansible_collections.sglang_ops.serving.plugins.module_utils.host import service_defaults
from ansible_collections.sglang_ops.serving.plugins.module_utils.host.systemd_unit import check_unit_name
from ansible_collections.sglang_ops.serving.plugins.module_utils.records.inert_text import inert
from ansible_collections.sglang_ops.serving.plugins.plugin_utils.restart import host_lock, prewarm_step, server_sync
from ansible_collections.sglang_ops.serving.plugins.plugin_utils.shared import remote_host_access
from ansible_collections.sglang_ops.serving.plugins.plugin_utils.shared.artifacts import RunArtifacts, default_artifacts_root, iso_utc
from ansible_collections.sglang_ops.serving.plugins.plugin_utils.restart.restart_procedure import (
    RestartOptions, RestartProcedure, RunInterrupted, interruptible)
from ansible_collections.sglang_ops.serving.plugins.plugin_utils.restart.restart_run import RemoteStepFailed

display = Display()

PROBE_MODULE = "sglang_ops.serving.sglang_probe"

ARGUMENT_SPEC = {
    "unit": {"type": "str", "default": service_defaults.UNIT_NAME},
    "port": {"type": "int", "default": service_defaults.PORT},
    "host": {"type": "str", "default": "127.0.0.1"},
    "api_key_file": {"type": "path"},
    "poll_s": {"type": "float", "default": start_watch.POLL_S},
    "max_attempts": {"type": "int", "default": 3},
    "start_timeout_s": {"type": "float", "default": start_watch.START_TIMEOUT_S},
    # Past the role's TimeoutStopSec= (service_defaults): systemd's own SIGKILL comes first.
    "stop_timeout_s": {"type": "float", "default": service_defaults.STOP_TIMEOUT_S},
    # Shorter than TimeoutStopSec=: the processes of a failed start get SIGKILL from the task.
    "failed_stop_timeout_s": {"type": "float", "default": 20.0},
    "release_timeout_s": {"type": "float", "default": 120.0},
    "gpu_idle_mib": {"type": "int", "default": 1024},
    "kill_orphans": {"type": "bool", "default": False},
    "artifacts_dir": {"type": "path"},
    "metrics_dir": {"type": "path"},
    "detector": {"type": "dict", "default": {}},
    "supervisor_detector": {"type": "dict", "default": {}},
    "completion_model": {"type": "str", "default": "default"},
    "backoff_base_s": {"type": "float", "default": 10.0},
    "backoff_max_s": {"type": "float", "default": 120.0},
    "prewarm": {"type": "dict", "default": {}},
    "break_lock": {"type": "bool", "default": False},
    "server": {"type": "dict", "default": {}},
    "weight_cache": {"type": "bool"},
    "cold": {"type": "bool", "default": False},
    "weight_cache_min_deliveries": {"type": "int", "default": weight_cache.DEFAULT_MIN_DELIVERIES},
    "observe_only_min_ceiling_s": {"type": "float", "default": observe_only_decision.MIN_CEILING_S},
    "observe_only_ceiling_factor": {"type": "float", "default": observe_only_decision.CEILING_FACTOR},
}
SERVER_OPTIONS = ("name", "nodes")
# A run that gave up with one of these after its last probe failed to connect reports the
# host unreachable instead of failed.
UNREACHABLE_CODES = ("remote_step_failed", "probe_error")
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
        settings, supervisor_settings = _checked_settings(args)
        host = task_vars.get("inventory_hostname", "unknown")
        server_problem = _server_problem(args["server"], host)
        if server_problem:
            raise AnsibleActionFail("sglang_restart: " + server_problem)
        started_epoch_s = time.time()
        procedure = self._procedure(args, settings, host, task_vars, started_epoch_s)
        result.update(self._drive(procedure, supervisor_settings))
        if result.get("failed") and getattr(self, "_connection_lost", None) and \
                result.get("reason_code") in UNREACHABLE_CODES:
            # The run ended because the host stopped answering: Ansible's unreachable (the
            # recap's unreachable=1, exit 4 of ansible-playbook and of bin/sglang-ops).
            del result["failed"]
            result["unreachable"] = True
        result["elapsed"] = round(time.time() - started_epoch_s, 1)
        result["started"] = iso_utc(started_epoch_s)
        return result

    def _procedure(self, args, settings, host, task_vars, started_epoch_s):
        """The RestartProcedure of this host: its artifacts folder (inside the server's for
        one node of a server), host lock, host access over Ansible and prewarm."""
        root = args["artifacts_dir"] or default_artifacts_root(task_vars.get("playbook_dir"))
        server = None
        if args["server"]:
            spec = args["server"]
            # The nodes of one server run this task in workers of one playbook process.
            run_key = "%d-%s" % (os.getppid(), self._task._uuid)
            server = server_sync.ServerSync(server_sync.run_folder(root, spec["name"], run_key, started_epoch_s),
                                            spec["name"], spec["nodes"], host)
            artifacts = RunArtifacts.at(server.node_folder())
        else:
            artifacts = RunArtifacts(root, host, started_epoch_s)
        lock = host_lock.HostLock(self._shell_step, host_lock.holder_record(args, artifacts.path, started_epoch_s),
                                  force=args["break_lock"])

        emit = progress_printer(host)

        access = remote_host_access.RemoteHostAccess(
            args["unit"], self._shell_step, lambda module_args: self._probe(module_args, task_vars), emit,
            remote_host_access.probe_args(args, serves_api=server is None or server.serves_api),
            sleep=lock.sleep)   # the run's waits renew its host lock
        options = RestartOptions(args, settings, retry_policy.Backoff(base_s=args["backoff_base_s"],
                                                                      max_s=args["backoff_max_s"]),
                                 random.Random().random,
                                 defaults={name: spec.get("default") for name, spec in ARGUMENT_SPEC.items()})
        return RestartProcedure(
            host, options, access, artifacts, lock=lock, server=server,
            prewarm=lambda options, step_s, max_total_s: prewarm_step.prewarm(
                lambda module_args: self._execute_module(module_name=prewarm_step.PREWARM_MODULE,
                                                         module_args=module_args, task_vars=task_vars),
                emit, options, step_s, max_total_s))

    def _drive(self, procedure, supervisor_settings):
        """The procedure run (or observed, in check mode); its outcome, an interruption's
        included. Anything else that ends it is recorded in run.json, then raised."""
        server, artifacts = procedure.server, procedure.artifacts
        try:
            if self._task.check_mode:
                # A supervised unit's starts are decided with its supervisor's settings.
                return procedure.observe_once(supervised_settings=supervisor_settings)
            # Ansible's worker dies on SIGINT/SIGTERM without unwinding; this way the
            # run records the interruption and gives the host lock back first.
            return interruptible(procedure.restart)
        except RemoteStepFailed as exc:
            return procedure.give_up_on_error(str(exc))
        except RunInterrupted as exc:
            if server is not None:
                server.abort("interrupted", "interrupted by %s" % exc.signame)
            return {"failed": True, "outcome": "interrupted", "artifacts": artifacts.path,
                    "run_json": artifacts.abspath("run.json"), "changed": procedure.changed,
                    "msg": "%s: interrupted by %s during %s; %s was left as it was. Artifacts: %s" % (
                        procedure.host, exc.signame, procedure.stage, procedure.args["unit"], artifacts.path)}
        except BaseException as exc:  # unreachable host, a bug: keep run.json true to what happened
            procedure.note_interrupted("%s: %s" % (type(exc).__name__, exc))
            if server is not None:
                server.abort("interrupted", "%s: %s" % (type(exc).__name__, exc))
            raise
        finally:
            self._remove_tmp_path(self._connection._shell.tmpdir)

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
            answer = self._execute_module(module_name=PROBE_MODULE, module_args=module_args,
                                          task_vars=task_vars)
        except AnsibleConnectionFailure as exc:
            try:
                self._connection.reset()
            except Exception:  # the next poll tries again either way
                pass
            self._connection_lost = "connection failed: %s" % exc
            return {"failed": True, "msg": self._connection_lost}
        self._connection_lost = None
        return answer


def progress_printer(host):
    """emit(text) of the run: one progress line each, `<host> | <text>`; what a record held
    (a reason, a folder name) is escaped (inert), so no line of Ansible's output is forged."""
    def emit(text):
        display.display("%s | %s" % (host, inert(text)))
    return emit


def _sh_quote(text):
    return shlex.quote(text)


# (option, lowest, highest, lowest allowed itself): finite numbers in a sane range.
OPTION_RANGES = (
    ("poll_s", 0, 3600, False),
    ("start_timeout_s", 0, 7 * 86400, False),
    ("stop_timeout_s", 0, 86400, False),
    ("failed_stop_timeout_s", 0, 86400, False),
    ("release_timeout_s", 0, 86400, False),
    ("backoff_base_s", 0, 86400, True),
    ("backoff_max_s", 0, 86400, True),
    ("max_attempts", 1, 20, True),
    ("gpu_idle_mib", 0, 16 * 2**20, True),
    ("observe_only_min_ceiling_s", 0, 7 * 86400, False),
    ("observe_only_ceiling_factor", 1, 100, True),
)
PREWARM_LOOP_RANGES = (("step_s", 0, 3600, False), ("max_total_s", 0, 86400, True))


def _checked_settings(args):
    """(detector settings, the supervisor's detector settings) of the task; AnsibleActionFail
    naming every problem of the options at once, before anything runs on the host."""
    problems = _arg_problems(args)
    settings = supervisor_settings = None
    try:
        settings = from_overrides(dict(args["detector"] or {}))
    except ValueError as exc:
        problems.append("detector settings: %s" % exc)
    try:
        supervisor_settings = from_overrides(dict(args["supervisor_detector"] or {}))
    except ValueError as exc:
        problems.append("supervisor_detector settings: %s" % exc)
    if problems:
        raise AnsibleActionFail("sglang_restart: " + "; ".join(problems))
    return settings, supervisor_settings


def _server_problem(server, host):
    """What is wrong with the server option (one node of a server over several hosts), or None."""
    if not server:
        return None
    unknown = set(server) - set(SERVER_OPTIONS)
    if unknown or set(SERVER_OPTIONS) - set(server):
        return "server needs exactly %s, got %s" % (", ".join(SERVER_OPTIONS), ", ".join(sorted(server)))
    nodes = server["nodes"]
    if not isinstance(nodes, list) or len(nodes) < 2 or len(set(map(str, nodes))) != len(nodes):
        return "server.nodes must list the server's hosts in node-rank order, at least two, each once; got %r" % (nodes,)
    if host not in nodes:
        return "%s is not one of server.nodes (%s)" % (host, ", ".join(map(str, nodes)))
    if not str(server["name"]).strip():
        return "server.name must not be empty"
    forks = context.CLIARGS.get("forks")
    if forks and forks < len(nodes):
        return ("server %s has %d nodes, which restart together, but Ansible runs only %d hosts at once "
                "(forks): raise forks to at least %d" % (server["name"], len(nodes), forks, len(nodes)))
    return None


def _arg_problems(args):
    problems = []
    try:
        check_unit_name(args["unit"])
    except ValueError as exc:
        problems.append(str(exc))
    if not 1 <= args["port"] <= 65535:
        problems.append("port %d is outside 1-65535" % args["port"])
    for name, low, high, low_ok in OPTION_RANGES:
        problem = range_problem(name, args[name], low, high, low_ok)
        if problem:
            problems.append(problem)
    if not problems and args["start_timeout_s"] < args["poll_s"]:
        problems.append("start_timeout_s must be at least poll_s")
    unknown = set(args["prewarm"]) - set(prewarm_step.MODULE_OPTIONS) - set(PREWARM_LOOP_OPTIONS)
    if unknown:
        problems.append("unknown prewarm options: %s (known: %s)" % (
            ", ".join(sorted(unknown)), ", ".join(prewarm_step.MODULE_OPTIONS + PREWARM_LOOP_OPTIONS)))
    for name, low, high, low_ok in PREWARM_LOOP_RANGES:
        if name in args["prewarm"]:
            value = args["prewarm"][name]
            if isinstance(value, str):   # a number written as text counts as that number
                try:
                    value = float(value)
                except ValueError:
                    pass
            problem = range_problem("prewarm." + name, value, low, high, low_ok)
            if problem:
                problems.append(problem)
    if args["artifacts_dir"] and os.path.isfile(args["artifacts_dir"]):
        problems.append("artifacts_dir %s is a file" % args["artifacts_dir"])
    return problems
