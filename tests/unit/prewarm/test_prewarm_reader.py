import os

import pytest

from ansible_collections.sglang_ops.serving.plugins.module_utils.host import page_cache
from ansible_collections.sglang_ops.serving.plugins.module_utils.host import prewarm_reader

MIB = 2**20


@pytest.fixture
def small_segments(monkeypatch):
    monkeypatch.setattr(prewarm_reader, "SEGMENT_BYTES", MIB)


@pytest.fixture
def model_dir(disk_dir, write_file):
    for i in range(3):
        write_file(os.path.join(disk_dir, "model-%05d-of-00003.safetensors" % (i + 1)), 4 * MIB)
    write_file(os.path.join(disk_dir, "config.json"), 100)
    return disk_dir


def test_model_files_are_weight_files_only_sorted(model_dir):
    files = prewarm_reader.model_files([model_dir])
    assert [os.path.basename(f) for f in files] == [
        "model-00001-of-00003.safetensors", "model-00002-of-00003.safetensors",
        "model-00003-of-00003.safetensors"]


def test_hidden_dirs_are_skipped_and_linked_files_read_once(model_dir, write_file):
    os.mkdir(os.path.join(model_dir, ".cache"))
    write_file(os.path.join(model_dir, ".cache", "stale.safetensors"), 10)
    os.symlink(os.path.join(model_dir, "model-00001-of-00003.safetensors"),
               os.path.join(model_dir, "alias.safetensors"))
    assert len(prewarm_reader.model_files([model_dir])) == 3


def test_missing_model_path_is_named_in_the_error(disk_dir):
    with pytest.raises(FileNotFoundError, match="nope"):
        prewarm_reader.model_files([os.path.join(disk_dir, "nope")])


def test_warm_reads_evicted_files_into_the_page_cache(model_dir, small_segments):
    files = prewarm_reader.model_files([model_dir])
    for f in files:
        page_cache.evict_file(f)
    assert page_cache.files_residency(files).fraction < 0.05
    stats = prewarm_reader.warm(files, threads=3, read_block_bytes=256 * 1024)
    # Kernel readahead may make a segment resident just before a thread looks at it.
    assert stats.read_bytes + stats.skipped_bytes == 12 * MIB
    assert stats.read_bytes >= 3 * MIB
    assert stats.segments_left == 0
    assert page_cache.files_residency(files).fraction == 1.0


def test_warm_skips_segments_already_resident(model_dir, small_segments):
    files = prewarm_reader.model_files([model_dir])
    page_cache.evict_file(files[1])
    for f in (files[0], files[2]):
        with open(f, "rb") as fh:
            fh.read()
    stats = prewarm_reader.warm(files, threads=2)
    # Kernel readahead may bring in the next segment of the evicted file as a side
    # effect; the resident files are never read again.
    assert stats.skipped_bytes >= 8 * MIB
    assert 0 < stats.read_bytes <= 4 * MIB
    assert stats.read_bytes + stats.skipped_bytes == 12 * MIB


def test_time_budget_stops_taking_segments_and_a_second_call_finishes(model_dir, small_segments):
    files = prewarm_reader.model_files([model_dir])
    for f in files:
        page_cache.evict_file(f)
    ticks = iter(range(1000))

    def clock():  # every look at the clock is one second later
        return float(next(ticks))

    first = prewarm_reader.warm(files, threads=1, max_duration_s=3, clock=clock)
    assert 0 < first.read_bytes < 12 * MIB
    assert first.segments_left > 0
    second = prewarm_reader.warm(files, threads=1)
    assert second.segments_left == 0
    # The second call does not read again what the first one read.
    assert second.read_bytes + second.skipped_bytes == 12 * MIB
    assert second.skipped_bytes >= first.read_bytes
    assert 0 < second.read_bytes <= 12 * MIB - first.read_bytes
    assert page_cache.files_residency(files).fraction == 1.0


def test_only_the_missing_part_of_a_partly_resident_file_is_read(model_dir):
    files = prewarm_reader.model_files([model_dir])
    for f in files:
        with open(f, "rb") as fh:
            fh.read()
    fd = os.open(files[0], os.O_RDONLY)
    try:  # drop only the second half of the first file (written out first: dirty pages stay)
        os.fdatasync(fd)
        os.posix_fadvise(fd, 2 * MIB, 2 * MIB, os.POSIX_FADV_DONTNEED)
    finally:
        os.close(fd)
    stats = prewarm_reader.warm(files, threads=1)
    assert stats.read_bytes == 2 * MIB
    assert stats.read_bytes + stats.skipped_bytes == 12 * MIB
    assert page_cache.files_residency(files).fraction == 1.0
