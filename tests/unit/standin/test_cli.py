"""Flags, the nvidia-smi stand-in, the model helper, settings, and the wheel."""
import json
import os
import re
import subprocess
import sys

import pytest

from .conftest import ROOT, SRC, nvidia_smi, query_gpus, wait_until

from sglang.standin import faults as faults_mod
from sglang.standin import settings as settings_mod


def run_launcher(base_env, *args, module="sglang.launch_server"):
    return subprocess.run([sys.executable, "-m", module, *args], env=base_env, capture_output=True,
                          text=True, timeout=30)


def test_unknown_flag_is_rejected_like_argparse(base_env, model_dir):
    r = run_launcher(base_env, "--model-path", model_dir, "--no-such-flag", "1")
    assert r.returncode == 2
    assert r.stderr.startswith("usage: launch_server.py")
    assert "error: unrecognized arguments: --no-such-flag 1" in r.stderr
    assert r.stdout == ""


def test_cuda_graph_max_bs_is_ambiguous_in_0523(base_env, model_dir):
    r = run_launcher(base_env, "--model-path", model_dir, "--cuda-graph-max-bs", "16")
    assert r.returncode == 2
    assert re.search(r"ambiguous option: --cuda-graph-max-bs could match --cuda-graph-max-bs-decode, "
                     r"--cuda-graph-max-bs-prefill", r.stderr)


def test_speculative_algorithm_choices_are_checked(base_env, model_dir):
    r = run_launcher(base_env, "--model-path", model_dir, "--speculative-algorithm", "DDTREE")
    assert r.returncode == 2 and "invalid choice: 'DDTREE'" in r.stderr


def test_help_lists_the_rendered_flags(base_env):
    r = run_launcher(base_env, "--help")
    assert r.returncode == 0
    for flag in ("--model-path", "--served-model-name", "--tokenizer-path", "--tp-size", "--context-length",
                 "--mem-fraction-static", "--trust-remote-code", "--api-key", "--enable-metrics",
                 "--speculative-algorithm", "--speculative-draft-model-path", "--speculative-num-steps",
                 "--speculative-eagle-topk", "--speculative-num-draft-tokens", "--tool-call-parser",
                 "--reasoning-parser", "--load-format", "--model-loader-extra-config", "--watchdog-timeout",
                 "--soft-watchdog-timeout", "--dist-timeout", "--kv-cache-dtype", "--chunked-prefill-size",
                 "--max-running-requests", "--disable-cuda-graph", "--disable-custom-all-reduce",
                 "--cuda-graph-max-bs-decode", "--cuda-graph-max-bs-prefill", "--log-level", "--nnodes",
                 "--node-rank", "--dist-init-addr", "--random-seed"):
        assert flag in r.stdout, flag


def test_project_flags_parse_with_tp_abbreviation():
    from sglang.srt.server_args import parse_args
    a = parse_args(["--model-path", "/m", "--tp", "8", "--trust-remote-code", "--tool-call-parser", "kimi_k2",
                    "--reasoning-parser", "kimi_k2", "--speculative-algorithm", "DFLASH",
                    "--model-loader-extra-config", '{"enable_multithread_load": true, "num_threads": 8}',
                    "--kv-cache-dtype", "fp8_e4m3", "--cuda-graph-max-bs-decode", "32", "--port", "30001"])
    assert a.tp_size == 8 and a.speculative_algorithm == "DFLASH" and a.cuda_graph_max_bs_decode == 32


def test_sglang_serve_is_the_same_server(base_env):
    r = run_launcher(base_env, "serve", "--bogus", module="sglang.cli.main")
    assert r.returncode == 2 and r.stderr.startswith("usage: sglang serve")


def test_nvidia_smi_idle_answers(base_env):
    gpus = query_gpus(base_env)
    assert [g["index"] for g in gpus] == [0, 1, 2, 3]
    assert all(0 < g["mem_used_mib"] < 10 and g["mem_total_mib"] == 97887 for g in gpus)
    assert all(re.fullmatch(r"GPU-[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}", g["uuid"])
               for g in gpus)
    r = nvidia_smi(base_env, "--query-compute-apps=pid,gpu_uuid,used_memory", "--format=csv,noheader,nounits")
    assert r.returncode == 0 and r.stdout == ""
    table = nvidia_smi(base_env).stdout
    assert "NVIDIA-SMI" in table and "No running processes found" in table
    assert {len(line) for line in table.splitlines()} == {91}


