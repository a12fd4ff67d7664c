"""sglang_file_tree (the sglang_service role installs the collection's module_utils with it) run
for real through Ansible: one module run writes what differs, leaves the rest, prunes what
the folder does not have, never follows a planted link, and in check mode changes nothing."""
import json
import os
import subprocess
import sys

import pytest

from ansible_collections.sglang_ops.serving.plugins.module_utils.host.file_tree import TreeError, checked_relpath

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__)))))
ANSIBLE = os.path.join(os.path.dirname(sys.executable), "ansible")


def run_module(args, check=False):
    env = dict(os.environ, ANSIBLE_CONFIG=os.path.join(ROOT, "ansible.cfg"), ANSIBLE_STDOUT_CALLBACK="json",
               ANSIBLE_LOAD_CALLBACK_PLUGINS="1", ANSIBLE_NOCOLOR="1")
    cmd = [ANSIBLE, "localhost", "-c", "local", "-i", "localhost,", "-e", "ansible_python_interpreter=%s" % sys.executable,
           "-m", "sglang_ops.serving.sglang_file_tree", "-a", json.dumps(args)] + (["--check"] if check else [])
    p = subprocess.run(cmd, cwd=ROOT, env=env, capture_output=True, text=True, timeout=180, check=False)
    return json.loads(p.stdout)["plays"][0]["tasks"][0]["hosts"]["localhost"], p.stdout + p.stderr


@pytest.fixture
def tree(tmp_path):
    """A source folder of two packages, a file no pattern takes and a __pycache__; the args to put it."""
    src = tmp_path / "src"
    for rel, text in (("domain/a.py", "A = 1\n"), ("domain/b.py", "B = 2\n"), ("host/c.py", "C = 3\n"),
                      ("host/README.txt", "not sent\n"), ("host/__pycache__/c.cpython-311.pyc", "compiled")):
        path = src / rel
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(text)
    dest = tmp_path / "dest" / "module_utils"
    return src, dest, {"src": str(src), "dest": str(dest), "include": ["domain/*.py", "host/*.py"],
                       "prune": True, "mode": "0644", "dir_mode": "0755"}


def test_the_first_run_writes_the_matching_files_and_the_second_changes_nothing(tree):
    src, dest, args = tree
    res, raw = run_module(args)
    assert res.get("failed") is not True and res["changed"] is True, raw
    assert res["written"] == ["domain/a.py", "domain/b.py", "host/c.py"] and res["files"] == 3
    assert (dest / "host" / "c.py").read_text() == "C = 3\n"
    assert not (dest / "host" / "README.txt").exists() and not (dest / "host" / "__pycache__").exists()
    assert oct((dest / "domain").stat().st_mode & 0o7777) == "0o755"
    assert oct((dest / "domain" / "a.py").stat().st_mode & 0o7777) == "0o644"
    again, raw = run_module(args)
    assert again["changed"] is False and again["written"] == [] and again["removed"] == [], raw


def test_only_what_differs_is_written_and_what_the_folder_lacks_goes(tree):
    src, dest, args = tree
    run_module(args)
    (src / "domain" / "b.py").write_text("B = 20\n")
    (dest / "domain" / "a.py").chmod(0o600)
    (dest / "domain" / "old.py").write_text("stale\n")                 # a module this release renamed
    (dest / "flat.py").write_text("stale\n")                           # the flat layout of old
    (dest / "renamed" / "__pycache__").mkdir(parents=True)             # a subpackage that went
    (dest / "renamed" / "x.py").write_text("stale\n")
    (dest / "host" / "__pycache__").mkdir()
    (dest / "host" / "__pycache__" / "c.cpython-311.pyc").write_text("Python's")
    res, raw = run_module(args)
    assert res["changed"] is True and res["written"] == ["domain/b.py"], raw
    assert res["removed"] == ["domain/old.py", "flat.py", "renamed"]
    assert (dest / "domain" / "b.py").read_text() == "B = 20\n"
    assert oct((dest / "domain" / "a.py").stat().st_mode & 0o7777) == "0o644"
    assert not (dest / "renamed").exists() and not (dest / "flat.py").exists()
    assert (dest / "host" / "__pycache__" / "c.cpython-311.pyc").read_text() == "Python's"


def test_a_link_planted_in_a_file_s_place_is_replaced_and_never_followed(tree, tmp_path):
    src, dest, args = tree
    run_module(args)
    elsewhere = tmp_path / "elsewhere.py"
    elsewhere.write_text("someone else's\n")
    (dest / "host" / "c.py").unlink()
    (dest / "host" / "c.py").symlink_to(elsewhere)
    res, raw = run_module(args)
    assert res["written"] == ["host/c.py"], raw
    assert not (dest / "host" / "c.py").is_symlink() and (dest / "host" / "c.py").read_text() == "C = 3\n"
    assert elsewhere.read_text() == "someone else's\n"


def test_check_mode_says_what_it_would_do_and_changes_nothing(tree):
    src, dest, args = tree
    run_module(args)
    (src / "host" / "c.py").write_text("C = 30\n")
    (dest / "domain" / "old.py").write_text("stale\n")
    res, raw = run_module(args, check=True)
    assert res["changed"] is True and res["written"] == ["host/c.py"] and res["removed"] == ["domain/old.py"], raw
    assert (dest / "host" / "c.py").read_text() == "C = 3\n" and (dest / "domain" / "old.py").exists()


def test_a_source_that_is_no_folder_or_matches_nothing_fails_and_changes_nothing(tree):
    src, dest, args = tree
    res, raw = run_module(dict(args, src=str(src / "domain" / "a.py")))
    assert res.get("failed") is True and "is not a folder" in res["msg"], raw
    res, raw = run_module(dict(args, include=["*.rs"]))
    assert res.get("failed") is True and "no file under" in res["msg"], raw
    assert not dest.exists()


def test_a_folder_in_a_file_s_place_fails_naming_it(tree):
    src, dest, args = tree
    (dest / "domain" / "a.py").mkdir(parents=True)
    res, raw = run_module(args)
    assert res.get("failed") is True and "a.py is a folder where the tree has a file" in res["msg"], raw
    assert not (dest / "domain" / "b.py").exists()


@pytest.mark.parametrize("rel", ["/etc/passwd", "../x.py", "a/../../x.py", ".", ""])
def test_a_path_outside_the_tree_is_refused(rel):
    with pytest.raises(TreeError):
        checked_relpath(rel)
