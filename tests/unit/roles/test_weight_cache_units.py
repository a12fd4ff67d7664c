"""sglang_service_weight_cache: the weight cache daemon's unit beside the engine's, as rendered
for the demo inventory (on) and production (off), and both command lines parsed by the real
pinned SGLang's parsers."""
import json

import pytest

from conftest import (ROOT, TEST_API_KEY, daemon_flags, environment, exec_start_argv, group_vars, parse_unit,
                      parse_with_real_sglang, run_render, server_flags, setting)

UNIT = "sglang-k26-ddtree"
RUNTIME_DIR = f"/run/{UNIT}-weights"
# What the daemon unit shares with the engine's: user, devices, sandbox, accounting, limits, stop.
SHARED_SERVICE_KEYS = (
    "User", "Group", "WorkingDirectory", "NoNewPrivileges", "CapabilityBoundingSet", "AmbientCapabilities",
    "ProtectSystem", "ProtectHome", "PrivateTmp", "PrivateMounts", "ProtectKernelTunables", "ProtectKernelModules",
    "ProtectKernelLogs", "ProtectControlGroups", "ProtectClock", "ProtectHostname", "ProtectProc",
    "RestrictNamespaces", "RestrictRealtime", "RestrictSUIDSGID", "LockPersonality", "RemoveIPC", "UMask",
    "RestrictAddressFamilies", "SystemCallArchitectures", "SystemCallFilter", "SystemCallErrorNumber",
    "DevicePolicy", "DeviceAllow", "CPUAccounting", "IOAccounting", "MemoryAccounting", "TasksAccounting",
    "LimitNOFILE", "LimitMEMLOCK", "KillMode", "KillSignal", "TimeoutStopSec", "SendSIGKILL", "TimeoutStartSec",
    "Restart", "RestartPreventExitStatus", "RestartSec", "Type", "NotifyAccess")


@pytest.fixture(scope="module")
def rendered(tmp_path_factory):
    """{host: {file name suffix: text}} of every file render_unit.yml wrote for the host."""
    demo = group_vars("demo")
    production = dict(group_vars("production"), vault_sglang_api_key=TEST_API_KEY)
    on = dict(production, sglang_service_weight_cache=True, sglang_service_speculative_algorithm="")
    hosts = {
        "demo": demo,
        "production": production,
        "production-on": on,
        "unhardened": dict(on, sglang_service_hardening=False),
        "quantized": dict(on, sglang_service_extra_args=[["--quantization", "fp8"]],
                          sglang_service_weight_cache_extra_args=["--force"], sglang_service_weight_cache_timeout_s=600),
        "demo-off": dict(demo, sglang_service_weight_cache=False),
    }
    run, out_dir = run_render(tmp_path_factory.mktemp("render"), hosts)
    assert run.returncode == 0, run.stdout + run.stderr
    suffixes = (".service", "-weights.service", ".supervisor.json", "-weights.supervisor.json")
    return {host: {suffix: (out_dir / (host + suffix)).read_text() for suffix in suffixes
                   if (out_dir / (host + suffix)).exists()}
            for host in hosts}


def unit_keys(text, section="Service"):
    return {key for s, key, _value in parse_unit(text) if s == section}


def test_demo_inventory_turns_the_weight_cache_on(rendered):
    assert set(rendered["demo"]) == {".service", "-weights.service", ".supervisor.json", "-weights.supervisor.json"}
    assert "-weights.service" not in rendered["production"]


def test_engine_attaches_to_the_daemon_as_a_client(rendered):
    flags = server_flags(rendered["demo"][".service"])
    assert flags[flags.index("--weight-cache-mode") + 1] == "client"
    assert flags[flags.index("--weight-cache-timeout") + 1] == "1800"


def test_engine_wants_and_follows_the_daemon_and_is_never_bound_to_it(rendered):
    engine = rendered["demo"][".service"]
    assert f"{UNIT}-weights.service" in " ".join(setting(engine, "Unit", "Wants"))
    assert f"{UNIT}-weights.service" in " ".join(setting(engine, "Unit", "After"))
    for text in (engine, rendered["demo"]["-weights.service"]):
        assert not unit_keys(text, "Unit") & {"PartOf", "BindsTo", "Requires", "Requisite", "PropagatesStopTo",
                                               "StopPropagatedFrom"}
    # the daemon is ordered after nothing of the engine's
    assert UNIT + ".service" not in " ".join(setting(rendered["demo"]["-weights.service"], "Unit", "After"))


