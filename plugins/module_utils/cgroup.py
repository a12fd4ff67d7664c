"""The PIDs in a unit's cgroup, on cgroup v2, v1 (named systemd hierarchy) or hybrid."""
import os

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
