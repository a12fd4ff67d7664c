"""bin/podman-setup: which settings a machine needs, and the containers.conf it writes
(the machine's own settings kept, only the needed keys changed)."""
from __future__ import annotations

import importlib.machinery
import importlib.util
import sys
import tomllib
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]


def load_setup():
    loader = importlib.machinery.SourceFileLoader("podman_setup", str(ROOT / "bin" / "podman-setup"))
    spec = importlib.util.spec_from_loader("podman_setup", loader)
    module = importlib.util.module_from_spec(spec)
    sys.modules["podman_setup"] = module  # dataclasses look their module up there
    loader.exec_module(module)
    return module


setup = load_setup()

HYBRID_MOUNTS = """\
tmpfs /sys/fs/cgroup tmpfs ro,nosuid,nodev,noexec,mode=755 0 0
cgroup2 /sys/fs/cgroup/unified cgroup2 rw,nosuid,nodev,noexec,relatime 0 0
cgroup /sys/fs/cgroup/memory cgroup rw,nosuid,nodev,noexec,relatime,memory 0 0
"""
UNIFIED_MOUNTS = "cgroup2 /sys/fs/cgroup cgroup2 rw,nosuid,nodev,noexec,relatime 0 0\n"
LEGACY_MOUNTS = """\
tmpfs /sys/fs/cgroup tmpfs ro,nosuid,nodev,noexec,mode=755 0 0
cgroup /sys/fs/cgroup/memory cgroup rw,nosuid,nodev,noexec,relatime,memory 0 0
"""


def test_cgroup_layout_is_read_from_the_mounts():
    assert setup.cgroup_layout(HYBRID_MOUNTS) == "hybrid"
    assert setup.cgroup_layout(UNIFIED_MOUNTS) == "unified"
    assert setup.cgroup_layout(LEGACY_MOUNTS) == "legacy"


def test_runc_is_chosen_only_for_crun_on_a_hybrid_layout():
    assert setup.needs_runc("crun", "hybrid")
    assert not setup.needs_runc("crun", "unified")
    assert not setup.needs_runc("runc", "hybrid")


def test_written_conf_keeps_the_machine_settings_and_changes_only_the_needed_keys():
    machine = [
        ("/usr/share/containers/containers.conf",
         {"containers": {"default_sysctls": ["net.ipv4.ping_group_range=0 0"]},
          "engine": {"runtime": "crun", "runtimes": {"runc": ["/usr/sbin/runc"]}}}),
        ("/etc/containers/containers.conf",
         {"engine": {"events_logger": "file", "num_locks": 4096, "remote": False}}),
    ]
    decision = setup.Decision(runtime="runc", default_ulimits=setup.LOW_ULIMITS,
                              reasons=["why"])
    conf = tomllib.loads(setup.render_conf(machine, decision))
    assert conf == {
        "containers": {"default_sysctls": ["net.ipv4.ping_group_range=0 0"],
                       "default_ulimits": ["nofile=1024:4096", "nproc=4096:8192"]},
        "engine": {"runtime": "runc", "events_logger": "file", "num_locks": 4096,
                   "remote": False, "runtimes": {"runc": ["/usr/sbin/runc"]}},
    }


def test_nothing_is_changed_when_the_machine_needs_nothing():
    assert not setup.Decision().needed
    machine = [("/etc/containers/containers.conf", {"engine": {"runtime": "crun"}})]
    conf = tomllib.loads(setup.render_conf(machine, setup.Decision()))
    assert conf == {"engine": {"runtime": "crun"}}
