"""The Molecule scenarios' podman connection (molecule/resources/plugins/connection)."""
import importlib.util
import os
import subprocess
from pathlib import Path

import pytest

PLUGIN = Path(__file__).resolve().parents[3] / "molecule" / "resources" / "plugins" / "connection" / "podman.py"


def load_plugin():
    spec = importlib.util.spec_from_file_location("molecule_podman_connection", PLUGIN)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def test_pipelines_under_the_name_molecule_gives_its_hosts():
    plugin = load_plugin()
    assert plugin.Connection.has_pipelining is True
    assert plugin.Connection.transport == "podman"


def test_a_command_runs_in_the_containers_namespaces_with_a_clean_environment():
    argv = load_plugin().nsenter_argv("/usr/bin/nsenter", "4242", ["/bin/sh", "-c", "echo hi"])
    assert argv[:7] == ["/usr/bin/nsenter", "--target", "4242", "--all", "--root", "--wd", "env"]
    assert argv[7] == "-i"
    environment = argv[8:argv.index("/bin/sh")]
    assert "HOME=/root" in environment and any(e.startswith("PATH=/usr/local/sbin:") for e in environment)
    assert argv[-3:] == ["/bin/sh", "-c", "echo hi"]


@pytest.mark.skipif(os.geteuid() != 0, reason="nsenter into another process's namespaces needs root")
def test_the_argv_enters_a_real_process_and_drops_the_callers_environment():
    # This process's own PID: the namespaces are the caller's, so the command runs here,
    # but through the same nsenter and env -i as in a container.
    argv = load_plugin().nsenter_argv("nsenter", str(os.getpid()), ["/bin/sh", "-c", "echo ${HOME}:${VIRTUAL_ENV:-none}"])
    run = subprocess.run(argv, capture_output=True, text=True, env=dict(os.environ, VIRTUAL_ENV="/venv"), check=False)
    assert run.returncode == 0, run.stderr
    assert run.stdout.strip() == "/root:none"