def test_nvidia_smi_header_and_units_format(base_env):
    r = nvidia_smi(base_env, "--query-gpu=index,memory.used,utilization.gpu", "--format=csv")
    lines = r.stdout.splitlines()
    assert lines[0] == "index, memory.used [MiB], utilization.gpu [%]"
    assert re.fullmatch(r"0, \d+ MiB, \d+ %", lines[1])


def test_nvidia_smi_refuses_what_the_real_one_refuses(base_env):
    r = nvidia_smi(base_env, "--bogus")
    assert r.returncode != 0 and "Invalid combination of input arguments" in r.stdout
    r = nvidia_smi(base_env, "--query-gpu=index,warp.speed", "--format=csv,noheader,nounits")
    assert r.returncode != 0 and 'Field "warp.speed" is not a valid field to query.' in r.stdout
    r = nvidia_smi(base_env, "--query-gpu=index")
    assert r.returncode != 0


def test_nvidia_smi_configured_gpu_count_and_memory(base_env, tmp_path):
    (tmp_path / "config.json").write_text(json.dumps({"gpus": 2, "gpu_mem_mib": 143771}))
    env = dict(base_env)
    del env["SGLANG_STANDIN_GPUS"]
    assert [(g["index"], g["mem_total_mib"]) for g in query_gpus(env)] == [(0, 143771), (1, 143771)]
    assert len(nvidia_smi(env, "-L").stdout.splitlines()) == 2


def test_settings_env_wins_over_config_file(tmp_path):
    cfg = tmp_path / "c.json"
    cfg.write_text(json.dumps({"weight_load_s": 99, "log_family": "0.5.16", "drop_page_cache": False}))
    s = settings_mod.load({"SGLANG_STANDIN_CONFIG": str(cfg), "SGLANG_STANDIN_WEIGHT_LOAD_S": "2.5",
                           "SGLANG_HEALTH_CHECK_TIMEOUT": "7"})
    assert s.weight_load_s == 2.5 and s.log_family == "0.5.16" and s.drop_page_cache is False
    assert s.health_check_timeout_s == 7.0 and s.decode_s_per_token == 0.0
    cfg.write_text(json.dumps({"decode_s_per_token": 0.5}))
    assert settings_mod.load({"SGLANG_STANDIN_CONFIG": str(cfg)}).decode_s_per_token == 0.5
    assert settings_mod.load({"SGLANG_STANDIN_CONFIG": str(cfg),
                              "SGLANG_STANDIN_DECODE_S_PER_TOKEN": "0.25"}).decode_s_per_token == 0.25
    cfg.write_text(json.dumps({"weight_load_sec": 1}))
    with pytest.raises(ValueError, match="unknown"):
        settings_mod.load({"SGLANG_STANDIN_CONFIG": str(cfg)})


def test_fault_times_counts_starts_per_fault_configuration(tmp_path):
    text = json.dumps([{"kind": "exit", "phase": "kv_cache", "times": 2}, {"kind": "slow_disk"}])
    fl = faults_mod.parse(json.loads(text))
    counts = [faults_mod.count_start(str(tmp_path), text) for _ in range(3)]
    assert counts == [1, 2, 3]
    assert [[f.kind for f in faults_mod.active(fl, n)] for n in counts] == [
        ["exit", "slow_disk"], ["exit", "slow_disk"], ["slow_disk"]]
    assert faults_mod.count_start(str(tmp_path), text + " ") == 1   # a new configuration starts at 1


@pytest.mark.parametrize("bad", [{"kind": "stall", "phase": "lunch"}, {"kind": "slow_disk", "read_mib_s": 0},
                                 {"kind": "fatal", "phase": "kv_cache"}, {"kind": "stall", "phase": "warmup",
                                                                          "mode": "nap"},
                                 {"kind": "exit", "phase": "warmup", "colour": "red"}])
def test_fault_schema_refuses_bad_entries(bad):
    with pytest.raises(ValueError):
        faults_mod.parse(bad)