def test_both_units_find_the_sockets_and_ready_files_in_the_daemons_runtime_folder(rendered):
    engine_env = environment(rendered["demo"][".service"])
    daemon_env = environment(rendered["demo"]["-weights.service"])
    for name, suffix in (("SGLANG_WEIGHT_CACHE_SOCKET_TEMPLATE", "sock"), ("SGLANG_WEIGHT_CACHE_READY_TEMPLATE", "ready")):
        assert engine_env[name] == daemon_env[name] == f"{RUNTIME_DIR}/sglang_weight_cache_{{device_uuid}}.{suffix}"
        assert not engine_env[name].startswith("/tmp/")
    daemon = rendered["demo"]["-weights.service"]
    # the daemon's folder, then the server's own (the demo's stand-in keeps its GPU state there)
    assert setting(daemon, "Service", "RuntimeDirectory") == [f"{UNIT}-weights", "sglang-standin"]
    assert setting(daemon, "Service", "RuntimeDirectoryPreserve") == ["yes"]
    # the service group may enter it; nobody else
    assert setting(daemon, "Service", "RuntimeDirectoryMode") == ["0750"]


def test_hardened_engine_may_write_the_runtime_folder_and_an_unhardened_one_has_no_sandbox_line(rendered):
    assert f"-{RUNTIME_DIR}" in setting(rendered["production-on"][".service"], "Service", "ReadWritePaths")
    assert not setting(rendered["unhardened"][".service"], "Service", "ReadWritePaths")
    assert not setting(rendered["production"][".service"], "Service", "ReadWritePaths")[0].count("weights")


@pytest.mark.parametrize("host", ["production-on", "unhardened"])
def test_daemon_unit_runs_like_the_engine(rendered, host):
    engine, daemon = rendered[host][".service"], rendered[host]["-weights.service"]
    for key in SHARED_SERVICE_KEYS:
        assert setting(daemon, "Service", key) == setting(engine, "Service", key), key
    for key in ("StartLimitIntervalSec", "StartLimitBurst"):
        assert setting(daemon, "Unit", key) == setting(engine, "Unit", key), key
    assert setting(daemon, "Unit", "OnFailure") == [f"{UNIT}-weights-needed-human.service"]
    assert setting(daemon, "Service", "StateDirectory") == ["sglang-ops/starts-weights"]
    assert setting(daemon, "Install", "WantedBy") == ["multi-user.target"]
    # no completion to time: the watchdog is the engine's alone
    assert not setting(daemon, "Service", "WatchdogSec") and setting(engine, "Service", "WatchdogSec")


def test_daemon_runs_under_the_supervisor_with_its_own_settings(rendered):
    argv = exec_start_argv(rendered["demo"]["-weights.service"])
    assert argv[:5] == ["/usr/bin/python3", "-I", "/usr/lib/sglang-ops/sglang-supervisor", "--settings",
                        f"/etc/sglang/{UNIT}-weights.supervisor.json"]
    assert argv[5:9] == ["--", "/opt/sglang/venvs/0.5.23/bin/python", "-m", "sglang.srt.weight_cache.daemon"]


def test_supervisor_settings_say_what_each_unit_serves_and_where_the_ready_files_are(rendered):
    engine = json.loads(rendered["demo"][".supervisor.json"])
    daemon = json.loads(rendered["demo"]["-weights.supervisor.json"])
    ready = environment(rendered["demo"][".service"])["SGLANG_WEIGHT_CACHE_READY_TEMPLATE"]
    assert (engine["serves"], daemon["serves"]) == ("engine", "weight_cache")
    assert engine["weight_cache_ready_template"] == daemon["weight_cache_ready_template"] == ready
    assert (engine["unit"], daemon["unit"]) == (UNIT, f"{UNIT}-weights")
    assert daemon["starts_dir"] == "/var/lib/sglang-ops/starts-weights" != engine["starts_dir"]
    # the daemon serves no API: it never reads the key
    assert engine["api_key_file"] and daemon["api_key_file"] is None
    # the engine decides warm or cold with the playbook's minimum of the daemon's delivery budget
    assert engine["weight_cache_min_deliveries"] == 8 and "weight_cache_min_deliveries" not in daemon
    own = ("unit", "serves", "starts_dir", "api_key_file", "weight_cache_min_deliveries")
    assert {k: v for k, v in daemon.items() if k not in own} == {k: v for k, v in engine.items() if k not in own}


