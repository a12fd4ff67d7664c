"""A folder's files put under a destination on the host: what differs is written, what the
folder does not have goes (sglang_file_tree's host side).

    plan = plan_tree(dest, {"domain/phases.py": b"...", ...}, prune=True)
    plan.write       # relative paths whose content differs or that are missing
    plan.remove      # absolute paths under dest the folder does not have (files, folders)

Writing goes through the module (atomic rename, owner, group, mode), so check mode and the
file attributes stay Ansible's. Python's __pycache__ folders inside folders that are kept
are left to Python. Standard library only: this runs on the host.
"""
import os
import stat
from dataclasses import dataclass, field

PYCACHE = "__pycache__"


class TreeError(ValueError):
    """A path the tree cannot hold (absolute, climbing out of dest, a folder in a file's place)."""


@dataclass
class TreePlan:
    write: list = field(default_factory=list)      # relative paths, sorted
    remove: list = field(default_factory=list)     # absolute paths, sorted (folders as one entry)


def checked_relpath(rel):
    """`rel` as a clean relative path inside the tree, else TreeError."""
    norm = os.path.normpath(rel)
    if not rel or os.path.isabs(rel) or norm == "." or norm.split(os.sep)[0] == "..":
        raise TreeError("%r is not a path inside the tree" % rel)
    return norm


def _same_file(path, content):
    try:
        st = os.lstat(path)
    except FileNotFoundError:
        return False
    if stat.S_ISDIR(st.st_mode):
        raise TreeError("%s is a folder where the tree has a file" % path)
    if not stat.S_ISREG(st.st_mode) or st.st_size != len(content):
        return False             # a link or another kind of file is replaced, never followed
    with open(path, "rb") as f:
        return f.read() == content


def _kept_folders(files):
    kept = {"."}
    for rel in files:
        parent = os.path.dirname(rel)
        while parent:
            kept.add(parent)
            parent = os.path.dirname(parent)
    return kept


def _stale(dest, files):
    """Absolute paths under dest that the tree does not have (a stale folder as one entry)."""
    kept = _kept_folders(files)
    out = []
    for top, dirs, names in os.walk(dest):
        rel_top = os.path.relpath(top, dest)
        for name in list(dirs):
            rel = os.path.normpath(os.path.join(rel_top, name))
            if rel in kept or (name == PYCACHE and not os.path.islink(os.path.join(top, name))):
                continue
            out.append(os.path.join(top, name))
            dirs.remove(name)    # gone as a whole: nothing inside to look at
        if os.path.basename(top) == PYCACHE and rel_top not in kept:
            continue
        for name in names:
            rel = os.path.normpath(os.path.join(rel_top, name))
            if rel not in files:
                out.append(os.path.join(top, name))
    return sorted(out)


def plan_tree(dest, files, prune=False):
    """TreePlan for putting `files` ({relative path: bytes}) under dest."""
    files = {checked_relpath(rel): content for rel, content in files.items()}
    plan = TreePlan()
    plan.write = [rel for rel in sorted(files) if not _same_file(os.path.join(dest, rel), files[rel])]
    if prune and os.path.isdir(dest):
        plan.remove = _stale(dest, files)
    return plan
