# Molecule's `podman` connection for the test hosts, faster than the one it replaces.
# Molecule's podman driver names the connection `podman`; this folder is first on
# ANSIBLE_CONNECTION_PLUGINS (.config/molecule/config.yml), so the name lands here.
#
# The collection's plugin (containers.podman.podman) runs `podman exec` four times per
# task and cannot pipeline, about a second per task on the test machines. This one
# pipelines (the module on stdin, as SSH does for users: ansible.cfg pipelining = true)
# and runs commands with nsenter in the container's namespaces, as root and with the
# container's root folder, working folder and a clean environment, which costs
# milliseconds instead of a conmon and runc start. Where nsenter cannot enter (not root,
# no nsenter), it pipelines through `podman exec -i`. File copies still go through the
# container's mounted filesystem (the collection's code).
#
# What differs from `podman exec`: a process a task leaves running stays in the
# container's PID namespace (it dies with the container) but not in its cgroup, and it
# keeps the controller's capabilities. The scenarios start long-lived processes on the
# hosts only through systemd (units, systemd-run), which puts them where they belong.
from __future__ import annotations

import os
import shlex
import shutil
import subprocess

from ansible.module_utils.common.text.converters import to_bytes, to_native
from ansible_collections.containers.podman.plugins.connection import podman as upstream

DOCUMENTATION = """
    name: podman
    short_description: Run tasks in a podman container, pipelined, through nsenter
    description:
        - The test hosts' connection in sglang-ops' Molecule scenarios (see the top of this file).
        - Takes the options of containers.podman.podman under the same names.
    options:
      remote_addr:
        description: Name or ID of the container.
        default: inventory_hostname
        vars:
          - name: ansible_host
          - name: inventory_hostname
          - name: ansible_podman_host
      remote_user:
        description: User in the container; set, commands go through C(podman exec --user).
        ini:
          - section: defaults
            key: remote_user
        env:
          - name: ANSIBLE_REMOTE_USER
        vars:
          - name: ansible_user
      podman_extra_args:
        description: Extra arguments for every podman command.
        default: ''
        ini:
          - section: defaults
            key: podman_extra_args
        vars:
          - name: ansible_podman_extra_args
        env:
          - name: ANSIBLE_PODMAN_EXTRA_ARGS
      podman_executable:
        description: The podman command.
        default: podman
        vars:
          - name: ansible_podman_executable
        env:
          - name: ANSIBLE_PODMAN_EXECUTABLE
"""

# What `podman exec` gives a command in these containers, instead of the controller's.
CLEAN_ENVIRONMENT = (
    "PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin",
    "HOME=/root",
    "TERM=xterm",
    "container=podman",
)


def nsenter_argv(nsenter: str, pid: str, command: list[str]) -> list[str]:
    """The command line that runs `command` inside the namespaces of process `pid`."""
    return [nsenter, "--target", pid, "--all", "--root", "--wd", "env", "-i", *CLEAN_ENVIRONMENT, *command]


class Connection(upstream.Connection):
    transport = "podman"
    has_pipelining = True

    def _connect(self):
        super()._connect()
        self._nsenter_argv_prefix = None
        nsenter = shutil.which("nsenter")
        if nsenter and os.geteuid() == 0 and not self.user:
            rc, stdout, _ = self._podman(["inspect", "--format", "{{.State.Pid}}"])
            pid = to_native(stdout).strip()
            if rc == 0 and pid.isdigit() and pid != "0":
                self._nsenter_argv_prefix = (nsenter, pid)

    def exec_command(self, cmd, in_data=None, sudoable=False):
        if not self._connected:
            self._connect()
        command = shlex.split(to_native(cmd, errors="surrogate_or_strict"))
        if self._nsenter_argv_prefix is None:
            exec_args = ["exec", "-i"] + (["--user", self.user] if self.user else [])
            return self._podman(exec_args, command, in_data)
        argv = nsenter_argv(*self._nsenter_argv_prefix, command)
        process = subprocess.Popen(
            [to_bytes(arg, errors="surrogate_or_strict") for arg in argv],
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
        )
        stdout, stderr = process.communicate(input=in_data)
        return process.returncode, stdout, stderr