def test_make_model_writes_real_shards(tmp_path):
    r = subprocess.run([sys.executable, "-m", "sglang.standin.make_model", str(tmp_path / "m"), "--shards", "3",
                        "--shard-mib", "0.5"], env=dict(os.environ, PYTHONPATH=SRC), capture_output=True,
                       text=True, timeout=30)
    assert r.returncode == 0
    shards = sorted(p for p in os.listdir(tmp_path / "m") if p.endswith(".safetensors"))
    assert shards == [f"model-0000{i}-of-00003.safetensors" for i in (1, 2, 3)]
    data = [(tmp_path / "m" / p).read_bytes() for p in shards]
    assert all(len(d) == 512 * 1024 for d in data) and data[0] != data[1]
    assert json.loads((tmp_path / "m" / "config.json").read_text())["architectures"]


def test_wheel_installs_offline_into_a_venv_and_serves(tmp_path, base_env, model_dir):
    built = subprocess.run([os.path.join(ROOT, "tests", "standin", "build")], capture_output=True, text=True,
                           timeout=120)
    assert built.returncode == 0, built.stderr
    wheel = built.stdout.strip().splitlines()[-1]
    assert wheel.endswith("sglang_standin-0.5.23-py3-none-any.whl") and os.path.exists(wheel)
    venv = tmp_path / "venv"
    subprocess.run([sys.executable, "-m", "venv", "--without-pip", str(venv)], check=True, timeout=60)
    py = str(venv / "bin" / "python")
    # its dependencies (py-spy, as SGLang's) come from the wheels the build put beside it
    subprocess.run([sys.executable, "-m", "pip", "--python", py, "install", "-q", "--no-index",
                    "--find-links", os.path.dirname(wheel), wheel], check=True, timeout=120)
    pyspy = subprocess.run([str(venv / "bin" / "py-spy"), "--version"], capture_output=True, text=True, timeout=30)
    assert pyspy.stdout.strip() == "py-spy 0.4.3"
    env = {k: v for k, v in base_env.items() if k != "PYTHONPATH"}
    show = subprocess.run([py, "-c", "import sglang, importlib.metadata as m; print(sglang.__version__); "
                           "print(m.metadata('sglang-standin')['Summary']); print(sglang.__doc__)"],
                          env=env, capture_output=True, text=True, timeout=30)
    assert show.stdout.splitlines()[0] == "0.5.23"
    assert "stand-in" in show.stdout.splitlines()[1] and "SGLang stand-in" in show.stdout
    assert subprocess.run([str(venv / "bin" / "nvidia-smi"), "-L"], env=env, capture_output=True,
                          timeout=30).returncode == 0
    from .conftest import StandIn, free_port
    port = free_port()
    server = StandIn(str(tmp_path), env, ["--model-path", model_dir, "--tp", "2", "--port", str(port)], port)
    with open(server.out_path, "ab") as out:
        server.proc = subprocess.Popen([str(venv / "bin" / "sglang"), "serve", *server.args], env=env, stdout=out,
                               stderr=out, start_new_session=True)
    try:
        server.wait_ready()
        assert sorted(server.ranks()) == [0, 1]
        apps = subprocess.run([str(venv / "bin" / "nvidia-smi"), "--query-compute-apps=pid,gpu_uuid,used_memory",
                               "--format=csv,noheader,nounits"], env=env, capture_output=True, text=True,
                              timeout=30).stdout.splitlines()
        assert sorted(int(a.split(", ")[0]) for a in apps) == sorted(server.ranks().values())
        assert server.http("/v1/completions", "POST", {"prompt": "x", "max_tokens": 2})[0] == 200
    finally:
        server.kill()
    wait_until(lambda: not server.group_pids(), timeout=10, what="venv server gone")


