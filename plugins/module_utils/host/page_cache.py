"""How much of a file is in the page cache, and dropping it from there.

Residency comes from mincore(2) on a read-only shared mapping of the file (the same
answer `fincore` gives); eviction is posix_fadvise(POSIX_FADV_DONTNEED). Both need only
read access to the file. Two kernel rules matter:

- Since Linux 5.0, mincore reports page-cache state of a file mapping only to a caller
  that owns the file or may write it (root does); for anyone else it reports only the
  pages the caller itself has mapped, so residency reads low. `residency_is_trusted`
  says which case applies.
- DONTNEED drops only clean pages that nobody has mapped: dirty pages are written out
  first (fdatasync) and pages mapped by a running server stay. tmpfs ignores it.
"""
import ctypes
import ctypes.util
import mmap
import os
import re
from dataclasses import dataclass

PAGE_BYTES = mmap.PAGESIZE
# Map and query at most this much at a time, so the mincore vector stays small
# (256 KiB per GiB) even for shards of tens of GB.
WINDOW_BYTES = 1 << 30

_PROT_READ = 0x1
_MAP_SHARED = 0x01
_MAP_FAILED = ctypes.c_void_p(-1).value
_LOW_BIT = bytes(b & 1 for b in range(256))

_libc = ctypes.CDLL(ctypes.util.find_library("c") or "libc.so.6", use_errno=True)
_libc.mmap.restype = ctypes.c_void_p
_libc.mmap.argtypes = [ctypes.c_void_p, ctypes.c_size_t, ctypes.c_int, ctypes.c_int,
                       ctypes.c_int, ctypes.c_long]
_libc.munmap.restype = ctypes.c_int
_libc.munmap.argtypes = [ctypes.c_void_p, ctypes.c_size_t]
_libc.mincore.restype = ctypes.c_int
_libc.mincore.argtypes = [ctypes.c_void_p, ctypes.c_size_t, ctypes.POINTER(ctypes.c_ubyte)]


@dataclass(frozen=True)
class Residency:
    """Page-cache residency of one file (or a sum over files)."""
    size_bytes: int
    resident_bytes: int

    @property
    def fraction(self) -> float:
        return self.resident_bytes / self.size_bytes if self.size_bytes else 1.0

    def __add__(self, other: "Residency") -> "Residency":
        return Residency(self.size_bytes + other.size_bytes,
                         self.resident_bytes + other.resident_bytes)


def _pages(length_bytes: int) -> int:
    return (length_bytes + PAGE_BYTES - 1) // PAGE_BYTES


def _page_map(fd: int, offset: int, length: int) -> bytes:
    """One byte per page of [offset, offset+length) of the open file: 1 resident, 0 not.
    offset page-aligned, length at most WINDOW_BYTES."""
    addr = _libc.mmap(None, length, _PROT_READ, _MAP_SHARED, fd, offset)
    if addr in (None, _MAP_FAILED):
        err = ctypes.get_errno()
        raise OSError(err, "mmap: " + os.strerror(err))
    try:
        vec = (ctypes.c_ubyte * _pages(length))()
        if _libc.mincore(addr, length, vec) != 0:
            err = ctypes.get_errno()
            raise OSError(err, "mincore: " + os.strerror(err))
        # Only bit 0 has a meaning; the others are reserved.
        return bytes(vec).translate(_LOW_BIT)
    finally:
        _libc.munmap(addr, length)


def _resident_in_window(fd: int, offset: int, length: int) -> int:
    pages = _page_map(fd, offset, length)
    resident = pages.count(1) * PAGE_BYTES
    # The last page of the range counts only up to the end of the range.
    tail = (offset + length) % PAGE_BYTES
    if tail and pages[-1]:
        resident -= PAGE_BYTES - tail
    return resident


def _windows(offset: int, length: int):
    if offset % PAGE_BYTES:
        raise ValueError("offset %d is not page-aligned" % offset)
    end = offset + length
    while offset < end:
        step = min(WINDOW_BYTES, end - offset)
        yield offset, step
        offset += step


def range_residency(fd: int, offset: int, length: int) -> int:
    """Resident bytes in a byte range of an open file (offset must be page-aligned)."""
    return sum(_resident_in_window(fd, o, n) for o, n in _windows(offset, length))


def missing_runs(fd: int, offset: int, length: int, merge_gap_bytes: int = 1 << 20):
    """Byte ranges [(start, length)] of [offset, offset+length) not in the page cache.
    Runs closer than merge_gap_bytes are merged, so reads stay large and sequential."""
    runs = []
    for win_offset, win_length in _windows(offset, length):
        pages = _page_map(fd, win_offset, win_length)
        for m in re.finditer(b"\x00+", pages):
            start = win_offset + m.start() * PAGE_BYTES
            stop = min(win_offset + m.end() * PAGE_BYTES, offset + length)
            if runs and start - (runs[-1][0] + runs[-1][1]) < merge_gap_bytes:
                runs[-1] = (runs[-1][0], stop - runs[-1][0])
            else:
                runs.append((start, stop - start))
    return runs


def file_residency(path: str) -> Residency:
    """Page-cache residency of a whole regular file."""
    fd = os.open(path, os.O_RDONLY | os.O_CLOEXEC)
    try:
        size = os.fstat(fd).st_size
        if size == 0:
            return Residency(0, 0)
        return Residency(size, range_residency(fd, 0, size))
    finally:
        os.close(fd)


def files_residency(paths) -> Residency:
    total = Residency(0, 0)
    for path in paths:
        total = total + file_residency(path)
    return total


def residency_is_trusted(path: str) -> bool:
    """True when mincore will report the page cache for this file (see module doc)."""
    return os.geteuid() == 0 or os.stat(path).st_uid == os.geteuid() or os.access(path, os.W_OK)


def evict_file(path: str) -> None:
    """Ask the kernel to drop the file's clean, unmapped pages from the page cache."""
    fd = os.open(path, os.O_RDONLY | os.O_CLOEXEC)
    try:
        # Dirty pages survive DONTNEED; write them out first (allowed on a read-only fd).
        os.fdatasync(fd)
        os.posix_fadvise(fd, 0, 0, os.POSIX_FADV_DONTNEED)
    finally:
        os.close(fd)


def read_mem_available_bytes(meminfo_text: str) -> int:
    """MemAvailable from the text of /proc/meminfo, in bytes."""
    for line in meminfo_text.splitlines():
        if line.startswith("MemAvailable:"):
            value, unit = line.split()[1:3]
            if unit != "kB":
                raise ValueError("unexpected unit in /proc/meminfo: %r" % line)
            return int(value) * 1024
    raise ValueError("no MemAvailable line in /proc/meminfo")
