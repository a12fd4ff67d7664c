"""The spin's power level against a real board: tests/traces/real/power_calibration_h100.json
(tests/gpu/power_calibration.py on one H100 SXM, nvidia-smi every second: idle, one warp
polling a flag nobody sets, bf16 matmuls back to back). Every sample of the spin must read
as a spin and every sample of the matmuls as compute, with the board's power.limit and,
for a board that does not report it, from the idle power learned before."""
import json
import os

import pytest

from ansible_collections.sglang_ops.serving.plugins.module_utils.domain.detector_settings import DetectorSettings
from ansible_collections.sglang_ops.serving.plugins.module_utils.domain.gpu_readings import GpuReadings

CALIBRATION = os.path.join(os.path.dirname(__file__), "..", "..", "traces", "real", "power_calibration_h100.json")


@pytest.fixture(scope="module")
def calibration():
    with open(CALIBRATION, encoding="utf-8") as f:
        return json.load(f)


def _gpu(sample, with_limit):
    gpu = {"index": 0, "util_pct": sample["utilization.gpu"], "power_w": sample["power.draw"],
           "mem_used_mib": sample["memory.used"], "mem_total_mib": 81559}
    if with_limit:
        gpu["power_limit_w"] = sample["power.limit"]
    return gpu


def _read_after_idle(calibration, phase, with_limit):
    """The GPU sample of each reading of `phase`, the idle phase read before it as a start's
    first polls would be."""
    readings = GpuReadings(DetectorSettings())
    samples = []
    for name in ("idle", phase):
        for sample in calibration["samples"][name]:
            readings.read([_gpu(sample, with_limit)], sample["t"], [], first=not samples)
            samples.append((name, readings.sample))
    return [sample for name, sample in samples if name == phase]


def test_the_recording_is_an_h100_at_700_w_with_the_three_phases(calibration):
    assert calibration["board"].startswith("NVIDIA H100")
    assert {name: len(samples) for name, samples in calibration["samples"].items()} == {"idle": 15, "spin_flag": 15, "gemm": 15}
    assert {s["power.limit"] for samples in calibration["samples"].values() for s in samples} == {700.0}


@pytest.mark.parametrize("with_limit", [True, False], ids=["power_limit", "no_power_limit"])
def test_a_flag_spin_reads_as_a_spin_and_matmuls_as_compute(calibration, with_limit):
    spin = _read_after_idle(calibration, "spin_flag", with_limit)
    assert spin and all(s.spinning == [0] and s.spin_at_idle_power and not s.spin_power_unknown for s in spin)
    gemm = _read_after_idle(calibration, "gemm", with_limit)
    assert gemm and all(s.spinning == [] and s.between and not s.all_idle for s in gemm)


def test_the_spin_level_sits_between_the_two_with_room_on_each_side(calibration):
    limit_pct = DetectorSettings().gpu_spin_power_max_limit_pct
    spin_max = max(s["power.draw"] for s in calibration["samples"]["spin_flag"]) / 700.0 * 100
    gemm_min = min(s["power.draw"] for s in calibration["samples"]["gemm"]) / 700.0 * 100
    assert spin_max + 10 <= limit_pct <= gemm_min - 10, (spin_max, gemm_min)
