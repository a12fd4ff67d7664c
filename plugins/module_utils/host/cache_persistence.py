"""Whether the JIT and kernel cache directories survive a restart, and their sizes.

A cache that is missing, on tmpfs or not writable by the service user makes every
restart pay the JIT again (Triton, Inductor, CUDA, FlashInfer, TileLang, DeepGEMM:
minutes to half an hour). Pure logic plus a /proc/self/mountinfo parser; the module
gathers the facts.
"""
import os
from dataclasses import dataclass, field

# Gone at reboot: a cache here is rebuilt on the first start after every boot.
VOLATILE_FSTYPES = frozenset({"tmpfs", "ramfs", "devtmpfs"})
# Survive a service restart but not a re-created container.
CONTAINER_FSTYPES = frozenset({"overlay", "aufs", "fuse-overlayfs"})


@dataclass(frozen=True)
class Mount:
    mount_point: str
    fstype: str


@dataclass(frozen=True)
class CacheDirFacts:
    name: str                 # e.g. SGLANG_CACHE_DIR
    path: str
    exists: bool
    is_dir: bool = False
    owner: str = ""           # user name (or uid when it has no name)
    owner_can_write: bool = False
    mount: Mount = Mount("", "")  # of the directory, or of its nearest existing parent
    size_bytes: int = 0
    files: int = 0


@dataclass(frozen=True)
class CacheDirVerdict:
    name: str
    path: str
    ok: bool
    problems: list = field(default_factory=list)
    notes: list = field(default_factory=list)

    def to_dict(self) -> dict:
        return {"name": self.name, "path": self.path, "ok": self.ok,
                "problems": list(self.problems), "notes": list(self.notes)}


def _unescape(field_text: str) -> str:
    # mountinfo writes space, tab, newline and backslash as octal escapes.
    for esc, char in (("\\040", " "), ("\\011", "\t"), ("\\012", "\n"), ("\\134", "\\")):
        field_text = field_text.replace(esc, char)
    return field_text


def parse_mountinfo(text: str) -> list:
    """Mounts in the order the kernel lists them (a later one hides an earlier one)."""
    mounts = []
    for line in text.splitlines():
        parts = line.split()
        if "-" not in parts or len(parts) < 5:
            continue
        sep = parts.index("-")
        if sep + 1 >= len(parts):
            continue
        mounts.append(Mount(_unescape(parts[4]), parts[sep + 1]))
    return mounts


def mount_of(path: str, mounts: list) -> Mount:
    """The mount an absolute, resolved path lives on: longest matching mount point,
    the last listed one when several share it."""
    best, best_len = Mount("", ""), -1
    for m in mounts:
        mp = m.mount_point.rstrip("/") or "/"
        if mp == "/" or path == mp or path.startswith(mp + "/"):
            length = 0 if mp == "/" else len(mp)
            if length >= best_len:
                best, best_len = m, length
    return best


def judge(facts: CacheDirFacts, service_user: str) -> CacheDirVerdict:
    problems, notes = [], []
    fstype = facts.mount.fstype
    if not facts.exists:
        problems.append("%s does not exist; the service would create it (or fail) on first use "
                        "and compile everything again" % facts.path)
    elif not facts.is_dir:
        problems.append("%s is not a directory" % facts.path)
    else:
        if facts.owner != service_user:
            problems.append("%s is owned by %s, not by the service user %s; the server cannot "
                            "write its cache there" % (facts.path, facts.owner, service_user))
        elif not facts.owner_can_write:
            problems.append("%s is not writable by its owner %s" % (facts.path, service_user))
    if fstype in VOLATILE_FSTYPES:
        problems.append("%s is on %s (%s): the cache is lost at every reboot"
                        % (facts.path, fstype, facts.mount.mount_point))
    elif fstype in CONTAINER_FSTYPES:
        notes.append("%s is on %s: it survives restarts of the service, not a re-created "
                     "container; mount a volume there for that" % (facts.path, fstype))
    if facts.exists and facts.is_dir:
        notes.append("%s: %d files, %.1f MiB" % (facts.name, facts.files, facts.size_bytes / 2**20))
    return CacheDirVerdict(facts.name, facts.path, not problems, problems, notes)


def tree_size(path: str):
    """(bytes, files) of the regular files under path; symlinks are not followed."""
    total = files = 0
    for dirpath, _dirnames, filenames in os.walk(path):
        for name in filenames:
            try:
                st = os.lstat(os.path.join(dirpath, name))
            except OSError:
                continue  # removed while walking (a JIT writing its cache)
            if not os.path.islink(os.path.join(dirpath, name)):
                total += st.st_size
                files += 1
    return total, files
