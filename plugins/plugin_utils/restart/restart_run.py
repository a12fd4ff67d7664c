"""What the units of one host's restart share (restart_procedure.py builds them): the task's
options, the host access, the artifacts folder, run.json's record, and what the run has
found out so far (the unit's venv, the weight cache daemon, the stage it is in). One
RestartRun per host and task, handed to each unit explicitly; nothing module-global.
"""
from ansible_collections.sglang_ops.serving.plugins.module_utils.records.trace_format import code_version
from ansible_collections.sglang_ops.serving.plugins.plugin_utils.shared import host_checks
from ansible_collections.sglang_ops.serving.plugins.plugin_utils.shared.artifacts import iso_utc, redact_secrets


class RemoteStepFailed(Exception):
    """A command the procedure depends on (systemctl start, ...) failed on the host."""


def counted(n, word):
    """'1 attempt', '3 attempts'."""
    return "%d %s%s" % (n, word, "" if n == 1 else "s")


class RestartRun:
    """The state one host's restart shares between its units, and the host reads they all
    make. options: restart_procedure.RestartOptions; access: the host access
    (remote_host_access.py, or a scripted one in tests); lock: host_lock.HostLock, or None
    where no other run can interfere (tests); server: server_sync.ServerSync when the host
    is one node of a server, else None; prewarm: prewarm(options, step_s, max_total_s) ->
    summary (issue: shorter restarts), or None."""

    def __init__(self, host, options, access, artifacts, lock=None, server=None, prewarm=None):
        self.host = host
        self.options = options
        self.unit = options.args["unit"]
        self.access = access
        self.artifacts = artifacts
        self.lock = lock
        self.server = server
        self.prewarm = prewarm
        self.outlook = None           # module_utils/services/start_outlook.StartOutlook: ETA and metrics, per run
        self.changed = False
        self.venv = None
        self.stage = "preflight"      # what the procedure is doing, for an interruption's record
        self.current_attempt = None   # the attempt being watched, until it is recorded
        self.daemon = None            # weight_cache_step.DaemonView when the host runs the weight cache
        args = options.args
        self.record = {
            "host": host, "unit": self.unit, "started": iso_utc(access.clock()), "finished": None,
            "outcome": None, "gave_up_because": None, "attempts": [], "preflight": {},
            "settings": options.settings.to_dict(), "code": code_version(),
            "options": {k: args[k] for k in ("poll_s", "max_attempts", "start_timeout_s",
                                             "stop_timeout_s", "kill_orphans")},
        }
        if server is not None:
            self.record["server"] = {"name": server.server, "nodes": server.nodes, "node_rank": server.rank,
                                     "folder": server.folder}

    @property
    def args(self):
        return self.options.args

    def sh(self, cmd, what, timeout_s=None, check=True):
        """A shell step on the host; RemoteStepFailed when it fails and check is set."""
        rc, out, err = self.access.shell(cmd, timeout_s)
        if check and rc != 0:
            detail = (err or out or "").strip()[-400:]
            raise RemoteStepFailed("%s failed on %s (rc %s): %s" % (what, self.host, rc, redact_secrets(detail)))
        return rc, out, err

    def read(self, what, result_key, **asked):
        """One of the probe's reads of the host (access.read); RemoteStepFailed when it cannot answer."""
        result = self.access.read(**asked)
        if result.get("failed") or result_key not in result:
            why = result.get("msg") if result.get("failed") else (result.get("missing") or {}).get(result_key)
            raise RemoteStepFailed("%s failed on %s: %s" % (what, self.host, redact_secrets(str(why or "no answer"))))
        return result

    def use_venv(self, state):
        """The unit's venv (off ExecStart): where its py-spy is, and what counts as ours."""
        self.venv = state.get("venv")
        if self.venv:
            self.access = self.access.with_probe_args(venv_bin=self.venv.rstrip("/") + "/bin")

    def classified(self, gpu_holders):
        """The GPU holders, the weight cache daemon's processes expected beside the unit's."""
        return host_checks.classify_holders(host_checks.gpu_check(gpu_holders), self.venv,
                                            expected_pids=self.daemon.pids if self.daemon is not None else ())

    def kill_orphans(self, orphans):
        """kill -9 the leftover server processes, named in the output and in run.json."""
        self.access.emit("killing leftover server processes: " + "; ".join(h.describe() for h in orphans))
        self.access.verb("kill-pids", pids=[h.pid for h in orphans])
        self.record["preflight"].setdefault("orphans_killed", []).extend(redact_secrets(h.describe()) for h in orphans)

    def unit_words(self):
        return self.unit if self.server is None else "%s, %s," % (self.unit, self.server.describe())

    def artifacts_words(self):
        """The run folder; for a node of a server, the server's folder (every node's artifacts)."""
        return self.artifacts.path if self.server is None else self.server.folder
