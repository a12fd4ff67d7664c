"""The sglang_weight_cache_fit module run for real through Ansible, asking a venv's Python that
answers, one that cannot import SGLang and one that hangs: the last two bounded, the pinned
allowlist answering with a warning that says so and why."""
import json
import os
import subprocess
import sys
import time

import pytest

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__)))))
ANSIBLE = os.path.join(os.path.dirname(sys.executable), "ansible")

pytestmark = pytest.mark.skipif(not os.path.exists(ANSIBLE), reason="ansible not in this interpreter's venv")


def run_module(args):
    env = dict(os.environ, ANSIBLE_CONFIG=os.path.join(ROOT, "ansible.cfg"), ANSIBLE_STDOUT_CALLBACK="json",
               ANSIBLE_LOAD_CALLBACK_PLUGINS="1", ANSIBLE_NOCOLOR="1")
    cmd = [ANSIBLE, "localhost", "-c", "local", "-i", "localhost,", "-e", "ansible_python_interpreter=%s" % sys.executable,
           "-m", "sglang_ops.serving.sglang_weight_cache_fit", "-a", json.dumps(args)]
    p = subprocess.run(cmd, cwd=ROOT, env=env, capture_output=True, text=True, timeout=180, check=False)
    return json.loads(p.stdout)["plays"][0]["tasks"][0]["hosts"]["localhost"], p.stdout + p.stderr


@pytest.fixture
def fp8_model(tmp_path):
    folder = tmp_path / "model"
    folder.mkdir()
    (folder / "config.json").write_text(json.dumps({"quantization_config": {"quant_method": "fp8",
                                                                            "weight_block_size": [128, 128]}}))
    return str(folder)


def venv_python(tmp_path, body):
    """A venv's python: a shell script run as `python -I -c SCRIPT METHOD CONFIG`."""
    python = tmp_path / "venv" / "bin" / "python"
    python.parent.mkdir(parents=True)
    python.write_text("#!/bin/sh\n" + body)
    python.chmod(0o755)
    return str(python)


def test_a_venv_sglang_that_answers_is_asked(tmp_path, fp8_model):
    python = venv_python(tmp_path, "echo '{\"supported\": false, \"methods\": [\"\"], \"version\": \"0.6.0\"}'\n")
    res, raw = run_module({"model_path": fp8_model, "python": python})
    assert res.get("failed") is not True, raw
    assert res["supported"] is False and res["asked"] == "SGLang 0.6.0 of %s" % python
    assert not res.get("warnings")


def test_an_import_that_hangs_is_killed_at_the_bound_and_the_pinned_allowlist_answers(tmp_path, fp8_model):
    marker = tmp_path / "grandchild.pid"
    # the import hangs in a child of its own too (a driver call): the whole group is killed
    python = venv_python(tmp_path, "sleep 300 & echo $! > %s; sleep 300\n" % marker)
    began = time.monotonic()
    res, raw = run_module({"model_path": fp8_model, "python": python, "ask_timeout_s": 2})
    took = time.monotonic() - began
    assert res.get("failed") is not True, raw
    assert took < 60, took
    assert res["supported"] is True and res["quant_method"] == "fp8"
    assert "the allowlist of SGLang 0.5.23 (pinned" in res["asked"]
    assert "did not answer within ask_timeout_s=2 s" in res["asked"]
    [warning] = res["warnings"]
    assert "did not answer within ask_timeout_s=2 s" in warning and "allowlist of SGLang 0.5.23" in warning
    grandchild = int(marker.read_text())
    assert not os.path.exists("/proc/%d" % grandchild) or open("/proc/%d/stat" % grandchild).read().split()[2] == "Z"


def test_an_import_error_falls_back_to_the_pinned_allowlist_with_a_warning_naming_it(tmp_path, fp8_model):
    python = venv_python(tmp_path, "echo \"ModuleNotFoundError: No module named 'sglang.srt.weight_cache'\" >&2; exit 1\n")
    res, raw = run_module({"model_path": fp8_model, "python": python})
    assert res.get("failed") is not True, raw
    assert res["supported"] is True
    [warning] = res["warnings"]
    assert "No module named 'sglang.srt.weight_cache'" in warning and "allowlist of SGLang 0.5.23" in warning
    assert "No module named" in res["msg"]


def test_before_the_venv_exists_the_pinned_allowlist_answers_without_a_warning(tmp_path, fp8_model):
    res, raw = run_module({"model_path": fp8_model, "python": str(tmp_path / "no-venv" / "bin" / "python")})
    assert res.get("failed") is not True, raw
    assert res["supported"] is True and "is not installed yet" in res["asked"]
    assert not res.get("warnings")
