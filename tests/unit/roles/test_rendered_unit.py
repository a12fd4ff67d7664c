"""The sglang_service unit as rendered for the production and demo inventories,
and its flags parsed by the real pinned SGLang."""
import json
import re
import stat

import pytest
import yaml

from conftest import (ROOT, TEST_API_KEY, environment, exec_start_argv, group_vars, parse_with_real_sglang, render_units,
                      server_flags, setting)

PRODUCTION_EXTRA = {"vault_sglang_api_key": TEST_API_KEY}
HOSTILE_KEY = "k$y with \"quotes\", 'single', \\ and `ticks` %n #no: comment ${HOME}"


def commented_pair_example():
    """(group, {host: variables}) of the commented two-host server in the production inventory."""
    text = (ROOT / "inventories" / "production" / "hosts.yml").read_text()
    block = text[text.index("  # children:"):]
    uncommented = "\n".join(line.replace("  # ", "  ", 1) for line in block.splitlines())
    (group, members), = yaml.safe_load("sglang:\n" + uncommented)["sglang"]["children"].items()
    return group, {name: {k: v for k, v in variables.items() if k != "ansible_user"}
                   for name, variables in members["hosts"].items()}


@pytest.fixture(scope="module")
def units(tmp_path_factory):
    production = dict(group_vars("production"), **PRODUCTION_EXTRA)
    demo = group_vars("demo")
    renamed_flag = dict(production, sglang_service_extra_args=[["--cuda-graph-max-bs", "8"]])
    quoting = dict(production, sglang_service_extra_args=[["--chat-template", "/etc/sglang/it's 100%.jinja"]],
                   sglang_service_api_key=HOSTILE_KEY)
    demo_no_key = dict(demo, sglang_service_api_key="")
    unsupervised = dict(production, sglang_service_supervisor=False)
    with_metrics = dict(production, sglang_metrics_enabled=True)
    # One server on two hosts; the inventory lists pair-b first, so it is node rank 0.
    pair = dict(production, sglang_service_nodes_group="reversed_pair", sglang_service_tp_size=16)
    example_group, example_hosts = commented_pair_example()
    return render_units(tmp_path_factory.mktemp("render"), {
        "production": production, "demo": demo, "renamed-flag": renamed_flag, "quoting": quoting,
        "demo-no-key": demo_no_key, "unsupervised": unsupervised, "with-metrics": with_metrics,
        "next-version": dict(production, sglang_version="0.5.24"),
        "pair-b": dict(pair, ansible_host="10.0.0.21"),
        "pair-a": dict(pair, ansible_host="10.0.0.22", sglang_service_supervisor=False),
        # the same pair whose nodes meet on a cluster network apart from Ansible's
        "fabric-a": dict(pair, ansible_host="10.0.0.31", sglang_service_nodes_group="fabric_pair",
                         sglang_service_dist_init_host="192.168.100.31"),
        "fabric-b": dict(pair, ansible_host="10.0.0.32", sglang_service_nodes_group="fabric_pair",
                         sglang_service_dist_init_host="192.168.100.31"),
        **{name: dict(production, **variables) for name, variables in example_hosts.items()}},
        groups={"reversed_pair": ["pair-b", "pair-a"], "fabric_pair": ["fabric-a", "fabric-b"],
                example_group: list(example_hosts)})


def local_flags(rendered):
    """The server flags of a rendered unit, --config pointing at the rendered file here."""
    unit, config_path = rendered
    flags = server_flags(unit)
    if "--config" in flags:
        flags[flags.index("--config") + 1] = str(config_path)
    return flags


def test_production_flags_pass_the_real_sglang_parser(units, real_sglang_python):
    flags = local_flags(units["production"])
    run = parse_with_real_sglang(real_sglang_python, flags)
    assert run.returncode == 0, run.stderr[-2000:]
    import json
    parsed = json.loads(run.stdout)["args"]
    assert parsed["tp_size"] == 8
    assert parsed["port"] == 30001
    assert parsed["speculative_algorithm"] == "DFLASH"
    assert parsed["tool_call_parser"] == "kimi_k2" and parsed["reasoning_parser"] == "kimi_k2"
    assert json.loads(parsed["model_loader_extra_config"]) == {"enable_multithread_load": True, "num_threads": 64}
    assert parsed["kv_cache_dtype"] == "fp8_e4m3"
    assert parsed["api_key"] == TEST_API_KEY


def test_demo_flags_pass_the_real_sglang_parser(units, real_sglang_python):
    run = parse_with_real_sglang(real_sglang_python, local_flags(units["demo"]))
    assert run.returncode == 0, run.stderr[-2000:]


