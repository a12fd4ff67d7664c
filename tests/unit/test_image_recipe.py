"""tests/image/build names the image after its recipe: the same recipe gives the same
tag wherever it is checked out, and any change to the recipe gives a new one."""
from __future__ import annotations

import shutil
import subprocess
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
RECIPE = ROOT / "tests" / "image"


def image_name(checkout: Path) -> str:
    out = subprocess.run([str(checkout / "tests" / "image" / "build"), "--print-name"],
                         check=True, capture_output=True, text=True)
    return out.stdout.strip()


def copy_recipe(tmp_path: Path, name: str) -> Path:
    checkout = tmp_path / name
    shutil.copytree(RECIPE, checkout / "tests" / "image")
    return checkout


def test_the_tag_depends_only_on_the_recipe(tmp_path):
    name = image_name(copy_recipe(tmp_path, "elsewhere"))
    assert name == image_name(ROOT)
    repo, _, tag = name.partition(":")
    assert repo == "localhost/sglang-ops-testhost"
    assert len(tag) == 12 and all(c in "0123456789abcdef" for c in tag)


def test_a_changed_package_list_gives_a_new_tag(tmp_path):
    checkout = copy_recipe(tmp_path, "changed")
    packages = checkout / "tests" / "image" / "packages.txt"
    packages.write_text(packages.read_text() + "strace\n")
    assert image_name(checkout) != image_name(ROOT)


def test_the_package_list_has_what_the_test_hosts_rely_on():
    lines = (RECIPE / "packages.txt").read_text().splitlines()
    packages = {line.strip() for line in lines if line.strip() and not line.startswith("#")}
    # systemd as PID 1, journald, python3 for Ansible and the server's venv, the pip
    # module's dependency, curl for HTTP checks from inside the host.
    assert {"systemd", "systemd-sysv", "dbus", "python3", "python3-venv",
            "python3-packaging", "curl", "procps", "iproute2"} <= packages
