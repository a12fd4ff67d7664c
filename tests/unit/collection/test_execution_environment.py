"""The collection's execution-environment metadata: meta/execution-environment.yml names
its Python requirements (lower bounds of what the content imports beyond ansible-core)
and bindep.txt (system packages with platform selectors), and ansible-builder reads both
from an installed copy without a complaint."""
import ast
import os
import subprocess
import sys

import pytest
import yaml
from bindep.depends import Depends
from packaging.requirements import Requirement

from .conftest import BIN, ROOT, checkout_env

EE_META = os.path.join(ROOT, "meta", "execution-environment.yml")
# Code that runs on the controller (plugins) or on the hosts (modules, module_utils, the
# unit's supervisor and handlers installed from roles/sglang_service/files).
RUNTIME_CODE_DIRS = ("plugins", os.path.join("roles", "sglang_service", "files"))
# Imports that are not the collection's to provide: ansible-core and the collection itself;
# sglang-check-flags runs in the SGLang venv the sglang role installs, to import SGLang.
PROVIDED = {"ansible", "ansible_collections"}
PROVIDED_PER_FILE = {os.path.join("roles", "sglang_service", "files", "sglang-check-flags"): {"sglang"}}
# ansible-core's own dependencies, which an EE always has with it.
ANSIBLE_CORE = {"ansible-core", "ansible", "jinja2", "pyyaml"}


def ee_dependencies():
    with open(EE_META) as f:
        meta = yaml.safe_load(f)
    assert meta["version"] == 1
    return meta["dependencies"]


def requirement_lines(path):
    with open(os.path.join(ROOT, path)) as f:
        return [line.strip() for line in f if line.strip() and not line.lstrip().startswith("#")]


def python_requirements():
    return [Requirement(line) for line in requirement_lines(ee_dependencies()["python"])]


def runtime_sources():
    for top in RUNTIME_CODE_DIRS:
        for folder, dirs, files in os.walk(os.path.join(ROOT, top)):
            dirs[:] = [d for d in dirs if d != "__pycache__"]
            for name in files:
                path = os.path.join(folder, name)
                if name.endswith(".py") or top != "plugins":
                    yield os.path.relpath(path, ROOT)


def top_level_imports(path):
    with open(os.path.join(ROOT, path)) as f:
        tree = ast.parse(f.read(), filename=path)
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            yield from (alias.name.split(".")[0] for alias in node.names)
        elif isinstance(node, ast.ImportFrom) and node.level == 0:
            yield node.module.split(".")[0]


def test_meta_names_files_of_the_collection_by_relative_path():
    deps = ee_dependencies()
    assert set(deps) == {"python", "system"}
    for path in deps.values():
        assert not os.path.isabs(path)
        assert os.path.isfile(os.path.join(ROOT, path)), path


def test_python_requirements_are_lower_bounds_without_ansible_core():
    reqs = python_requirements()
    assert reqs, "an empty requirements file: drop it from meta/execution-environment.yml instead"
    for req in reqs:
        assert req.name.lower() not in ANSIBLE_CORE, req
        assert req.specifier, "%s: give the lowest version the content works with" % req
        assert {spec.operator for spec in req.specifier} == {">="}, req


def test_runtime_code_imports_only_stdlib_ansible_and_listed_requirements():
    listed = {req.name.lower().replace("-", "_") for req in python_requirements()}
    sources = list(runtime_sources())
    assert any(path.endswith("sglang_restart.py") for path in sources)
    assert any(path.endswith("sglang-supervisor") for path in sources)
    unlisted = {}
    for path in sources:
        allowed = sys.stdlib_module_names | PROVIDED | PROVIDED_PER_FILE.get(path, set()) | listed
        missing = sorted(set(top_level_imports(path)) - allowed)
        if missing:
            unlisted[path] = missing
    assert unlisted == {}


def test_bindep_lines_parse_and_each_names_its_platform():
    path = os.path.join(ROOT, ee_dependencies()["system"])
    with open(path) as f:
        text = f.read()
    depends = Depends(text)
    rules = depends.active_rules(["platform:dpkg"]) + depends.active_rules(["platform:rpm"])
    assert rules, "bindep.txt has no package for dpkg or rpm platforms"
    for line in requirement_lines(ee_dependencies()["system"]):
        assert "[platform:" in line, "%s: say which platforms (platform:dpkg, platform:rpm)" % line


@pytest.fixture(scope="module")
def introspected(installed_collections):
    result = subprocess.run([os.path.join(BIN, "ansible-builder"), "introspect", "--sanitize",
                             str(installed_collections)],
                            capture_output=True, text=True, env=checkout_env())
    return result


def test_ansible_builder_introspects_the_installed_collection_cleanly(introspected):
    assert introspected.returncode == 0, introspected.stderr
    assert introspected.stderr == ""
    data = yaml.safe_load(introspected.stdout)
    origin = "  # from collection sglang_ops.serving"
    assert data["python"] == [line + origin for line in requirement_lines(ee_dependencies()["python"])]
    assert data["system"] == [line + origin for line in requirement_lines(ee_dependencies()["system"])]
