"""Read model files into the page cache: parallel, large sequential reads, resumable.

The files are cut into segments; worker threads take segments in file order and read
the parts of each that mincore says are not resident, with large preads into a reused
buffer. Resident parts are skipped, so a second call (after a time budget ran out, or a call
per progress step from a controller loop) continues where the last one stopped instead
of copying what is already in memory.
"""
import fnmatch
import os
import queue
import threading
import time
from dataclasses import dataclass

from ansible_collections.sglang_ops.serving.plugins.module_utils.host import page_cache

SEGMENT_BYTES = 64 << 20

# Weight files; configs and tokenizers are tiny and read at start anyway.
DEFAULT_INCLUDE = ("*.safetensors", "*.bin", "*.pt", "*.pth", "*.gguf")


@dataclass(frozen=True)
class ReadStats:
    read_bytes: int          # bytes actually read from the files
    skipped_bytes: int       # bytes found already resident and not read
    read_s: float
    segments_left: int       # segments not read because the time budget ran out

    @property
    def read_bytes_per_s(self) -> float:
        return self.read_bytes / self.read_s if self.read_s > 0 else 0.0


def model_files(roots, include=DEFAULT_INCLUDE):
    """Regular files under the roots (files or directories) whose names match a pattern,
    sorted; hidden files and directories (.cache, .git) are skipped."""
    found = set()
    for root in roots:
        if os.path.isfile(root):
            found.add(os.path.realpath(root))
            continue
        if not os.path.isdir(root):
            raise FileNotFoundError("model path %s does not exist" % root)
        for dirpath, dirnames, filenames in os.walk(root, followlinks=True):
            dirnames[:] = [d for d in dirnames if not d.startswith(".")]
            for name in filenames:
                if name.startswith(".") or not any(fnmatch.fnmatch(name, p) for p in include):
                    continue
                path = os.path.join(dirpath, name)
                # Hugging Face snapshots link files into blobs/: read each blob once.
                if os.path.isfile(path):
                    found.add(os.path.realpath(path))
    return sorted(found)


def _segments(paths):
    for path in paths:
        size = os.stat(path).st_size
        for offset in range(0, size, SEGMENT_BYTES):
            yield path, offset, min(SEGMENT_BYTES, size - offset)


def warm(paths, threads=8, read_block_bytes=16 << 20, max_duration_s=0.0, clock=time.monotonic):
    """Read the files' non-resident segments; after max_duration_s (0: no limit) start
    no new read. Returns ReadStats."""
    warming = _Warming(paths, read_block_bytes, max_duration_s, clock)
    warming.run(threads)
    totals = warming.totals
    return ReadStats(totals["read"], totals["skipped"], clock() - warming.start,
                     warming.work.qsize() + totals["held"])


class _Warming:
    """One call of warm(): the segments left to read, one descriptor per file, the time
    budget, and what the worker threads that share them read, skipped and held back."""

    def __init__(self, paths, read_block_bytes, max_duration_s, clock):
        self.work = queue.Queue()
        for segment in _segments(paths):
            self.work.put(segment)
        self.read_block_bytes, self.clock = read_block_bytes, clock
        self.start = clock()
        self.deadline = self.start + max_duration_s if max_duration_s > 0 else None
        self.lock = threading.Lock()
        self.totals = {"read": 0, "skipped": 0, "held": 0}
        self.errors = []
        self.fds = {}

    def run(self, threads):
        """The workers until every segment is read, skipped or held back by the budget;
        every file closed; the first error raised."""
        pool = [threading.Thread(target=self._worker, daemon=True) for dummy in range(max(1, threads))]
        try:
            for t in pool:
                t.start()
            for t in pool:
                t.join()
        finally:
            for fd in self.fds.values():
                os.close(fd)
        if self.errors:
            raise self.errors[0]

    def _fd_for(self, path):
        with self.lock:
            if path not in self.fds:
                self.fds[path] = os.open(path, os.O_RDONLY | os.O_CLOEXEC)
            return self.fds[path]

    def _worker(self):
        view = memoryview(bytearray(self.read_block_bytes))
        read = skipped = held = 0
        first_read = True
        try:
            while True:
                try:
                    path, offset, length = self.work.get_nowait()
                except queue.Empty:
                    break
                fd = self._fd_for(path)
                runs = page_cache.missing_runs(fd, offset, length)
                if not runs:
                    skipped += length
                    continue
                # The deadline applies to reads only, and each worker reads at least one
                # segment, so a call always makes progress however short its budget.
                if not first_read and self.deadline is not None and self.clock() >= self.deadline:
                    held = 1
                    break
                first_read = False
                skipped += length - sum(n for dummy_pos, n in runs)
                read += self._read_runs(fd, runs, view)
        except OSError as exc:
            self.errors.append(exc)
        with self.lock:
            self.totals["read"] += read
            self.totals["skipped"] += skipped
            self.totals["held"] += held

    def _read_runs(self, fd, runs, view):
        """Read the runs ((offset, length) of fd) with large preads into view; the bytes read."""
        read = 0
        for pos, n_left in runs:
            while n_left > 0:
                n = os.preadv(fd, [view[:min(self.read_block_bytes, n_left)]], pos)
                if n <= 0:
                    break  # the file shrank under us; nothing more to read here
                pos += n
                n_left -= n
                read += n
        return read


def model_residency(roots, include=DEFAULT_INCLUDE):
    """(Residency of the model's weight files, trusted): one mincore pass, no read of
    the files' contents (about a second for a 548 GB model). trusted is False when the
    kernel would under-report residency to this user (page_cache.residency_is_trusted)."""
    paths = model_files(roots, include)
    if not paths:
        raise FileNotFoundError("no weight files (%s) under %s" % (", ".join(include), ", ".join(roots)))
    return page_cache.files_residency(paths), all(page_cache.residency_is_trusted(p) for p in paths)
