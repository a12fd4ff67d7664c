"""Reads, listings and removals under folders the service user can write (the per-start
folders, the state and runtime folders), done so that nothing planted there is followed.

Root (the probe) and the service user (the supervisor) both read these folders. The
service user could put a symbolic link, a hard link, a FIFO or a device where a file is
expected, or a link where a start's folder is expected; none of them is read, copied or
removed through:

  - every open is relative to an open folder (dir_fd) and uses O_NOFOLLOW, and what was
    opened is checked with fstat: a regular file (or a folder), and in a folder the
    service user writes (Folder.open(owned_alike=True)) one owned by that folder's owner
    and, for a file, with one name (a hard link to a file elsewhere has two);
  - what is refused is an UnsafeEntry (an OSError) whose message names the path and why;
  - a read takes at most max_bytes: over it the file is refused (or, with tail=True, only
    its last max_bytes are read);
  - a tree is removed by walking it through folder descriptors: a link in it is unlinked
    (the link, never what it points at), a folder is entered only by O_NOFOLLOW.

Writes go the same way (the supervisor's records, the metrics file): the folder written in
is opened as above and must be owned by this user or root and not writable by everyone
(Folder.open_writable); a folder is made by mkdir, never exist_ok (one already there is
taken only when it is ours and private: Folder.make_folder); a file is created with
O_CREAT|O_EXCL|O_NOFOLLOW relative to the folder (Folder.create), or replaced whole by a
temporary file from mkstemp in that very folder renamed over it (Folder.replace_with):
what was planted at the name is replaced, never opened or written through.

Standard library only: this runs on the host.
"""
import contextlib
import errno
import json
import os
import stat
import tempfile

_DIR_FLAGS = os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW | os.O_CLOEXEC
# O_NONBLOCK: a FIFO swapped in after the check must not hang the open; O_NOCTTY: a tty never
# becomes the reader's terminal.
_FILE_FLAGS = os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK | os.O_NOCTTY | os.O_CLOEXEC
_CREATE_FLAGS = os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW | os.O_NOCTTY | os.O_CLOEXEC


class UnsafeEntry(OSError):
    """A path that is not what it must be (a link, a FIFO, a device, another owner, too
    large); str() names the path and why."""

    def __init__(self, path, why):
        super().__init__(errno.EPERM, why, path)
        self.path, self.why = path, why

    def __str__(self):
        return "refused %s: %s" % (self.path, self.why)


def _kind(mode):
    if stat.S_ISLNK(mode):
        return "a symbolic link"
    if stat.S_ISFIFO(mode):
        return "a FIFO"
    if stat.S_ISCHR(mode) or stat.S_ISBLK(mode):
        return "a device"
    if stat.S_ISSOCK(mode):
        return "a socket"
    if stat.S_ISDIR(mode):
        return "a folder"
    return "a regular file" if stat.S_ISREG(mode) else "not a regular file"


def describe(mode):
    """What an lstat st_mode is, in words: "a FIFO", "a symbolic link", "a regular file", ..."""
    return _kind(mode)


def _check(st, path, want_dir, owner):
    if want_dir and not stat.S_ISDIR(st.st_mode):
        raise UnsafeEntry(path, "%s where a folder is expected" % _kind(st.st_mode))
    if not want_dir and not stat.S_ISREG(st.st_mode):
        raise UnsafeEntry(path, "%s where a regular file is expected" % _kind(st.st_mode))
    if owner is None:
        return
    if st.st_uid != owner:
        raise UnsafeEntry(path, "owned by uid %d, expected uid %d" % (st.st_uid, owner))
    # The writers of these folders replace each file by a rename, so every file has one
    # name; a second one is a hard link planted to a file elsewhere.
    if not want_dir and st.st_nlink != 1:
        raise UnsafeEntry(path, "a hard link (%d names) where a file of its own is expected" % st.st_nlink)


def _open(name, dir_fd, path, want_dir, owner):
    """An fd of name (relative to dir_fd, or a path when dir_fd is None), checked."""
    try:
        st = os.stat(name, dir_fd=dir_fd, follow_symlinks=False)
    except OSError as e:
        raise OSError(e.errno, e.strerror, path) from None
    _check(st, path, want_dir, owner)   # before the open: opening a device can act on it
    try:
        fd = os.open(name, _DIR_FLAGS if want_dir else _FILE_FLAGS, dir_fd=dir_fd)
    except OSError as e:
        if e.errno == errno.ELOOP:
            raise UnsafeEntry(path, "a symbolic link where %s is expected"
                              % ("a folder" if want_dir else "a regular file")) from None
        raise OSError(e.errno, e.strerror, path) from None
    try:
        opened = os.fstat(fd)
        if (opened.st_dev, opened.st_ino) != (st.st_dev, st.st_ino):
            raise UnsafeEntry(path, "replaced while it was opened")
        _check(opened, path, want_dir, owner)
    except BaseException:
        os.close(fd)
        raise
    return fd


