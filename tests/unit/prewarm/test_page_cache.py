import os

import pytest

from ansible_collections.sglang_ops.serving.plugins.module_utils.host import page_cache

MIB = 2**20


def test_fresh_file_is_resident_and_eviction_drops_it(disk_dir, write_file):
    path = write_file(os.path.join(disk_dir, "a.safetensors"), 8 * MIB)
    assert page_cache.file_residency(path).fraction == 1.0
    page_cache.evict_file(path)
    assert page_cache.file_residency(path).resident_bytes <= 0.01 * 8 * MIB


def test_reading_part_of_an_evicted_file_makes_that_part_resident(disk_dir, write_file, read_resident):
    path = write_file(os.path.join(disk_dir, "a.safetensors"), 16 * MIB)
    page_cache.evict_file(path)
    assert read_resident(path, 0, 4 * MIB) == 4 * MIB
    partial = page_cache.file_residency(path)
    assert 0 < partial.resident_bytes < 16 * MIB
    assert read_resident(path) == 16 * MIB


def test_size_that_is_not_a_page_multiple_counts_only_file_bytes(disk_dir, write_file):
    path = write_file(os.path.join(disk_dir, "odd.bin"), 3 * page_cache.PAGE_BYTES + 17)
    with open(path, "rb") as fh:
        fh.read()
    r = page_cache.file_residency(path)
    assert r.size_bytes == r.resident_bytes == 3 * page_cache.PAGE_BYTES + 17


def test_empty_file_counts_as_fully_resident(disk_dir, write_file):
    path = write_file(os.path.join(disk_dir, "empty.bin"), 0)
    r = page_cache.file_residency(path)
    assert (r.size_bytes, r.resident_bytes, r.fraction) == (0, 0, 1.0)


def test_residency_sums_over_files(disk_dir, write_file):
    a = write_file(os.path.join(disk_dir, "a.bin"), 2 * MIB)
    b = write_file(os.path.join(disk_dir, "b.bin"), 2 * MIB)
    page_cache.evict_file(b)
    total = page_cache.files_residency([a, b])
    assert total.size_bytes == 4 * MIB
    assert total.fraction == pytest.approx(0.5, abs=0.01)


def test_unaligned_range_is_rejected(disk_dir, write_file):
    path = write_file(os.path.join(disk_dir, "a.bin"), MIB)
    fd = os.open(path, os.O_RDONLY)
    try:
        with pytest.raises(ValueError, match="page-aligned"):
            page_cache.range_residency(fd, 1, 100)
    finally:
        os.close(fd)


def test_mem_available_is_read_in_bytes():
    text = "MemTotal:       24684092 kB\nMemFree:  1 kB\nMemAvailable:   24218000 kB\n"
    assert page_cache.read_mem_available_bytes(text) == 24218000 * 1024


def test_meminfo_without_mem_available_is_an_error():
    with pytest.raises(ValueError, match="MemAvailable"):
        page_cache.read_mem_available_bytes("MemTotal: 1 kB\n")


def test_missing_runs_name_the_parts_not_in_the_page_cache(disk_dir, write_file):
    path = write_file(os.path.join(disk_dir, "a.safetensors"), 16 * MIB)
    page_cache.evict_file(path)
    with open(path, "rb") as fh:
        fh.seek(4 * MIB)
        fh.read(4 * MIB)
    fd = os.open(path, os.O_RDONLY)
    try:
        runs = page_cache.missing_runs(fd, 0, 16 * MIB, merge_gap_bytes=0)
        # Readahead may extend the part read, only forward.
        assert runs[0] == (0, 4 * MIB)
        assert len(runs) == 2
        tail_start, tail_len = runs[1]
        assert tail_start >= 8 * MIB and tail_start + tail_len == 16 * MIB
        merged = page_cache.missing_runs(fd, 0, 16 * MIB, merge_gap_bytes=32 * MIB)
        assert merged == [(0, 16 * MIB)]
    finally:
        os.close(fd)


def test_a_resident_file_has_no_missing_runs(disk_dir, write_file):
    path = write_file(os.path.join(disk_dir, "a.safetensors"), 2 * MIB + 5)
    fd = os.open(path, os.O_RDONLY)
    try:
        assert page_cache.missing_runs(fd, 0, 2 * MIB + 5) == []
        page_cache.evict_file(path)
        assert page_cache.missing_runs(fd, 0, 2 * MIB + 5) == [(0, 2 * MIB + 5)]
    finally:
        os.close(fd)
