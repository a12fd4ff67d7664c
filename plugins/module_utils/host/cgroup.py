"""The PIDs in a unit's cgroup, on cgroup v2, v1 (named systemd hierarchy) or hybrid."""
import os

from ansible_collections.sglang_ops.serving.plugins.module_utils.host import procfs

CGROUP_ROOT = "/sys/fs/cgroup"


def candidate_dirs(control_group, root=CGROUP_ROOT):
    """Folders that may hold the unit's cgroup, most specific layout first:
    pure v2 (root has cgroup.controllers), hybrid (unified/), v1 (systemd/).

    Inside a container systemd may report the path from the host's root
    (/libpod_parent/libpod-ID/system.slice/x.service) while the mount shows either that
    path or only the container's part, so shorter tails of the path are tried too."""
    parts = [p for p in control_group.strip("/").split("/") if p]
    tails = ["/".join(parts[i:]) for i in range(len(parts))] or [""]
    bases = []
    if os.path.exists(os.path.join(root, "cgroup.controllers")):
        bases.append(root)
    bases += [os.path.join(root, "unified"), os.path.join(root, "systemd")]
    return [os.path.join(base, tail) for tail in tails for base in bases]


def _procs_below(path):
    pids = set()
    for dirpath, _dirnames, filenames in os.walk(path):
        if "cgroup.procs" not in filenames:
            continue
        try:
            with open(os.path.join(dirpath, "cgroup.procs")) as f:
                pids.update(int(x) for x in f.read().split() if x.isdigit())
        except OSError:
            continue  # a sub-cgroup removed while walking
    return pids


def cgroup_pids(control_group, root=CGROUP_ROOT):
    """(sorted PIDs, None) or (None, reason). An existing but empty cgroup gives []."""
    if not control_group:
        return None, "unit has no control group (not running)"
    for d in candidate_dirs(control_group, root):
        if os.path.isdir(d):
            return sorted(_procs_below(d)), None
    return None, "cgroup %s not found under %s" % (control_group, root)


def names_unit(proc_cgroup_text, service):
    """Whether a /proc/PID/cgroup text puts the process in the unit's cgroup or one below
    it, in any hierarchy (v1, v2, hybrid)."""
    for line in proc_cgroup_text.splitlines():
        if service in line.split(":", 2)[-1].split("/"):
            return True
    return False


def in_unit(pid, service, proc_root="/proc"):
    try:
        with open("%s/%d/cgroup" % (proc_root, pid)) as f:
            return names_unit(f.read(), service)
    except OSError:
        return False  # gone, or not ours to read


def unit_members(service, pids, proc_root="/proc"):
    """The PIDs among `pids` whose cgroup is the unit's: also a stopped unit's leftovers,
    which systemd no longer lists under ControlGroup."""
    return [pid for pid in pids if in_unit(pid, service, proc_root)]


def unit_processes(service, proc_root="/proc"):
    """[{pid, state, cmdline}] of every process in the unit's cgroup, also after a stop, by PID."""
    found = []
    for pid in unit_members(service, sorted(procfs.all_pids(proc_root)), proc_root):
        stat = procfs.read_stat(pid, proc_root)
        if stat is not None:
            found.append({"pid": pid, "state": stat.state, "cmdline": procfs.read_cmdline(pid, proc_root) or ""})
    return found
