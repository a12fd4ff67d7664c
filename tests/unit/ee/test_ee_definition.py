"""The execution environment's definition and its build inputs (ee/inputs.py): the same
ansible-core and ansible-runner as the controller, every pip of the build served by the
wheelhouse (the Containerfile ansible-builder itself writes is read), pip pointed at the
wheelhouse only during the build, and a tag that follows the inputs."""
from __future__ import annotations

import importlib.util
import re
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
import yaml

ROOT = Path(__file__).resolve().parents[3]
DEFINITION = ROOT / "execution-environment.yml"


def load_inputs():
    spec = importlib.util.spec_from_file_location("ee_inputs", ROOT / "ee" / "inputs.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


inputs = load_inputs()


def definition() -> dict:
    return yaml.safe_load(DEFINITION.read_text())


def controller_pins() -> dict[str, str]:
    pins = {}
    for line in (ROOT / "requirements.txt").read_text().splitlines():
        line = line.split("#", 1)[0].strip()
        if "==" in line:
            name, _, version = line.partition("==")
            pins[re.sub(r"\[.*\]", "", name).lower()] = version
    return pins


@pytest.fixture(scope="module")
def containerfile(tmp_path_factory) -> str:
    """The Containerfile `ansible-builder create` writes for the definition."""
    builder = shutil.which("ansible-builder", path=str(Path(sys.executable).parent))
    if builder is None:
        pytest.skip("ansible-builder is not installed (requirements.txt)")
    context = tmp_path_factory.mktemp("context")
    subprocess.run([builder, "create", "-f", str(DEFINITION), "-c", str(context)],
                   check=True, capture_output=True, text=True)
    return (context / "Containerfile").read_text()


def stages(text: str) -> dict[str, list[str]]:
    found, name = {}, None
    for line in text.splitlines():
        match = re.match(r"FROM \S+ AS (\w+)", line)
        if match:
            name = match.group(1)
            found[name] = []
        elif name:
            found[name].append(line)
    return found


def test_the_ee_installs_the_controllers_ansible_core_and_runner():
    deps = definition()["dependencies"]
    pins = controller_pins()
    assert deps["ansible_core"]["package_pip"] == f"ansible-core=={pins['ansible-core']}"
    assert deps["ansible_runner"]["package_pip"] == f"ansible-runner=={pins['ansible-runner']}"


def test_the_base_image_is_the_local_one_and_nothing_is_pulled():
    assert definition()["images"]["base_image"]["name"].startswith("localhost/sglang-ops-ee-base:")
    build = (ROOT / "ee" / "build").read_text()
    assert "--extra-build-cli-args=--pull=never" in build
    settings = yaml.safe_load((ROOT / "ee" / "ansible-navigator.yml").read_text())["ansible-navigator"]
    assert settings["execution-environment"]["pull"]["policy"] == "never"
    assert settings["execution-environment"]["container-engine"] == "podman"


def test_pip_reads_the_wheelhouse_before_its_first_install_and_not_after_the_build(containerfile):
    base = stages(containerfile)["base"]
    config = base.index("COPY _build/configs/pip.conf /etc/pip.conf")
    first_pip = next(i for i, line in enumerate(base) if "pip install" in line)
    assert config < first_pip
    assert base.index("COPY _build/wheelhouse/ /output/wheelhouse/") < first_pip
    final = stages(containerfile)["final"]
    assert "RUN rm -f /etc/pip.conf" in final
    conf = (ROOT / "ee" / "pip.conf").read_text()
    assert re.search(r"^no-index = true$", conf, re.M)
    assert re.search(r"^find-links = /output/wheelhouse$", conf, re.M)


def test_the_wheelhouse_holds_what_the_builder_stage_installs(containerfile):
    builder = stages(containerfile)["builder"]
    installs = [line.split("pip install", 1)[1].split() for line in builder
                if line.startswith("RUN") and "pip install" in line and "-r" not in line.split()]
    packages = {word for words in installs for word in words if not word.startswith(("-", "$"))}
    assert packages, builder
    assert packages <= set(inputs.BUILDER_STAGE_REQUIREMENTS)


def test_the_wheelhouse_list_has_the_definition_the_builder_and_the_collection_once():
    wanted = inputs.wheelhouse_requirements(
        definition(), inputs.introspected_requirements(
            "pip>=22.3  # from collection sglang_ops.serving\n\npyyaml  # from collection x\n"))
    deps = definition()["dependencies"]
    assert wanted[:2] == [deps["ansible_core"]["package_pip"], deps["ansible_runner"]["package_pip"]]
    assert definition()["options"]["container_init"]["package_pip"] in wanted
    assert "pip>=22.3" in wanted
    assert len(wanted) == len(set(wanted))
    assert wanted.count("pyyaml") == 1


def test_a_definition_without_ansible_core_is_refused():
    broken = definition()
    del broken["dependencies"]["ansible_core"]
    with pytest.raises(ValueError, match="ansible_core"):
        inputs.wheelhouse_requirements(broken, [])


def test_the_tag_follows_each_input_file_by_content_and_name(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    Path("recipe").mkdir()
    Path("recipe/a.txt").write_text("one\n")
    Path("wheels.txt").write_text("x-1.0-py3-none-any.whl\n")
    first = inputs.content_hash([Path("recipe"), Path("wheels.txt")])
    assert re.fullmatch(r"[0-9a-f]{12}", first)
    assert inputs.content_hash([Path("recipe"), Path("wheels.txt")]) == first
    Path("wheels.txt").write_text("x-1.1-py3-none-any.whl\n")
    second = inputs.content_hash([Path("recipe"), Path("wheels.txt")])
    assert second != first
    Path("recipe/a.txt").rename("recipe/b.txt")
    assert inputs.content_hash([Path("recipe"), Path("wheels.txt")]) != second
    with pytest.raises(FileNotFoundError):
        inputs.content_hash([Path("missing")])


def package_manager(tmp_path: Path) -> Path:
    """The base image's ee-pkgmgr, as customize.sh writes it."""
    text = (ROOT / "ee" / "base" / "customize.sh").read_text()
    body = text.split("<<'SCRIPT'\n", 1)[1].split("\nSCRIPT\n", 1)[0]
    script = tmp_path / "ee-pkgmgr"
    script.write_text(body + "\n")
    script.chmod(0o755)
    return script


def test_the_offline_package_manager_accepts_installed_packages_and_names_missing_ones(tmp_path):
    if shutil.which("dpkg-query") is None:
        pytest.skip("needs dpkg-query (a Debian controller, like the base image)")
    script = package_manager(tmp_path)
    ok = subprocess.run([str(script), "install", "-y", "bash"], capture_output=True, text=True)
    assert ok.returncode == 0, ok.stderr
    missing = subprocess.run([str(script), "install", "-y", "bash", "sglang-ops-no-such-package"],
                             capture_output=True, text=True)
    assert missing.returncode == 1
    assert "sglang-ops-no-such-package" in missing.stderr and "ee/base/packages.txt" in missing.stderr
    assert subprocess.run([str(script), "clean", "all"]).returncode == 0
