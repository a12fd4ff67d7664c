import pytest

from ansible_collections.sglang_ops.serving.plugins.module_utils.host.prewarm_decision import decide

GIB = 2**30


def test_auto_prewarms_when_missing_part_fits_with_margin():
    d = decide("auto", mem_available_bytes=700 * GIB, model_bytes=548 * GIB,
               resident_bytes=0, margin_bytes=64 * GIB)
    assert d.prewarm and d.code == "fits"
    assert d.missing_bytes == 548 * GIB
    assert d.room_bytes == 636 * GIB
    assert "548.0 GiB" in d.words


def test_auto_skips_when_model_does_not_fit_and_says_how_short():
    d = decide("auto", mem_available_bytes=512 * GIB, model_bytes=548 * GIB,
               resident_bytes=0, margin_bytes=64 * GIB)
    assert not d.prewarm and d.code == "does_not_fit"
    assert "100.0 GiB short" in d.words


def test_margin_decides_the_boundary_case():
    args = dict(mem_available_bytes=600 * GIB, model_bytes=548 * GIB, resident_bytes=0)
    assert decide("auto", margin_bytes=52 * GIB, **args).prewarm
    assert not decide("auto", margin_bytes=53 * GIB, **args).prewarm


def test_resident_pages_count_against_available_memory():
    # MemAvailable includes the resident model pages, so 300 GiB resident out of
    # 600 GiB available leaves 300 GiB for the 248 GiB still on disk.
    d = decide("auto", mem_available_bytes=600 * GIB, model_bytes=548 * GIB,
               resident_bytes=300 * GIB, margin_bytes=16 * GIB)
    assert d.prewarm and d.missing_bytes == 248 * GIB and d.room_bytes == 284 * GIB
    d = decide("auto", mem_available_bytes=500 * GIB, model_bytes=548 * GIB,
               resident_bytes=300 * GIB, margin_bytes=16 * GIB)
    assert not d.prewarm and d.code == "does_not_fit"


def test_off_never_prewarms_even_with_plenty_of_memory():
    d = decide("off", mem_available_bytes=2048 * GIB, model_bytes=548 * GIB,
               resident_bytes=0, margin_bytes=0)
    assert not d.prewarm and d.code == "off"
    assert "mode is off" in d.words


def test_on_reads_even_when_short_and_warns():
    d = decide("on", mem_available_bytes=256 * GIB, model_bytes=548 * GIB,
               resident_bytes=0, margin_bytes=16 * GIB)
    assert d.prewarm and d.code == "forced"
    assert "short" in d.words and "evict" in d.words


def test_on_with_enough_memory_is_a_plain_fit():
    d = decide("on", mem_available_bytes=1024 * GIB, model_bytes=548 * GIB,
               resident_bytes=0, margin_bytes=16 * GIB)
    assert d.prewarm and d.code == "fits"


@pytest.mark.parametrize("mode", ["auto", "on"])
def test_model_already_resident_needs_no_read_in_any_mode(mode):
    d = decide(mode, mem_available_bytes=10 * GIB, model_bytes=548 * GIB,
               resident_bytes=548 * GIB, margin_bytes=16 * GIB)
    assert not d.prewarm and d.code == "already_resident"


def test_a_few_pages_missing_still_counts_as_resident():
    d = decide("auto", mem_available_bytes=1 * GIB, model_bytes=548 * GIB,
               resident_bytes=548 * GIB - 100 * 2**20, margin_bytes=16 * GIB)
    assert d.code == "already_resident"


def test_empty_model_dir_is_not_prewarmed():
    d = decide("auto", mem_available_bytes=100 * GIB, model_bytes=0, resident_bytes=0,
               margin_bytes=0)
    assert not d.prewarm and d.code == "no_files"


def test_unknown_mode_is_rejected_with_the_allowed_values():
    with pytest.raises(ValueError, match="off/auto/on"):
        decide("always", 1, 1, 0, 0)


def test_negative_byte_counts_are_rejected():
    with pytest.raises(ValueError):
        decide("auto", -1, 1, 0, 0)
