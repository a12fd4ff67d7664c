"""Real files on a disk-backed file system: tmpfs ignores POSIX_FADV_DONTNEED."""
import os
import shutil
import tempfile

import pytest

from ansible_collections.sglang_ops.serving.plugins.module_utils.host import cache_persistence as cp


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