def _check_writable(st, path, private):
    """A folder this user writes in: its own or root's (root writes in any), and not writable
    by everyone (private: by nobody else, neither group nor others)."""
    if os.geteuid() != 0 and st.st_uid not in (os.geteuid(), 0):
        raise UnsafeEntry(path, "owned by uid %d, neither this user (uid %d) nor root" % (st.st_uid, os.geteuid()))
    loose = stat.S_IMODE(st.st_mode) & (0o022 if private else 0o002)
    if loose:
        raise UnsafeEntry(path, "mode %04o: writable by %s" % (
            stat.S_IMODE(st.st_mode), "everyone" if loose & 0o002 else "its group"))


class Folder:
    """An open folder, entered without following links; its owner is the owner expected of
    everything in it. Use as a context manager, or close()."""

    def __init__(self, fd, path, owner):
        self.fd, self.path, self.owner = fd, path, owner

    @classmethod
    def open(cls, path, owner=None, owned_alike=True):
        """The folder at path (its last component not a link); owner: the uid it must have,
        None for whoever owns it. owned_alike: what is below it must have its owner (a
        folder the service user writes), else any owner."""
        fd = _open(path, None, path, True, owner)
        return cls(fd, path, os.fstat(fd).st_uid if owned_alike else None)

    @classmethod
    def open_writable(cls, path):
        """The folder at path to write in (see the module): not a link, owned by this user or
        root, not writable by everyone; what is below it must have its owner."""
        folder = cls.open(path)
        try:
            _check_writable(os.fstat(folder.fd), path, private=False)
        except BaseException:
            folder.close()
            raise
        return folder

    def _path(self, name):
        return os.path.join(self.path, name)   # an absolute name (no folder fd) stays itself

    def folder(self, name):
        """The folder name in this one, checked the same way."""
        fd = _open(name, self.fd, self._path(name), True, self.owner)
        return Folder(fd, self._path(name), self.owner)

    def walk(self, rel):
        """(the folder holding the last component of rel, that name): each folder on the way
        entered as folder() enters it; ValueError for an absolute rel or one with "..". The
        folder returned is a new one, to close."""
        parts = [p for p in rel.split("/") if p not in ("", ".")]
        if rel.startswith("/") or ".." in parts or not parts:
            raise ValueError("%s is not a path inside %s" % (rel, self.path))
        where = Folder(os.dup(self.fd), self.path, self.owner)
        for part in parts[:-1]:
            with where:
                where = where.folder(part)
        return where, parts[-1]

    def entries(self):
        """[(name, kind)] of this folder, sorted: kind "dir", "file", "link" or "other" (the
        entry's own type, never what a link points at; no stat per entry where the file system
        gives the type with the name)."""
        out = []
        with os.scandir(self.fd) as it:
            for entry in it:
                try:
                    kind = ("link" if entry.is_symlink() else "dir" if entry.is_dir(follow_symlinks=False)
                            else "file" if entry.is_file(follow_symlinks=False) else "other")
                except OSError:
                    continue   # gone meanwhile
                out.append((entry.name, kind))
        return sorted(out)

    def make_folder(self, name, mode=0o750):
        """The folder name made here (mkdir, never exist_ok) and opened; one already there is
        taken only when it is ours and private (not a link, this folder's owner and this
        user's or root's, neither group- nor world-writable), else UnsafeEntry. What is below
        it must have its owner: this user, when the folder is made here."""
        owner = self.owner
        try:
            os.mkdir(name, mode, dir_fd=self.fd)
            owner = os.geteuid()
        except FileExistsError:
            pass
        path = self._path(name)
        folder = Folder(_open(name, self.fd, path, True, owner), path, owner)
        try:
            _check_writable(os.fstat(folder.fd), folder.path, private=True)
        except BaseException:
            folder.close()
            raise
        return folder

    def create(self, name, mode=0o640):
        """An fd open for writing on the file name, created here (O_EXCL: nothing may be at
        the name, a link or FIFO included)."""
        try:
            return os.open(name, _CREATE_FLAGS, mode, dir_fd=self.fd)
        except FileExistsError:
            raise UnsafeEntry(self._path(name), "already there (%s); a new file is not written through it"
                              % self._kind_at(name)) from None

    def _kind_at(self, name):
        try:
            return _kind(os.stat(name, dir_fd=self.fd, follow_symlinks=False).st_mode)
        except OSError:
            return "gone meanwhile"

    def replace_with(self, name, data, mode=0o640):
        """name holds data, whole: a temporary file from mkstemp in this folder (O_EXCL,
        O_NOFOLLOW, an unpredictable name), renamed over name; whatever was at name (a link, a
        FIFO) is replaced, never opened."""
        fd, tmp = tempfile.mkstemp(dir="/proc/self/fd/%d" % self.fd, prefix=".%s." % name, suffix=".tmp")
        tmp = os.path.basename(tmp)
        try:
            with os.fdopen(fd, "wb") as fh:
                fh.write(data)
                os.fchmod(fh.fileno(), mode)
            os.replace(tmp, name, src_dir_fd=self.fd, dst_dir_fd=self.fd)
        except BaseException:
            try:
                os.unlink(tmp, dir_fd=self.fd)
            except OSError:
                pass
            raise

    def unlink(self, name):
        """Removes the entry name itself (a link: the link, never what it points at)."""
        os.unlink(name, dir_fd=self.fd)

    def read_bytes(self, name, max_bytes, tail=False):
        """The bytes of the regular file name; UnsafeEntry when it is not one or is over
        max_bytes (with tail=True: its last max_bytes instead)."""
        fd = _open(name, self.fd, self._path(name), False, self.owner)
        with os.fdopen(fd, "rb") as fh:
            size = os.fstat(fh.fileno()).st_size
            if size > max_bytes:
                if not tail:
                    raise UnsafeEntry(self._path(name), "%d bytes, more than the %d read" % (size, max_bytes))
                fh.seek(size - max_bytes)
            data = fh.read(max_bytes + 1)
        if len(data) > max_bytes:   # it grew while being read
            if not tail:
                raise UnsafeEntry(self._path(name), "more than the %d bytes read" % max_bytes)
            data = data[-max_bytes:]
        return data

    def read_text(self, name, max_bytes, tail=False):
        return self.read_bytes(name, max_bytes, tail).decode("utf-8", errors="replace")

    def read_json(self, name, max_bytes):
        """The JSON in name; ValueError when it is not JSON."""
        return json.loads(self.read_bytes(name, max_bytes).decode("utf-8"))

    def readlink(self, name):
        return os.readlink(name, dir_fd=self.fd)

    @contextlib.contextmanager
    def open_binary(self, name, max_bytes):
        """The regular file name open for reading (a binary file object), for a reader that
        streams it; UnsafeEntry when it is not one or is over max_bytes."""
        fd = _open(name, self.fd, self._path(name), False, self.owner)
        with os.fdopen(fd, "rb") as fh:
            size = os.fstat(fd).st_size
            if size > max_bytes:
                raise UnsafeEntry(self._path(name), "%d bytes, more than the %d read" % (size, max_bytes))
            os.set_blocking(fd, True)
            yield fh

    def remove_tree(self, name):
        """Removes the folder name and everything in it without following a link: links
        are unlinked themselves, folders entered by O_NOFOLLOW. UnsafeEntry when name is
        not a folder of this folder's owner (then nothing is removed)."""
        with self.folder(name) as sub:
            for child, kind in sub.entries():
                if kind == "dir":
                    sub.remove_tree(child)
                else:
                    os.unlink(child, dir_fd=sub.fd)
        os.rmdir(name, dir_fd=self.fd)

    def close(self):
        if self.fd is not None:
            os.close(self.fd)
            self.fd = None

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.close()


def read_file(path, max_bytes, tail=False):
    """The bytes of the regular file at path (its last component not a link; any owner),
    read within max_bytes (Folder.read_bytes)."""
    return Folder(None, os.path.dirname(path), None).read_bytes(path, max_bytes, tail)


def open_binary(path, max_bytes):
    """Folder.open_binary of the regular file at path (its last component not a link; any owner)."""
    return Folder(None, os.path.dirname(path), None).open_binary(path, max_bytes)


def read_text_file(path, max_bytes, tail=False):
    return read_file(path, max_bytes, tail).decode("utf-8", errors="replace")


def read_json_file(path, max_bytes):
    """The JSON of the regular file at path, read within max_bytes; ValueError when not JSON."""
    return json.loads(read_file(path, max_bytes).decode("utf-8"))
