"""The host access of a restart driven from the controller: each call is one remote step over
Ansible's connection. It is a start_watch.HostAccess (probe, clock, sleep, emit) and adds
what the restart procedure needs around the watch: read(...) for the probe's reads other
than the observation (unit state, GPU holders, unit processes, diagnostics, the
supervisor's start records), verb(name) for systemctl, shell(cmd, timeout_s) for the
other writes (host lock, metrics file). The action plugin hands in how to run a shell
step and the probe module; unit tests hand in a scripted host.
"""
import dataclasses
import time

from ansible_collections.sglang_ops.serving.plugins.module_utils.host.probe import ProbeRequest
from ansible_collections.sglang_ops.serving.plugins.plugin_utils.shared import systemctl_verbs

PROBE_OPTIONS = frozenset(f.name for f in dataclasses.fields(ProbeRequest))


class RemoteHostAccess:
    def __init__(self, unit, shell, run_probe, emit, probe_args, clock=time.time, sleep=time.sleep):
        self.unit = unit
        self.shell = shell            # shell(cmd, timeout_s) -> (rc, stdout, stderr)
        self.run_probe = run_probe    # run_probe(module_args) -> the sglang_probe result
        self.emit = emit
        self.clock = clock
        self.sleep = sleep
        self._probe_args = checked_probe_args(probe_args)   # sglang_probe options of every call

    def with_probe_args(self, **more):
        """The same access whose probe calls also pass `more` (e.g. venv_bin, once the restart
        has read the unit's venv off ExecStart); this one is left as it is."""
        return RemoteHostAccess(self.unit, self.shell, self.run_probe, self.emit, dict(self._probe_args, **more),
                                clock=self.clock, sleep=self.sleep)

    def for_unit(self, unit):
        """The same access aimed at another unit of the host (the weight cache daemon's):
        its reads and verbs name that unit."""
        return RemoteHostAccess(unit, self.shell, self.run_probe, self.emit, dict(self._probe_args, unit=unit),
                                clock=self.clock, sleep=self.sleep)

    def probe(self, cursor=None, stacks=False, since_epoch_s=None):
        """One observation (start_watch.HostAccess.probe)."""
        module_args = dict(self._probe_args, stacks=bool(stacks))
        if cursor is not None:
            module_args["cursor"] = cursor
        elif since_epoch_s is not None:
            module_args["since_epoch_s"] = since_epoch_s
        return self.run_probe(module_args)

    def read(self, **asked):
        """The probe without the observation: read(unit_state=True, holders=True, ...)
        -> the sglang_probe result."""
        return self.run_probe(checked_probe_args(dict(self._probe_args, observation=False, **asked)))

    def verb(self, name, **kwargs):
        cmd, timeout_s = systemctl_verbs.verb_command(name, self.unit, **kwargs)
        return self.shell(cmd, timeout_s)


def checked_probe_args(module_args):
    """module_args, refused loudly when a name is not a probe option (a typo would otherwise
    only fail on the host, mid-restart)."""
    unknown = sorted(set(module_args) - PROBE_OPTIONS)
    if unknown:
        raise ValueError("not sglang_probe options: %s" % ", ".join(unknown))
    return dict(module_args)


def probe_args(args, serves_api=True):
    """sglang_probe options of every poll, from the restart's options. A node of a server
    over several hosts that does not serve the API (not node 0) sends no completion."""
    module_args = {"unit": args["unit"], "port": args["port"], "host": args["host"],
                   "completion": "auto" if serves_api else "never", "model": args["completion_model"]}
    if args.get("api_key_file"):
        module_args["api_key_file"] = args["api_key_file"]
    return checked_probe_args(module_args)
