"""The collection tarball holds the collection and nothing of a checkout's state.

Builds it with ansible-galaxy from a copy of the tracked files plus the leftovers a
working checkout accumulates (run artifacts, caches, ansible-test output), then reads
the list of files inside."""
import os
import re
import shutil
import subprocess
import sys
import tarfile

import pytest
import yaml

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.realpath(__file__))))
GALAXY = os.path.join(os.path.dirname(sys.executable), "ansible-galaxy")
# What a collection consists of; anything else in the tarball is a mistake.
TOP_FILES = {"MANIFEST.json", "FILES.json", "README.md", "LICENSE", "CHANGELOG.rst", "bindep.txt",
             "tests/config.yml"}
FOLDERS = ("meta/", "plugins/", "roles/", "playbooks/", "docs/", "changelogs/", "monitoring/",
           "tests/sanity/", "tests/unit/")
# A checkout's state: none of it may reach the tarball.
LEFTOVERS = ["artifacts/demo-host/20261130T101500Z/run.json", ".pytest_cache/v/cache/nodeids",
             ".cache/image/recipe.sha", ".venv/pyvenv.cfg", "tests/output/junit/units.xml",
             "plugins/module_utils/__pycache__/detector.cpython-311.pyc", "roles/cuda/.DS_Store",
             "sglang_ops-serving-0.0.9.tar.gz"]
# Shipped tests run from an installed copy, without the checkout's CLI and ansible.cfg
# (tests that need them are left out in galaxy.yml; `make units` runs the rest there).
CHECKOUT_ONLY = re.compile(r"sglang_ops_cli|[\"'](bin|bench)[\"']|bin/sglang-ops|ansible\.cfg")


def tracked_files():
    out = subprocess.run(["git", "-C", ROOT, "ls-files", "-z"], capture_output=True, check=True)
    return [p for p in out.stdout.decode().split("\0") if p]


@pytest.fixture(scope="module")
def tarball(tmp_path_factory):
    src = tmp_path_factory.mktemp("checkout") / "serving"
    for rel in tracked_files():
        path = os.path.join(ROOT, rel)
        dest = src / rel
        dest.parent.mkdir(parents=True, exist_ok=True)
        if os.path.islink(path):
            os.symlink(os.readlink(path), dest)
        elif os.path.isfile(path):
            shutil.copy2(path, dest)
    for rel in LEFTOVERS:
        (src / rel).parent.mkdir(parents=True, exist_ok=True)
        (src / rel).write_text("left over\n")
    dist = tmp_path_factory.mktemp("dist")
    subprocess.run([GALAXY, "collection", "build", "--output-path", str(dist), str(src)],
                   capture_output=True, text=True, check=True)
    version = yaml.safe_load((src / "galaxy.yml").read_text())["version"]
    path = dist / ("sglang_ops-serving-%s.tar.gz" % version)
    with tarfile.open(path) as tar:
        members = {m.name: m for m in tar.getmembers() if m.isfile()}
        texts = {name: tar.extractfile(m).read().decode("utf-8", "replace")
                 for name, m in members.items() if name.startswith("tests/")}
    return sorted(members), texts


def test_tarball_holds_only_collection_content(tarball):
    names, _ = tarball
    stray = [n for n in names if n not in TOP_FILES and not n.startswith(FOLDERS)]
    assert stray == []


def test_no_checkout_leftover_reaches_the_tarball(tarball):
    names, _ = tarball
    assert [n for n in names if n in LEFTOVERS or "__pycache__" in n or n.endswith(".pyc")] == []


def test_every_tracked_file_of_the_collection_folders_is_shipped(tarball):
    names, _ = tarball
    wanted = [p for p in tracked_files()
              if p.startswith(("meta/", "plugins/", "roles/", "playbooks/", "docs/", "changelogs/", "tests/sanity/"))]
    assert wanted, "no collection files found in git ls-files"
    assert sorted(set(wanted) - set(names)) == []
    for required in ("README.md", "LICENSE", "CHANGELOG.rst", "meta/runtime.yml",
                     "tests/sanity/ignore-2.19.txt", "plugins/modules/sglang_probe.py",
                     "playbooks/restart.yml", "tests/config.yml", "meta/execution-environment.yml",
                     "meta/requirements.txt", "bindep.txt"):
        assert required in names


def test_shipped_tests_need_nothing_of_the_checkout(tarball):
    _, texts = tarball
    assert any(name.startswith("tests/unit/") and name.endswith(".py") for name in texts)
    coupled = {name: CHECKOUT_ONLY.findall(text) for name, text in texts.items()
               if name.endswith(".py") and CHECKOUT_ONLY.search(text)}
    assert coupled == {}
