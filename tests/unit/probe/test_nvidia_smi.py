"""nvidia-smi parsing on output captured from a real H200 (driver 580.159.04), and the
reader's behaviour when the binary is missing, hangs or fails."""
import os
import time

from ansible_collections.sglang_ops.serving.plugins.module_utils.host import nvidia_smi
from ansible_collections.sglang_ops.serving.tests.unit.probe.conftest import data

UUID = "GPU-31290649-1bbd-1ac6-ac19-a15346139cee"
GPU_QUERY_FIELDS = nvidia_smi.GPU_QUERY[0].split("=", 1)[1].split(",")


def test_idle_h200_reports_zero_mib_used_and_fractional_power():
    gpus = nvidia_smi.parse_gpu_query(data("nvidia-smi-query-gpu-idle.txt"))
    assert [(g.index, g.uuid, g.mem_used_mib, g.mem_total_mib, g.util_pct) for g in gpus] == [
        (0, UUID, 0, 143771, 0)]
    assert gpus[0].power_w == 83.58


def test_loaded_h200_memory_and_compute_app_map_to_gpu_index():
    gpus = nvidia_smi.parse_gpu_query(data("nvidia-smi-query-gpu-loaded.txt"))
    apps = nvidia_smi.parse_apps_query(data("nvidia-smi-query-apps-loaded.txt"), gpus)
    assert gpus[0].mem_used_mib == 17295
    assert [a.to_obs() for a in apps] == [{"pid": 906, "gpu": 0, "mem_mib": 17286}]


def test_no_compute_apps_is_an_empty_list_not_an_error():
    # The real driver prints nothing at all (the table says "No running processes found").
    gpus = nvidia_smi.parse_gpu_query(data("nvidia-smi-query-gpu-idle.txt"))
    assert data("nvidia-smi-query-apps-idle.txt").strip() == ""
    assert nvidia_smi.parse_apps_query(data("nvidia-smi-query-apps-idle.txt"), gpus) == []
    assert nvidia_smi.parse_apps_query("No running processes found\n", gpus) == []


def test_utilisation_lingers_after_the_last_process_exits():
    # Captured seconds after the loader was killed: no memory, yet 23 % utilisation.
    g = nvidia_smi.parse_gpu_query(data("nvidia-smi-query-gpu-after.txt"))[0]
    assert (g.mem_used_mib, g.util_pct) == (0, 23)


def test_not_available_values_become_none_and_power_is_left_out():
    text = "0, GPU-a, 1024, 97887, [N/A], [N/A]\n1, GPU-b, [Not Supported], 97887, 3, [Unknown Error]\n"
    gpus = nvidia_smi.parse_gpu_query(text)
    assert [(g.mem_used_mib, g.util_pct, g.power_w) for g in gpus] == [(1024, None, None), (None, 3, None)]
    assert "power_w" not in gpus[0].to_obs()
    apps = nvidia_smi.parse_apps_query("77, GPU-b, [N/A]\n78, GPU-zzz, 512\n", gpus)
    assert [a.to_obs() for a in apps] == [{"pid": 77, "gpu": 1, "mem_mib": None},
                                          {"pid": 78, "gpu": None, "mem_mib": 512}]


def test_power_limit_is_read_beside_the_draw_and_older_rows_stay_valid():
    # Seven columns as GPU_QUERY asks now (an H100's 700 W limit); six as recorded before
    # power.limit was asked, and [N/A] where a board does not report it.
    assert GPU_QUERY_FIELDS[-2:] == ["power.draw", "power.limit"]
    text = ("0, GPU-a, 523, 81559, 100, 122.41, 700.00\n"
            "1, GPU-b, 0, 81559, 0, 69.80\n"
            "2, GPU-c, 0, 81559, 0, [N/A], [N/A]\n")
    gpus = nvidia_smi.parse_gpu_query(text)
    assert [(g.power_w, g.power_limit_w) for g in gpus] == [(122.41, 700), (69.8, None), (None, None)]
    assert gpus[0].to_obs() == {"index": 0, "mem_used_mib": 523, "mem_total_mib": 81559, "util_pct": 100,
                                "power_w": 122.41, "power_limit_w": 700}
    assert "power_limit_w" not in gpus[1].to_obs() and "power_w" in gpus[1].to_obs()
    assert "power_limit_w" not in gpus[2].to_obs()


def test_missing_binary_gives_absent_fields_with_reason(monkeypatch, tmp_path):
    monkeypatch.setenv("PATH", str(tmp_path))
    monkeypatch.setattr(nvidia_smi, "EXTRA_DIRS", ())
    snap = nvidia_smi.read_gpus(timeout_s=1.0)
    assert snap.gpus is None and snap.gpu_procs is None
    assert "not found" in snap.missing["gpus"] and "not found" in snap.missing["gpu_procs"]


def test_hanging_binary_is_cut_off_at_the_timeout(monkeypatch, script_dir):
    # The shell's child `sleep` keeps the pipes open: the whole group must be killed.
    fake = script_dir("nvidia-smi", "/bin/sleep 30\n")
    monkeypatch.setenv("PATH", os.path.dirname(fake))
    t0 = time.monotonic()
    snap = nvidia_smi.read_gpus(timeout_s=0.5)
    assert time.monotonic() - t0 < 10
    assert snap.gpus is None
    assert "timed out" in snap.missing["gpus"]
    assert snap.missing["gpu_procs"].startswith("skipped")


def test_driver_error_is_reported_with_its_message(script_dir):
    fake = script_dir("nvidia-smi", """\
        echo "NVIDIA-SMI has failed because it couldn't communicate with the NVIDIA driver."
        exit 9
        """)
    snap = nvidia_smi.read_gpus(timeout_s=2.0, binary=fake)
    assert "exited 9" in snap.missing["gpus"] and "couldn't communicate" in snap.missing["gpus"]


def test_real_output_through_the_reader(script_dir):
    gpu = data("nvidia-smi-query-gpu-loaded.txt")
    apps = data("nvidia-smi-query-apps-loaded.txt")
    fake = script_dir("nvidia-smi", """\
        case "$1" in
          --query-gpu=*) printf '%s' '""" + gpu + """' ;;
          --query-compute-apps=*) printf '%s' '""" + apps + """' ;;
        esac
        """)
    snap = nvidia_smi.read_gpus(timeout_s=2.0, binary=fake)
    assert not snap.missing
    assert snap.gpus[0].to_obs()["mem_used_mib"] == 17295
    assert snap.gpu_procs[0].pid == 906