def test_multi_host_pair_flags_pass_the_real_sglang_parser(units, real_sglang_python):
    parsed = {}
    for host in ("pair-b", "pair-a"):
        run = parse_with_real_sglang(real_sglang_python, local_flags(units[host]))
        assert run.returncode == 0, run.stderr[-2000:]
        parsed[host] = json.loads(run.stdout)["args"]
    assert [parsed[h]["node_rank"] for h in ("pair-b", "pair-a")] == [0, 1]
    for args in parsed.values():
        assert args["nnodes"] == 2
        assert args["dist_init_addr"] == "10.0.0.21:20000"
        assert args["tp_size"] == 16


def test_the_rendezvous_address_can_be_on_a_network_apart_from_ansibles(units):
    for host in ("fabric-a", "fabric-b"):
        flags = local_flags(units[host])
        assert flags[flags.index("--dist-init-addr") + 1] == "192.168.100.31:20000", (host, flags)


def test_production_inventory_two_host_example_passes_the_real_sglang_parser(units, real_sglang_python):
    _, hosts = commented_pair_example()
    first, second = hosts
    parsed = {}
    for host in hosts:
        run = parse_with_real_sglang(real_sglang_python, local_flags(units[host]))
        assert run.returncode == 0, run.stderr[-2000:]
        parsed[host] = json.loads(run.stdout)["args"]
    assert (parsed[first]["node_rank"], parsed[second]["node_rank"]) == (0, 1)
    assert {(a["nnodes"], a["tp_size"], a["dist_init_addr"]) for a in parsed.values()} == {
        (2, 16, hosts[first]["ansible_host"] + ":20000")}
    # restart.yml decides for the server as a whole: both units are the plain one, no supervisor.
    assert setting(units[first][0], "Service", "Type") == ["exec"]
    assert setting(units[second][0], "Service", "Type") == ["exec"]


def test_single_host_units_carry_no_multi_node_flags(units):
    for host in ("production", "demo", "unsupervised"):
        flags = local_flags(units[host])
        assert not {"--nnodes", "--node-rank", "--dist-init-addr"} & set(flags), (host, flags)


def test_real_parser_rejects_a_flag_the_pinned_release_renamed(units, real_sglang_python):
    flags = local_flags(units["renamed-flag"])
    assert "--cuda-graph-max-bs" in flags
    run = parse_with_real_sglang(real_sglang_python, flags)
    assert run.returncode == 2
    assert "ambiguous option: --cuda-graph-max-bs" in run.stderr


def test_every_server_flag_starts_its_own_line(units):
    unit = units["production"][0]
    body = unit.split("-m sglang.launch_server \\\n", 1)[1].split("\nStandardOutput=", 1)[0]
    for line in body.splitlines():
        assert re.match(r"^    --[a-z0-9-]+( \S.*)?$", line.rstrip(" \\")), line


def test_api_key_is_only_in_the_config_file(units):
    unit, config_path = units["production"]
    assert TEST_API_KEY not in unit
    assert config_path.read_text().splitlines()[-1] == f'api-key: "{TEST_API_KEY}"'
    assert stat.S_IMODE(config_path.stat().st_mode) == 0o600
    assert "EnvironmentFile=" not in unit


def test_api_key_reaches_the_server_through_its_config_file_not_argv(units):
    argv = exec_start_argv(units["production"][0])
    assert not any("api-key" in arg or "API_KEY" in arg for arg in argv)
    flags = server_flags(units["production"][0])
    assert flags[:2] == ["--config", "/etc/sglang/sglang-k26-ddtree.yaml"]


def test_without_an_api_key_there_is_no_config_file(units):
    unit, config_path = units["demo-no-key"]
    assert "--config" not in server_flags(unit)
    assert not config_path.exists()


def test_real_parser_reads_a_hostile_key_back_from_the_config_file(units, real_sglang_python):
    unit = units["quoting"][0]
    run = parse_with_real_sglang(real_sglang_python, local_flags(units["quoting"]))
    assert run.returncode == 0, run.stderr[-2000:]
    assert json.loads(run.stdout)["args"]["api_key"] == HOSTILE_KEY
    assert HOSTILE_KEY not in unit


def test_values_with_quotes_and_percent_survive_systemd_parsing(units):
    flags = server_flags(units["quoting"][0])
    assert flags[-2:] == ["--chat-template", "/etc/sglang/it's 100%.jinja"]


def test_supervisor_is_main_pid_and_runs_the_server_as_its_child(units):
    argv = exec_start_argv(units["production"][0])
    assert argv[:6] == ["/usr/bin/python3", "-I", "/usr/lib/sglang-ops/sglang-supervisor",
                        "--settings", "/etc/sglang/sglang-k26-ddtree.supervisor.json", "--"]
    assert argv[6:9] == ["/opt/sglang/venvs/0.5.23/bin/python", "-m", "sglang.launch_server"]
    assert "/bin/bash" not in units["production"][0]


