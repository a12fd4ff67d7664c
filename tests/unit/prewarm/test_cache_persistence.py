import os

import pytest

from ansible_collections.sglang_ops.serving.plugins.module_utils.host import cache_persistence as cp
from ansible_collections.sglang_ops.serving.plugins.modules import sglang_cache_check

MOUNTINFO = """\
22 1 253:1 / / rw,relatime shared:1 - ext4 /dev/vda1 rw
25 22 0:23 / /dev/shm rw,relatime shared:2 - tmpfs tmpfs rw
30 22 253:2 / /var/cache rw,relatime shared:3 - xfs /dev/vdb1 rw
31 30 0:40 / /var/cache/tmp rw,relatime - tmpfs tmpfs rw
32 22 0:41 / /srv/my\\040cache rw,relatime - ext4 /dev/vdc rw
33 22 0:42 / /var/lib/containers/x rw - overlay overlay rw
"""


def _facts(**kw):
    base = dict(name="SGLANG_CACHE_DIR", path="/var/cache/sglang", exists=True, is_dir=True,
                owner="sglang", owner_can_write=True, mount=cp.Mount("/var/cache", "xfs"),
                size_bytes=5 * 2**20, files=12)
    base.update(kw)
    return cp.CacheDirFacts(**base)


def test_longest_mount_point_wins():
    mounts = cp.parse_mountinfo(MOUNTINFO)
    assert cp.mount_of("/var/cache/sglang", mounts) == cp.Mount("/var/cache", "xfs")
    assert cp.mount_of("/var/cache/tmp/triton", mounts).fstype == "tmpfs"
    assert cp.mount_of("/var/cachex", mounts) == cp.Mount("/", "ext4")
    assert cp.mount_of("/dev/shm", mounts).fstype == "tmpfs"


def test_escaped_mount_points_are_decoded():
    mounts = cp.parse_mountinfo(MOUNTINFO)
    assert cp.mount_of("/srv/my cache/dg", mounts).mount_point == "/srv/my cache"


def test_a_later_mount_on_the_same_point_hides_the_earlier_one():
    text = MOUNTINFO + "40 22 0:50 / /var/cache rw - tmpfs tmpfs rw\n"
    assert cp.mount_of("/var/cache/sglang", cp.parse_mountinfo(text)).fstype == "tmpfs"


def test_persistent_dir_owned_by_service_user_is_ok_and_reports_size():
    v = cp.judge(_facts(), "sglang")
    assert v.ok and v.problems == []
    assert "12 files, 5.0 MiB" in v.notes[0]


def test_dir_owned_by_another_user_is_a_problem():
    v = cp.judge(_facts(owner="root"), "sglang")
    assert not v.ok
    assert "owned by root, not by the service user sglang" in v.problems[0]


def test_dir_not_writable_by_its_owner_is_a_problem():
    v = cp.judge(_facts(owner_can_write=False), "sglang")
    assert not v.ok and "not writable" in v.problems[0]


def test_cache_on_tmpfs_is_lost_at_reboot():
    v = cp.judge(_facts(mount=cp.Mount("/var/cache/tmp", "tmpfs")), "sglang")
    assert not v.ok and "tmpfs" in v.problems[0] and "reboot" in v.problems[0]


def test_missing_dir_is_a_problem():
    v = cp.judge(_facts(exists=False, is_dir=False, owner=""), "sglang")
    assert not v.ok and "does not exist" in v.problems[0]
    assert len(v.problems) == 1


def test_a_file_where_the_dir_should_be_is_a_problem():
    v = cp.judge(_facts(is_dir=False), "sglang")
    assert not v.ok and "not a directory" in v.problems[0]


def test_container_overlay_is_only_a_note():
    v = cp.judge(_facts(mount=cp.Mount("/", "overlay")), "sglang")
    assert v.ok and any("re-created container" in n for n in v.notes)


def test_tree_size_counts_regular_files_not_links(disk_dir, write_file):
    os.makedirs(os.path.join(disk_dir, "triton", "abc"))
    write_file(os.path.join(disk_dir, "triton", "abc", "k.cubin"), 3000)
    write_file(os.path.join(disk_dir, "k.json"), 1000)
    os.symlink(os.path.join(disk_dir, "k.json"), os.path.join(disk_dir, "link.json"))
    assert cp.tree_size(disk_dir) == (4000, 2)


def _real_mounts():
    with open("/proc/self/mountinfo", encoding="utf-8") as fh:
        return cp.parse_mountinfo(fh.read())


def test_gathered_facts_see_a_real_dir_owned_by_another_user(disk_dir):
    if os.geteuid() != 0:
        pytest.skip("chown to another user needs root")
    path = os.path.join(disk_dir, "cache")
    os.mkdir(path)
    os.chown(path, 65534, 65534)
    facts = sglang_cache_check.gather("SGLANG_CACHE_DIR", path, _real_mounts())
    assert facts.exists and facts.is_dir and facts.owner != "root"
    assert not cp.judge(facts, "root").ok


def test_gathered_facts_see_a_real_tmpfs():
    if cp.mount_of("/dev/shm", _real_mounts()).fstype != "tmpfs":
        pytest.skip("/dev/shm is not tmpfs here")
    facts = sglang_cache_check.gather("SGLANG_CACHE_DIR", "/dev/shm/sglang-ops-missing", _real_mounts())
    v = cp.judge(facts, "root")
    assert not facts.exists
    assert any("tmpfs" in p for p in v.problems) and any("does not exist" in p for p in v.problems)