def test_broken_release_build_fails_at_start_with_a_traceback(tmp_path, base_env, model_dir):
    out = tmp_path / "wheels"
    built = subprocess.run([os.path.join(ROOT, "tests", "standin", "build"), "--version", "0.5.24", "--broken",
                            "--out", str(out)], capture_output=True, text=True, timeout=120)
    assert built.returncode == 0, built.stderr
    wheel = built.stdout.strip().splitlines()[-1]
    assert wheel == str(out / "sglang_standin-0.5.24-py3-none-any.whl")
    assert any(os.path.basename(p).startswith("py_spy-") for p in built.stdout.splitlines()[:-1])
    site = tmp_path / "site"
    import zipfile
    with zipfile.ZipFile(wheel) as zf:
        zf.extractall(site)
    env = dict(base_env, PYTHONPATH=str(site))
    version = subprocess.run([sys.executable, "-c", "import sglang; print(sglang.__version__)"], env=env,
                             capture_output=True, text=True, timeout=30)
    assert version.stdout.strip() == "0.5.24"
    # its own parser still works, as a broken release's does; the start fails
    assert run_launcher(env, "--model-path", model_dir, "--no-such-flag").returncode == 2
    r = run_launcher(env, "--model-path", model_dir, "--port", "31099")
    assert r.returncode == 1
    assert "Traceback (most recent call last):" in r.stderr
    assert r.stderr.rstrip().endswith("ImportError: sgl_kernel/common_ops.abi3.so: undefined symbol: "
                                      "_ZN3c1017RegisterOperatorsD1Ev")


def test_build_refuses_a_malformed_version(tmp_path):
    built = subprocess.run([os.path.join(ROOT, "tests", "standin", "build"), "--version", "next", "--out",
                            str(tmp_path)], capture_output=True, text=True, timeout=60)
    assert built.returncode == 2 and "--version must be a release like 0.5.24, got 'next'" in built.stderr
    assert list(tmp_path.iterdir()) == []


def _config_merge(argv):
    from sglang.srt.server_args import parse_args
    return parse_args(argv)


def test_config_file_options_are_merged_and_the_command_line_wins(tmp_path, model_dir):
    config = tmp_path / "server.yaml"
    config.write_text('# comment\napi-key: "k\\"ey $x"\nport: 31999\nenable-metrics: true\n'
                      'trust-remote-code: false\nkv-cache-dtype: fp8_e4m3\n')
    args = _config_merge(["--model-path", model_dir, "--config", str(config), "--port", "31001"])
    assert args.api_key == 'k"ey $x'
    assert args.port == 31001
    assert args.enable_metrics is True and args.trust_remote_code is False
    assert args.kv_cache_dtype == "fp8_e4m3"


@pytest.mark.parametrize("name, content, message", [
    ("server.json", "api-key: x\n", "Config file must be YAML format, got: .json"),
    ("absent.yaml", None, "Config file not found"),
    ("list.yml", "- a\n- b\n", "Config file must contain a dictionary at root level"),
])
def test_config_files_0523_refuses_are_refused(tmp_path, model_dir, name, content, message):
    path = tmp_path / name
    if content is not None:
        path.write_text(content)
    with pytest.raises(ValueError, match=re.escape(message)):
        _config_merge(["--model-path", model_dir, "--config", str(path)])


def test_only_one_config_file_is_taken(tmp_path, model_dir):
    (tmp_path / "a.yaml").write_text("port: 1\n")
    with pytest.raises(ValueError, match="Only one allowed"):
        _config_merge(["--model-path", model_dir, "--config", str(tmp_path / "a.yaml"), "--config",
                       str(tmp_path / "a.yaml")])


def test_server_prints_the_key_from_the_config_file_in_repr_form_as_0523_does(launch, tmp_path):
    key = "k'ey \"q\" \\ $x"
    config = tmp_path / "server.yaml"
    config.write_text("api-key: %s\n" % json.dumps(key))
    s = launch("--config", str(config))
    s.wait_ready()
    assert "'api_key': %r" % key in s.output()
    assert s.http("/v1/completions", "POST", {"prompt": "hi", "max_tokens": 1}, key=key)[0] == 200
    assert s.http("/v1/completions", "POST", {"prompt": "hi", "max_tokens": 1})[0] == 401


def test_without_pyyaml_a_flat_mapping_reads_as_pyyaml_reads_it():
    import yaml
    from sglang.srt.utils.server_args_config_parser import _load_flat_yaml
    text = ('# SGLang --config\napi-key: "k\\"ey \'s\' \\\\ `x` $y %n #z: w"\nport: 30001\nratio: 0.5\n'
            "name: 'it''s'\nplain: word  # comment\nflag: true\ndisabled: off\nnothing: null\nitems: [1, 2]\n")
    assert _load_flat_yaml(text) == yaml.safe_load(text)
