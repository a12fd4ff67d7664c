import dataclasses

import pytest

from ansible_collections.sglang_ops.serving.plugins.module_utils.detector_settings import DetectorSettings


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
    units = ("_s", "_pct", "_mib", "_bytes_per_s", "_gpus", "_polls", "_depth", "phases", "completion")
    for f in dataclasses.fields(DetectorSettings):
        assert f.name.endswith(units), f.name
