"""bench/restart_downtime.py: the disk throttle (the default rate, the device it limits), the ratios and
the check that no restart compiled again."""
import importlib.util
import os
import stat
import subprocess
import types

import pytest

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))


def bench_module():
    spec = importlib.util.spec_from_file_location("restart_downtime", os.path.join(ROOT, "bench", "restart_downtime.py"))
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def bench_for(module, tmp_path, **args):
    defaults = dict(shards=12, shard_mib=256, read_mb_s=None, container="x", verbose=False)
    defaults.update(args)
    bench = module.Bench.__new__(module.Bench)  # no podman needed for these parts
    bench.args = types.SimpleNamespace(**defaults)
    bench.env = dict(os.environ)
    bench.model_dir = str(tmp_path)
    return bench


def test_default_rate_makes_the_cold_read_relate_to_a_warm_start_as_on_the_reference_host(tmp_path):
    module = bench_module()
    bench = bench_for(module, tmp_path)
    cold_read_s = bench.model_bytes() / bench.read_bps()
    assert cold_read_s == pytest.approx(module.COLD_READ_TARGET_S, rel=1e-6)
    # the stand-in's init, JIT and graph capture are the reference's at the same scale
    assert cold_read_s / module.BENCH_PHASES_S["cuda_graph_s"] == pytest.approx(495.0 / 35.0, rel=1e-2)
    assert cold_read_s / module.BENCH_PHASES_S["jit_s"] == pytest.approx(495.0 / 23.0, rel=1e-2)
    assert cold_read_s / module.BENCH_PHASES_S["init_s"] == pytest.approx(495.0 / 17.0, rel=1e-2)
    assert bench_for(module, tmp_path, read_mb_s=1100.0).read_bps() == 1_100_000_000
    assert bench_for(module, tmp_path, read_mb_s=0.0).read_bps() == 0


def test_the_throttled_device_is_the_whole_disk_holding_the_model(tmp_path):
    # The checkout's disk, where the bench keeps its model folder (.cache/bench-restart).
    bench = bench_for(bench_module(), tmp_path)
    bench.model_dir = ROOT
    source = subprocess.run(["findmnt", "-n", "-o", "SOURCE", "-T", ROOT], capture_output=True, text=True).stdout
    if not source.startswith("/dev/"):  # overlay, tmpfs, a network file system: said, not guessed
        with pytest.raises(SystemExit, match="cannot throttle reads: .* not a block device"):
            bench.model_disk()
        return
    disk = bench.model_disk()
    assert stat.S_ISBLK(os.stat(disk).st_mode)
    assert not os.path.exists(os.path.join("/sys/class/block", os.path.basename(disk), "partition"))


def test_a_bad_rate_is_refused_before_anything_starts(capsys):
    with pytest.raises(SystemExit) as err:
        bench_module().main(["--read-mb-s", "nan"])
    assert err.value.code == 2 and "--read-mb-s must be a finite rate >= 0" in capsys.readouterr().err


def test_the_warm_over_cold_ratio_is_judged_against_its_bound():
    bench = bench_module()
    rows = [{"cache": c, "downtime_s": d} for c, d in (("cold", 100.0), ("cold", 120.0), ("prewarmed", 60.0),
                                                      ("warm", 12.0), ("warm", 40.0), ("warm", 14.0))]
    medians, ratios, ok = bench.downtime_ratios(rows)
    assert medians == {"cold": 110.0, "prewarmed": 60.0, "warm": 14.0}
    assert ratios["warm_over_cold"] == 14.0 / 110.0 and ok
    rows.append({"cache": "warm", "downtime_s": 30.0})       # median warm 22 s: above 0.15 of cold
    assert not bench.downtime_ratios(rows)[2]
    assert not bench.downtime_ratios([r for r in rows if r["cache"] != "warm"])[2]   # no warm run: not kept


def test_a_restart_that_compiled_with_the_caches_kept_is_named():
    bench = bench_module()
    rows = [{"run": 1, "cache": "cold", "jit_s": None, "jit_files_before": 3},
            {"run": 2, "cache": "jit_emptied", "jit_s": 4.6, "jit_files_before": 0},
            {"run": 3, "cache": "prewarmed", "jit_s": 4.6, "jit_files_before": 3},
            {"run": 4, "cache": "warm", "jit_s": None, "jit_files_before": 0}]
    assert [r["run"] for r in bench.recompiled(rows)] == [3, 4]


def test_the_phases_of_a_start_come_from_its_run_record():
    bench = bench_module()
    record = {"time_to_ready": {"phases": [{"phase": "starting", "started_s": 0, "duration_s": 3.5},
                                           {"phase": "weight_load", "started_s": 3.5, "duration_s": 99.2},
                                           {"phase": "cuda_graph", "started_s": 102.7, "duration_s": 7.1}]}}
    assert bench.start_phases(record) == {"starting": 3.5, "weight_load": 99.2, "cuda_graph": 7.1}
    assert bench.start_phases({}) == {}
