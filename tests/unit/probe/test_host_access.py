"""The watch's host access is a written interface (start_watch.HostAccess): the controller's
RemoteHostAccess and the supervisor's _LocalHostAccess both have its methods with its parameters,
and what a call depends on comes in as its arguments."""
import inspect

import pytest

from ansible_collections.sglang_ops.serving.plugins.module_utils.services import start_watch, supervisor
from ansible_collections.sglang_ops.serving.plugins.plugin_utils.shared.remote_host_access import RemoteHostAccess

PROTOCOL_METHODS = ("probe", "clock", "sleep", "emit")


def _parameters(fn):
    return [p for p in inspect.signature(fn).parameters if p != "self"]


def _remote(calls, **probe_args):
    return RemoteHostAccess("u.service", shell=None, run_probe=lambda args: calls.append(args) or {"args": args},
                            emit=lambda line: None, probe_args=dict({"unit": "u.service"}, **probe_args),
                            clock=lambda: 100.0, sleep=lambda s: None)


def test_the_protocol_names_exactly_what_the_watch_calls():
    source = inspect.getsource(start_watch.watch_start)
    called = {name for name in ("probe", "clock", "sleep", "emit", "verb", "read", "shell") if "access.%s(" % name in source}
    assert called == set(PROTOCOL_METHODS)


@pytest.mark.parametrize("access", [_remote([]), supervisor._LocalHostAccess(sup=None)], ids=["controller", "supervisor"])
def test_each_access_conforms_to_the_protocol(access):
    assert isinstance(access, start_watch.HostAccess)
    for name in PROTOCOL_METHODS:
        wanted = _parameters(getattr(start_watch.HostAccess, name))
        member = getattr(access, name)
        have = _parameters(member)
        if inspect.ismethod(member):   # the class's own method: the protocol's names, extra ones optional
            assert have[:len(wanted)] == wanted, "%s.%s%s" % (type(access).__name__, name, have)
        else:                          # a callable handed in (a clock, a sleep): as many arguments
            assert len(have) == len(wanted), "%s.%s%s" % (type(access).__name__, name, have)


def test_the_journal_is_read_from_the_start_until_a_cursor_takes_over():
    calls = []
    access = _remote(calls)
    access.probe(None, False, 50.0)
    access.probe("c1", True, 50.0)
    assert calls[0]["since_epoch_s"] == 50.0 and "cursor" not in calls[0]
    assert calls[1]["cursor"] == "c1" and "since_epoch_s" not in calls[1] and calls[1]["stacks"] is True


def test_probe_arguments_added_later_make_a_new_access_and_leave_the_old_one_alone():
    calls = []
    access = _remote(calls)
    with_venv = access.with_probe_args(venv_bin="/opt/v/bin")
    access.probe(None, False, None)
    with_venv.probe(None, False, None)
    with_venv.read(holders=True)
    assert "venv_bin" not in calls[0] and calls[1]["venv_bin"] == "/opt/v/bin"
    assert calls[2]["observation"] is False and calls[2]["venv_bin"] == "/opt/v/bin"
    with pytest.raises(ValueError):
        access.read(holder=True)
