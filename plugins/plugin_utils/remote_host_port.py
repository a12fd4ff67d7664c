"""The host-port of a restart driven from the controller (module_utils/start_watch.py
names the port): each call is one remote step over Ansible's connection. The action
plugin hands in how to run a shell step and the probe module; unit tests hand in a
scripted host.
"""
import time

from ansible_collections.sglang_ops.serving.plugins.plugin_utils import systemctl_verbs


class RemoteHostPort:
    """probe(cursor, stacks), verb(name), clock(), sleep(s), emit(line); read(...) for the
    probe's reads other than the observation (unit state, GPU holders, unit processes,
    diagnostics, the supervisor's start records); shell(cmd, timeout_s) for the verbs and
    the other writes (host lock, metrics file)."""

    def __init__(self, unit, shell, run_probe, emit, probe_args, clock=time.time, sleep=time.sleep):
        self.unit = unit
        self.shell = shell            # shell(cmd, timeout_s) -> (rc, stdout, stderr)
        self.run_probe = run_probe    # run_probe(module_args) -> the sglang_probe result
        self.emit = emit
        self.clock = clock
        self.sleep = sleep
        self.probe_args = dict(probe_args)   # sglang_probe options of every call
        self.since_epoch_s = None            # the first call of a watch reads the journal from here

    def probe(self, cursor=None, stacks=False):
        module_args = dict(self.probe_args, stacks=bool(stacks))
        if cursor is not None:
            module_args["cursor"] = cursor
        elif self.since_epoch_s is not None:
            module_args["since"] = self.since_epoch_s
        return self.run_probe(module_args)

    def read(self, **asked):
        """The probe without the observation: read(unit_state=True, holders=True, ...)
        -> the sglang_probe result."""
        return self.run_probe(dict(self.probe_args, observation=False, **asked))

    def verb(self, name, **kwargs):
        cmd, timeout_s = systemctl_verbs.verb_command(name, self.unit, **kwargs)
        return self.shell(cmd, timeout_s)


def probe_args(args):
    """sglang_probe options of every poll, from the restart's options."""
    module_args = {"unit": args["unit"], "port": args["port"], "host": args["host"],
                   "completion": "auto", "model": args["completion_model"]}
    if args.get("api_key_file"):
        module_args["api_key_file"] = args["api_key_file"]
    return module_args
