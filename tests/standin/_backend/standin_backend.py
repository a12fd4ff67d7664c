"""PEP 517 build backend for the SGLang stand-in, standard library only.

The controller virtualenv has pip and setuptools but not `wheel`, and the test hosts
have no network; this backend writes the wheel (a zip with METADATA, WHEEL,
entry_points.txt and RECORD) from `src/` and pyproject.toml, so
`pip wheel --no-deps --no-build-isolation tests/standin` works offline.
"""
import base64
import hashlib
import os
import tarfile
import tomllib
import zipfile

_ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
_TAG = "py3-none-any"


def _project():
    with open(os.path.join(_ROOT, "pyproject.toml"), "rb") as f:
        return tomllib.load(f)["project"]


def _dist_name(project):
    return project["name"].replace("-", "_")


def _metadata(project):
    lines = [
        "Metadata-Version: 2.1",
        f"Name: {project['name']}",
        f"Version: {project['version']}",
        f"Summary: {project['description']}",
        f"Requires-Python: {project['requires-python']}",
    ] + [f"Requires-Dist: {dep}" for dep in project.get("dependencies", [])]
    readme = os.path.join(_ROOT, project.get("readme", "README.md"))
    body = ""
    if os.path.exists(readme):
        lines.append("Description-Content-Type: text/markdown")
        with open(readme, encoding="utf-8") as f:
            body = f.read()
    return "\n".join(lines) + "\n\n" + body


def _entry_points(project):
    scripts = project.get("scripts", {})
    return "[console_scripts]\n" + "".join(f"{k} = {v}\n" for k, v in scripts.items())


def _source_files():
    src = os.path.join(_ROOT, "src")
    for dirpath, dirnames, filenames in os.walk(src):
        dirnames[:] = sorted(d for d in dirnames if d != "__pycache__")
        for name in sorted(filenames):
            if name.endswith((".pyc", ".pyo")):
                continue
            full = os.path.join(dirpath, name)
            yield full, os.path.relpath(full, src).replace(os.sep, "/")


def _record_line(arcname, data):
    digest = base64.urlsafe_b64encode(hashlib.sha256(data).digest()).rstrip(b"=").decode()
    return f"{arcname},sha256={digest},{len(data)}"


def get_requires_for_build_wheel(config_settings=None):
    return []


def get_requires_for_build_sdist(config_settings=None):
    return []


def build_wheel(wheel_directory, config_settings=None, metadata_directory=None):
    project = _project()
    dist = _dist_name(project)
    version = project["version"]
    info = f"{dist}-{version}.dist-info"
    filename = f"{dist}-{version}-{_TAG}.whl"
    records = []
    with zipfile.ZipFile(os.path.join(wheel_directory, filename), "w", zipfile.ZIP_DEFLATED) as zf:
        def add(arcname, data):
            zf.writestr(arcname, data)
            records.append(_record_line(arcname, data))

        for full, arcname in _source_files():
            with open(full, "rb") as f:
                add(arcname, f.read())
        add(f"{info}/METADATA", _metadata(project).encode())
        add(f"{info}/WHEEL", (
            "Wheel-Version: 1.0\nGenerator: standin_backend\nRoot-Is-Purelib: true\n"
            f"Tag: {_TAG}\n").encode())
        add(f"{info}/entry_points.txt", _entry_points(project).encode())
        add(f"{info}/top_level.txt", b"sglang\n")
        records.append(f"{info}/RECORD,,")
        zf.writestr(f"{info}/RECORD", "\n".join(records) + "\n")
    return filename


def build_sdist(sdist_directory, config_settings=None):
    project = _project()
    base = f"{_dist_name(project)}-{project['version']}"
    filename = f"{base}.tar.gz"
    with tarfile.open(os.path.join(sdist_directory, filename), "w:gz") as tf:
        for name in ("pyproject.toml", "README.md", "_backend/standin_backend.py"):
            path = os.path.join(_ROOT, name)
            if os.path.exists(path):
                tf.add(path, arcname=f"{base}/{name}")
        for full, arcname in _source_files():
            tf.add(full, arcname=f"{base}/src/{arcname}")
    return filename
