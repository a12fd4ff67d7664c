"""The default scenario: a systemd unit serves the SGLang stand-in on port 30001."""
from sglang_checks import journal, post_json, wait_ready

UNIT = "sglang-k26-ddtree"
PORT = 30001


def test_unit_is_active_and_enabled(host):
    service = host.service(UNIT)
    assert service.is_running, journal(host, UNIT)
    assert service.is_enabled


def test_unit_starts_sglang_launch_server(host):
    exec_start = host.run(f"systemctl show -p ExecStart --value {UNIT}").stdout
    assert "-m sglang.launch_server" in exec_start, exec_start


def test_completion_round_trip(host):
    wait_ready(host, UNIT, PORT)
    status, body = post_json(
        host, f"http://127.0.0.1:{PORT}/v1/completions",
        {"model": "default", "prompt": "The capital of France is", "max_tokens": 4})
    assert status == 200, f"status {status}: {body}" + journal(host, UNIT)
    choices = body.get("choices") or []
    assert choices and isinstance(choices[0].get("text"), str) and choices[0]["text"], \
        f"no completion text in {body}" + journal(host, UNIT)