def test_supervised_unit_lets_systemd_restart_only_what_a_restart_can_help(units):
    from ansible_collections.sglang_ops.serving.plugins.module_utils.domain.failure_classes import (
        restart_prevent_exit_statuses)
    unit = units["production"][0]
    (prevent,) = setting(unit, "Service", "RestartPreventExitStatus")
    assert [int(v) for v in prevent.split()] == restart_prevent_exit_statuses()
    (watchdog,) = setting(unit, "Service", "WatchdogSec")
    assert int(watchdog) > 3 * (30 + 60)       # the supervisor decides a hang before systemd's watchdog fires
    assert setting(unit, "Service", "StateDirectory") == ["sglang-ops/starts"]
    assert setting(unit, "Service", "TimeoutStartSec") == ["900"]


def test_supervisor_may_write_the_metrics_folder_only_when_metrics_are_on(units):
    writable = setting(units["with-metrics"][0], "Service", "ReadWritePaths")
    assert "-/var/lib/prometheus/node-exporter" in writable, writable
    assert not any("node-exporter" in v for v in setting(units["production"][0], "Service", "ReadWritePaths"))


def test_unsupervised_unit_is_the_plain_unit_of_earlier_releases(units):
    unit = units["unsupervised"][0]
    for line in ("Type=exec", "Restart=always", "TimeoutStartSec=infinity"):
        assert line in unit.splitlines()
    assert "WatchdogSec" not in unit and "RestartPreventExitStatus" not in unit


def test_server_runs_as_exec_of_bash_so_it_stays_main_pid(units):
    argv = exec_start_argv(units["unsupervised"][0])
    assert argv[:2] == ["/bin/bash", "-c"]
    assert argv[2].startswith('exec "$0" "$@"')
    assert ('> >(exec "$0" -I /usr/local/libexec/sglang-ops/sglang-log-filter /etc/sglang/sglang-k26-ddtree.yaml) 2>&1'
            in argv[2])
    assert argv[3:6] == ["/opt/sglang/venvs/0.5.23/bin/python", "-m", "sglang.launch_server"]


@pytest.mark.parametrize("setting", [
    "KillMode=control-group", "TimeoutStopSec=120", "Restart=on-failure", "RestartSec=30",
    "Type=notify", "NotifyAccess=main",
    "StartLimitBurst=3", "StartLimitIntervalSec=3600", "CPUAccounting=yes", "IOAccounting=yes",
    "MemoryAccounting=yes", "Environment=PYTHONUNBUFFERED=1", "SyslogIdentifier=sglang-k26-ddtree",
    'Environment="SGLANG_CACHE_DIR=/var/cache/sglang/0.5.23/sglang"',
    'Environment="SGLANG_DG_CACHE_DIR=/var/cache/sglang/0.5.23/deep_gemm"',
    'Environment="TRITON_CACHE_DIR=/var/cache/sglang/0.5.23/triton"',
    'Environment="TORCHINDUCTOR_CACHE_DIR=/var/cache/sglang/0.5.23/inductor"',
    'Environment="NCCL_DEBUG=WARN"', "DevicePolicy=closed", "DeviceAllow=char-nvidia-frontend rw",
    "DeviceAllow=/dev/nvidiactl rw", "DeviceAllow=char-nvidia-uvm rw", "ProtectSystem=strict",
    "NoNewPrivileges=yes", "LimitMEMLOCK=infinity",
])
def test_production_unit_has(units, setting):
    assert setting in units["production"][0].splitlines()


def test_caches_are_writable_inside_the_sandbox(units):
    line = next(l for l in units["production"][0].splitlines() if l.startswith("ReadWritePaths="))
    for path in ("/var/lib/sglang", "/var/cache/sglang/0.5.23/deep_gemm", "/var/cache/sglang/0.5.23/triton"):
        assert path in line.split("=", 1)[1].split()


CACHE_FOLDERS = {"SGLANG_CACHE_DIR": "sglang", "SGLANG_DG_CACHE_DIR": "deep_gemm", "TRITON_CACHE_DIR": "triton",
                 "TORCHINDUCTOR_CACHE_DIR": "inductor", "FLASHINFER_WORKSPACE_BASE": "flashinfer",
                 "CUDA_CACHE_PATH": "cuda"}


@pytest.mark.parametrize("host, version", [("production", "0.5.23"), ("next-version", "0.5.24")])
def test_each_version_has_its_own_venv_and_caches(units, host, version):
    unit = units[host][0]
    assert exec_start_argv(unit)[6] == f"/opt/sglang/venvs/{version}/bin/python"
    env = environment(unit)
    assert {name: env[name] for name in CACHE_FOLDERS} == {
        name: f"/var/cache/sglang/{version}/{folder}" for name, folder in CACHE_FOLDERS.items()}
    writable = setting(unit, "Service", "ReadWritePaths")[0].split()
    assert all(f"/var/cache/sglang/{version}/{folder}" in writable for folder in CACHE_FOLDERS.values())


def test_unit_starts_with_the_managed_header(units):
    assert units["production"][0].startswith("#")
