"""Real files on a disk-backed file system: tmpfs ignores POSIX_FADV_DONTNEED."""
import os
import shutil
import tempfile

import pytest

from ansible_collections.sglang_ops.serving.plugins.module_utils.host import cache_persistence as cp
from ansible_collections.sglang_ops.serving.plugins.module_utils.host import page_cache

READ_ATTEMPTS = 5


def _fstype(path):
    with open("/proc/self/mountinfo", encoding="utf-8") as fh:
        return cp.mount_of(os.path.realpath(path), cp.parse_mountinfo(fh.read())).fstype


@pytest.fixture
def disk_dir():
    base = "/var/tmp"
    if _fstype(base) in cp.VOLATILE_FSTYPES:
        pytest.skip("/var/tmp is on tmpfs here; page-cache eviction cannot be observed")
    path = tempfile.mkdtemp(prefix="sglang-ops-prewarm-", dir=base)
    yield path
    shutil.rmtree(path, ignore_errors=True)


@pytest.fixture
def write_file():
    def write(path, size_bytes):
        with open(path, "wb") as fh:
            fh.write(os.urandom(size_bytes))
        return path
    return write


@pytest.fixture
def read_resident():
    """Read bytes [offset, offset + length) of a file (the rest of it without a length) and
    return how many of them are in the page cache afterwards. `make test` runs these beside
    six lanes of containers, and under that memory pressure the kernel may evict a page
    between the read and the check: read again, a few times, while part is missing. A
    residency read that never counts what was just read still fails the caller's check."""
    def read(path, offset=0, length=None):
        length = os.path.getsize(path) - offset if length is None else length
        resident = 0
        for _attempt in range(READ_ATTEMPTS):
            with open(path, "rb") as fh:
                fh.seek(offset)
                fh.read(length)
            fd = os.open(path, os.O_RDONLY)
            try:
                resident = page_cache.range_residency(fd, offset, length)
            finally:
                os.close(fd)
            if resident >= length:
                break
        return resident
    return read