def test_without_the_weight_cache_nothing_of_it_is_left(rendered):
    for host in ("production", "demo-off"):
        engine = rendered[host][".service"]
        assert "-weights.service" not in rendered[host]
        assert not [flag for flag in server_flags(engine) if flag.startswith("--weight-cache")]
        assert "weights" not in " ".join(setting(engine, "Unit", "Wants") + setting(engine, "Unit", "After"))
        assert not [name for name in environment(engine) if name.startswith("SGLANG_WEIGHT_CACHE")]
        assert not {"serves", "weight_cache_ready_template", "weight_cache_min_deliveries"} & \
            set(json.loads(rendered[host][".supervisor.json"]))


def test_daemon_builds_the_engines_weights_with_its_extra_flags_and_its_own_after(rendered):
    engine_flags = server_flags(rendered["quantized"][".service"])
    flags = daemon_flags(rendered["quantized"]["-weights.service"])
    for flag in ("--model-path", "--tp-size", "--model-loader-extra-config"):
        assert flags[flags.index(flag) + 1] == engine_flags[engine_flags.index(flag) + 1], flag
    assert "--trust-remote-code" in flags
    # the engine's extra flags, then the daemon's own
    assert flags[-3:] == ["--quantization", "fp8", "--force"]
    assert flags[flags.index("--timeout") + 1] == "600"
    # nothing of the API reaches the daemon
    assert not {"--config", "--port", "--host", "--served-model-name"} & set(flags)


def test_engine_flags_in_client_mode_pass_the_real_sglang_parser(rendered, real_sglang_python, tmp_path):
    flags = server_flags(rendered["demo"][".service"])
    config = tmp_path / "unit.yaml"
    config.write_text("api-key: x\n")
    flags[flags.index("--config") + 1] = str(config)
    run = parse_with_real_sglang(real_sglang_python, flags)
    assert run.returncode == 0, run.stderr[-2000:]
    parsed = json.loads(run.stdout)["args"]
    assert (parsed["weight_cache_mode"], parsed["weight_cache_timeout"], parsed["speculative_algorithm"]) == \
        ("client", 1800, None)


@pytest.mark.parametrize("host", ["demo", "quantized"])
def test_daemon_flags_pass_the_real_daemons_parser(rendered, real_sglang_python, host):
    run = parse_with_real_sglang(real_sglang_python, daemon_flags(rendered[host]["-weights.service"]), daemon=True)
    assert run.returncode == 0, run.stderr[-2000:]
    result = json.loads(run.stdout)
    timeout_s = 1800 if host == "demo" else 600
    assert result["daemon_args"]["timeout"] == timeout_s and result["args"]["weight_cache_timeout"] == timeout_s
    assert result["args"]["tp_size"] == 8 and result["args"]["model_path"]
    assert result["daemon_args"]["force"] is (host == "quantized")


def test_real_daemon_parser_refuses_a_flag_neither_parser_knows(rendered, real_sglang_python):
    flags = daemon_flags(rendered["demo"]["-weights.service"]) + ["--no-such-flag", "1"]
    run = parse_with_real_sglang(real_sglang_python, flags, daemon=True)
    assert run.returncode == 2
    assert run.stderr.rstrip().splitlines()[-1].endswith("error: unrecognized arguments: --no-such-flag 1")


def test_argument_spec_documents_the_weight_cache_switch():
    import yaml
    options = yaml.safe_load((ROOT / "roles" / "sglang_service" / "meta" / "argument_specs.yml").read_text())[
        "argument_specs"]["main"]["options"]
    assert options["sglang_service_weight_cache"]["type"] == "raw"
    assert options["sglang_service_weight_cache"]["default"] == "auto"
    assert options["sglang_service_weight_cache"]["choices"] == ["auto", True, False]
    assert options["sglang_service_weight_cache_timeout_s"]["type"] == "int"
    assert "default" not in options["sglang_service_weight_cache_runtime_dir"]   # derived from the unit name
