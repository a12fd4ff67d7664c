import dataclasses

import pytest

from ansible_collections.sglang_ops.serving.plugins.module_utils.domain.detector_settings import DetectorSettings


def test_overrides_return_a_changed_copy_and_leave_the_defaults_alone():
    base = DetectorSettings()
    changed = base.with_overrides({"stall_idle_window_s": 300, "spin_min_gpus": 2})
    assert changed.stall_idle_window_s == 300.0 and changed.spin_min_gpus == 2
    assert base.stall_idle_window_s == DetectorSettings().stall_idle_window_s


def test_unknown_keys_are_named_in_the_error():
    with pytest.raises(ValueError, match="stall_idel_window_s"):
        DetectorSettings().with_overrides({"stall_idel_window_s": 300})


@pytest.mark.parametrize("key, value", [
    ("stall_idle_window_s", "ten minutes"),
    ("spin_min_gpus", 1.5),
    ("ready_requires_completion", "maybe"),
    ("kernel_phases", [1, 2]),
    ("stall_spin_window_s", True),
])
def test_wrong_types_are_refused_with_the_key_named(key, value):
    with pytest.raises(ValueError, match=key):
        DetectorSettings().with_overrides({key: value})


def test_strings_from_the_command_line_are_converted():
    s = DetectorSettings().with_overrides({"stall_idle_window_s": "90", "spin_min_gpus": "3",
                                           "ready_requires_completion": "false", "kernel_phases": "cuda_graph,warmup"})
    assert (s.stall_idle_window_s, s.spin_min_gpus, s.ready_requires_completion, s.kernel_phases) == (
        90.0, 3, False, ("cuda_graph", "warmup"))


def test_to_dict_round_trips_through_overrides():
    s = DetectorSettings().with_overrides({"stall_idle_window_s": 123})
    assert DetectorSettings().with_overrides(s.to_dict()) == s


def test_settings_are_frozen():
    with pytest.raises(dataclasses.FrozenInstanceError):
        DetectorSettings().stall_idle_window_s = 1


def test_every_time_or_size_setting_names_its_unit():
    units = ("_s", "_pct", "_mib", "_bytes_per_s", "_gpus", "_polls", "_depth", "_w", "_x", "phases", "completion")
    for f in dataclasses.fields(DetectorSettings):
        assert f.name.endswith(units), f.name


@pytest.mark.parametrize("key, value, words", [
    ("stall_idle_window_s", -30, "stall_idle_window_s must be > 0"),
    ("stall_idle_window_s", 0, "stall_idle_window_s must be > 0"),
    ("stacks_interval_s", "nan", "stacks_interval_s must be a finite number"),
    ("stall_no_progress_s", "inf", "stall_no_progress_s must be a finite number"),
    ("stall_spin_window_s", 10 ** 9, "at most 86400"),
    ("cpu_idle_pct", 150, "cpu_idle_pct must be >= 0 and at most 100"),
    ("idle_util_pct", -1, "idle_util_pct must be >= 0"),
    ("gpu_mem_noise_mib", -64, "gpu_mem_noise_mib must be >= 0"),
    ("io_noise_bytes_per_s", -1, "io_noise_bytes_per_s must be >= 0"),
    ("spin_min_gpus", 0, "spin_min_gpus must be >= 1"),
    ("heartbeat_repeat_polls", 0, "heartbeat_repeat_polls must be >= 1"),
    ("stack_wait_depth", 0, "stack_wait_depth must be >= 1"),
    ("kernel_phases", "cuda_graph,,", None),
])
def test_out_of_range_settings_are_refused_naming_the_setting(key, value, words):
    if words is None:  # empty names are dropped by the comma split, the rest is kept
        assert DetectorSettings().with_overrides({key: value}).kernel_phases == ("cuda_graph",)
        return
    with pytest.raises(ValueError) as err:
        DetectorSettings().with_overrides({key: value})
    assert words in str(err.value)


def test_every_default_is_within_its_range():
    # a field added with a default outside its unit's range fails here, not at run time
    assert DetectorSettings().range_problems() == []


def test_every_numeric_setting_is_range_checked_by_its_unit():
    from ansible_collections.sglang_ops.serving.plugins.module_utils.domain import detector_settings as ds
    for f in dataclasses.fields(DetectorSettings):
        value = getattr(DetectorSettings(), f.name)
        if isinstance(value, (int, float)) and not isinstance(value, bool):
            with pytest.raises(ValueError, match=f.name):
                ds.check_range(f.name, -1)
