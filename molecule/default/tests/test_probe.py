"""sglang_probe against the running stand-in unit: one observation in check mode."""
import json
import shlex

from sglang_checks import journal, wait_ready

UNIT = "sglang-k26-ddtree"
PORT = 30001
CONFIG_FILE = "/etc/sglang/sglang-k26-ddtree.yaml"


def probe(host, **args):
    # testinfra passes module arguments as one key=value string.
    text = " ".join("%s=%s" % (k, shlex.quote(str(v))) for k, v in args.items())
    return host.ansible("sglang_ops.serving.sglang_probe", text, check=True)


def test_probe_sees_the_ready_unit_its_ranks_gpus_and_a_completion(host):
    wait_ready(host, UNIT, PORT)
    res = probe(host, unit=UNIT, port=PORT, api_key_file=CONFIG_FILE)
    assert res["changed"] is False
    obs = res["observation"]
    assert obs["unit"]["active"] == "active" and obs["unit"]["main_pid"], res
    assert obs["procs"]["count"] >= 2 and obs["procs"]["cpu_s"] > 0, res
    assert obs["http"]["health"] == 200, res["observation"]["http"]
    assert obs["http"]["completion"]["ok"] is True, str(obs["http"]) + journal(host, UNIT)
    assert obs["gpus"] and all(g["mem_total_mib"] > 0 for g in obs["gpus"]), res.get("missing")
    assert {p["pid"] for p in obs["gpu_procs"]} <= set(_unit_pids(host)), obs["gpu_procs"]
    assert any(r["msg"] for r in obs["log"]), res.get("missing")
    assert res["cost"]["cpu_s"] >= 0 and res["cursor"]


def test_probe_never_returns_the_api_key(host):
    text = host.file(CONFIG_FILE).content_string
    key = json.loads(text.split("\napi-key:", 1)[1].split("\n", 1)[0])
    res = probe(host, unit=UNIT, port=PORT, api_key_file=CONFIG_FILE)
    assert key and key not in repr(res)


def test_probe_continues_from_its_cursor(host):
    first = probe(host, unit=UNIT)
    second = probe(host, unit=UNIT, cursor=first["cursor"])
    seen = {(r["ts"], r["msg"]) for r in first["observation"]["log"]}
    assert not seen & {(r["ts"], r["msg"]) for r in second["observation"].get("log", [])}


def _unit_pids(host):
    cg = host.run(f"systemctl show -p ControlGroup --value {UNIT}").stdout.strip()
    out = host.run(f"cat /sys/fs/cgroup/systemd{cg}/cgroup.procs /sys/fs/cgroup{cg}/cgroup.procs 2>/dev/null").stdout
    return [int(x) for x in out.split()]
