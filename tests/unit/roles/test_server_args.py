"""The server's command line from the sglang_service role's variables
(plugins/filter/sglang_server_args.py); the rendered unit and SGLang's own parser check the
same lines end to end (test_rendered_unit.py, test_flags_check.py)."""
import json

import pytest
import yaml
from ansible.errors import AnsibleFilterError

from ansible_collections.sglang_ops.serving.plugins.filter.sglang_server_args import OPTIONS, sglang_server_args
from conftest import ROOT

BASE = {"model_path": "/models/k2", "served_model_name": "", "host": "127.0.0.1", "port": 30001, "tp_size": 8,
        "context_length": 0, "mem_fraction_static": 0.0, "trust_remote_code": False, "speculative_algorithm": "",
        "speculative_draft_model_path": "/models/draft", "speculative_num_steps": 3, "speculative_eagle_topk": 0,
        "speculative_num_draft_tokens": 0, "tool_call_parser": "", "reasoning_parser": "", "loader_threads": 0,
        "watchdog_timeout_s": 0, "enable_metrics": False}


def args(**changes):
    return sglang_server_args(dict(BASE, **changes))


def test_values_that_leave_sglangs_choice_give_no_flag():
    assert args() == [["--model-path", "/models/k2"], ["--host", "127.0.0.1"], ["--port", "30001"], ["--tp-size", "8"]]


def test_every_flag_in_its_place_with_its_value_as_the_server_reads_it():
    lines = args(served_model_name="kimi", context_length="131072", mem_fraction_static=0.85, trust_remote_code=True,
                 speculative_algorithm="DFLASH", speculative_eagle_topk=4, tool_call_parser="kimi_k2",
                 reasoning_parser="kimi_k2", loader_threads=16, watchdog_timeout_s=600, enable_metrics=True)
    assert [line[0] for line in lines] == [
        "--model-path", "--served-model-name", "--host", "--port", "--tp-size", "--context-length",
        "--mem-fraction-static", "--trust-remote-code", "--speculative-algorithm", "--speculative-draft-model-path",
        "--speculative-num-steps", "--speculative-eagle-topk", "--tool-call-parser", "--reasoning-parser",
        "--model-loader-extra-config", "--watchdog-timeout", "--enable-metrics"]
    by_flag = {line[0]: line[1:] for line in lines}
    assert by_flag["--context-length"] == ["131072"] and by_flag["--mem-fraction-static"] == ["0.85"]
    assert by_flag["--trust-remote-code"] == [] and by_flag["--speculative-num-steps"] == ["3"]
    assert json.loads(by_flag["--model-loader-extra-config"][0]) == {"enable_multithread_load": True, "num_threads": 16}


def test_draft_settings_only_come_with_a_speculative_algorithm():
    assert not [line for line in args(speculative_num_steps=3) if line[0].startswith("--speculative")]


def test_a_server_over_several_hosts_names_its_nodes_its_rank_and_where_they_meet():
    lines = args(nodes=["a", "b"], node_rank=1, dist_init_host="fd00::1", dist_init_port=20000)
    assert lines[4:7] == [["--nnodes", "2"], ["--node-rank", "1"], ["--dist-init-addr", "[fd00::1]:20000"]]
    assert ["--nnodes", "1"] not in args(nodes=[], node_rank=0)


def test_the_config_file_comes_first_and_extra_args_last_as_given():
    lines = args(config_file="/etc/sglang/u.yaml", extra_args=[["--kv-cache-dtype", "fp8_e4m3"], "--enable-mixed-chunk"])
    assert lines[0] == ["--config", "/etc/sglang/u.yaml"]
    assert lines[-2:] == [["--kv-cache-dtype", "fp8_e4m3"], "--enable-mixed-chunk"]


@pytest.mark.parametrize("changes, words", [
    ({"tp_size": "eight"}, "tp_size must be a number, got 'eight'"),
    ({"enable_metrics": "false"}, "enable_metrics must be true or false, got 'false'"),
    ({"port": True}, "port must be a number"),
    ({"extra_args": "--x"}, "extra_args must be a list"),
    ({"tp_sise": 8}, "unknown options: tp_sise"),
])
def test_a_wrong_value_or_name_fails_naming_it(changes, words):
    with pytest.raises(AnsibleFilterError, match=words):
        args(**changes)


def test_a_missing_option_is_named():
    options = dict(BASE)
    del options["port"]
    with pytest.raises(AnsibleFilterError, match="missing options: port"):
        sglang_server_args(options)


def test_the_role_hands_the_filter_every_option_it_knows():
    role_vars = yaml.safe_load((ROOT / "roles" / "sglang_service" / "vars" / "main.yml").read_text())
    handed = set(role_vars["_sglang_service_server_options"]) | {"config_file", "extra_args"}
    assert handed == set(OPTIONS)


def test_weight_cache_client_mode_comes_with_its_timeout_and_off_gives_no_flag():
    assert args(weight_cache_mode="client", weight_cache_timeout_s=600)[-2:] == [
        ["--weight-cache-mode", "client"], ["--weight-cache-timeout", "600"]]
    assert not [line for line in args(weight_cache_mode="off") if line[0].startswith("--weight-cache")]


def test_an_engine_spawned_weight_cache_is_refused():
    with pytest.raises(AnsibleFilterError, match="weight_cache_mode must be one of off, client, got 'daemon'"):
        args(weight_cache_mode="daemon")


def test_daemon_command_line_is_the_engines_weights_then_its_timeouts_then_the_extra_flags():
    from ansible_collections.sglang_ops.serving.plugins.filter.sglang_server_args import sglang_weight_cache_daemon_args
    lines = sglang_weight_cache_daemon_args({
        "model_path": "/models/k2", "tp_size": 8, "trust_remote_code": True, "loader_threads": 16, "timeout_s": 900,
        "extra_args": [["--quantization", "fp8"]], "daemon_extra_args": ["--force"]})
    assert [line if isinstance(line, str) else line[0] for line in lines] == [
        "--model-path", "--tp-size", "--trust-remote-code", "--model-loader-extra-config", "--timeout",
        "--weight-cache-timeout", "--quantization", "--force"]
    assert lines[4:6] == [["--timeout", "900"], ["--weight-cache-timeout", "900"]]
    with pytest.raises(AnsibleFilterError, match="missing options: daemon_extra_args"):
        sglang_weight_cache_daemon_args({"model_path": "/m", "tp_size": 1, "trust_remote_code": False,
                                         "loader_threads": 0, "timeout_s": 1, "extra_args": []})
