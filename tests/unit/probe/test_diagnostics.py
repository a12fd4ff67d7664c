"""The diagnostics bundle read on the host, with the host's commands as scripts on PATH
and the unit's processes from a /proc laid out in tmp_path around a real Python child."""
import os
import sys

from ansible_collections.sglang_ops.serving.plugins.module_utils.host import diagnostics, nvidia_smi

SERVICE_CGROUP = "0::/system.slice/sglang-k26-ddtree.service\n"


def _proc(root, pid, cmdline, state="S"):
    d = root / str(pid)
    d.mkdir(parents=True)
    (d / "cmdline").write_bytes(cmdline.replace(" ", "\0").encode() + b"\0")
    (d / "cgroup").write_text(SERVICE_CGROUP)
    (d / "stat").write_text("%d (x) %s 1 %d 0 0 0 0 0 0 0 0 0 5 6 0 0\n" % (pid, state, pid))


def _host_commands(script_dir):
    script_dir("systemctl", """\
        case "$1" in
          status) echo "sglang-k26-ddtree.service - SGLang"; echo "   Active: inactive (dead)"; exit 3 ;;
          show) echo "ActiveState=inactive"; echo "SubState=dead" ;;
        esac
        """)
    script_dir("journalctl", """\
        echo "args: $*" >&2
        i=0; while [ $i -lt 5010 ]; do echo "line $i"; i=$((i+1)); done
        echo "server_args=ServerArgs(api_key='sk-abcdef123456')"
        """)
    script_dir("ss", "echo 'LISTEN 0 4096 0.0.0.0:30001'\n")
    return script_dir("nvidia-smi", """\
        case "$1" in
          --query-compute-apps=*) echo "4242, GPU-aaa, 8000" ;;
          *) echo "| NVIDIA-SMI 550.54 |" ;;
        esac
        """)


def test_the_bundle_has_each_part_bounded_and_redacted(tmp_path, script_dir, child, monkeypatch):
    smi = _host_commands(script_dir)
    monkeypatch.setenv("PATH", os.path.dirname(smi))
    monkeypatch.setattr(nvidia_smi, "EXTRA_DIRS", ())
    p = child("""
        import sys, time
        sys.stdout.write("up\\n"); sys.stdout.flush()
        time.sleep(120)
        """)
    assert p.stdout.readline() == b"up\n"
    proc_root = tmp_path / "proc"
    _proc(proc_root, p.pid, "/opt/sglang/venvs/0.5.23/bin/python -m sglang.launch_server")
    _proc(proc_root, 4242, "/usr/bin/dd if=/dev/zero", state="D")

    bundle = diagnostics.collect("sglang-k26-ddtree", 1764450000.9, os.path.dirname(sys.executable), str(proc_root))

    assert sorted(bundle) == ["journal", "nvidia-smi", "ports", "processes", "py-spy-pid%d" % p.pid,
                              "unit-status"]
    assert "Active: inactive (dead)" in bundle["unit-status"] and "# exit status" not in bundle["unit-status"]
    assert "SubState=dead" in bundle["unit-status"]
    journal = bundle["journal"].splitlines()
    assert "args: -u sglang-k26-ddtree.service --since @1764450000 --no-pager -a -o short-iso-precise" in journal
    assert "line 0" not in journal and "line 5009" in journal and len(journal) <= diagnostics.JOURNAL_LINES + 1
    assert "sk-abcdef123456" not in bundle["journal"]
    assert "NVIDIA-SMI 550.54" in bundle["nvidia-smi"] and "4242, GPU-aaa, 8000" in bundle["nvidia-smi"]
    assert "30001" in bundle["ports"]
    assert bundle["processes"].splitlines()[1:] == [line for dummy_pid, line in sorted([
        (p.pid, "%d\tS\t/opt/sglang/venvs/0.5.23/bin/python -m sglang.launch_server" % p.pid),
        (4242, "4242\tD\t/usr/bin/dd if=/dev/zero")])]
    dump = bundle["py-spy-pid%d" % p.pid]
    assert dump.startswith("PYSPY %d /opt/sglang/venvs/0.5.23/bin/python" % p.pid) and "<module>" in dump


def test_missing_commands_and_an_empty_unit_are_named_not_fatal(tmp_path, monkeypatch):
    monkeypatch.setenv("PATH", str(tmp_path))
    monkeypatch.setattr(nvidia_smi, "EXTRA_DIRS", ())
    (tmp_path / "proc").mkdir()
    bundle = diagnostics.collect("sglang-k26-ddtree", None, None, str(tmp_path / "proc"))
    assert bundle["nvidia-smi"] == "nvidia-smi not found\n"
    assert bundle["journal"].strip() == "journalctl not found"
    assert bundle["ports"] == "netstat not found\n"
    assert bundle["py-spy"] == "no Python process left in the unit\n"


def test_ranks_are_labelled_by_their_tp_rank():
    assert diagnostics.pyspy_label(11, "sglang::scheduler_TP3") == "rank3"
    assert diagnostics.pyspy_label(10, "/opt/sglang/venvs/0.5.23/bin/python -m sglang.launch_server") == "pid10"
    assert diagnostics.pyspy_label(12, "sglang::detokenizer") == "pid12"
