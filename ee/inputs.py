"""What the execution environment's build consumes, for ee/build.

  python ee/inputs.py requirements DEFINITION [COLLECTION_REQUIREMENTS]
      the Python requirements the wheelhouse must hold, one per line
  python ee/inputs.py hash PATH...
      12 hex digits over the paths' names and contents (folders: every file in them)

The wheelhouse is the only package source of the build (ee/pip.conf), so it holds every
requirement a pip of the build installs: the definition's ansible-core, ansible-runner
and container init, what ansible-builder's builder stage installs for itself, and the
collection's own requirements as `ansible-builder introspect` writes them.
"""
from __future__ import annotations

import hashlib
import sys
from pathlib import Path

import yaml

# ansible-builder 3's builder stage: `$PYCMD -m pip install bindep pyyaml packaging`
# (tests/unit/ee reads the Containerfile ansible-builder writes to keep this in step).
BUILDER_STAGE_REQUIREMENTS = ("bindep", "pyyaml", "packaging")


def definition_requirements(definition: dict) -> list[str]:
    """The pip requirements the EE definition names itself."""
    dependencies = definition.get("dependencies") or {}
    found = []
    for key in ("ansible_core", "ansible_runner"):
        spec = (dependencies.get(key) or {}).get("package_pip")
        if not spec:
            raise ValueError(f"dependencies.{key}.package_pip is missing: the build installs it from the wheelhouse")
        found.append(spec)
    init = ((definition.get("options") or {}).get("container_init") or {}).get("package_pip")
    if init:
        found.append(init)
    return found


def introspected_requirements(text: str) -> list[str]:
    """Requirement lines of a file `ansible-builder introspect --write-pip` wrote
    (comments and blank lines dropped)."""
    lines = (line.split("#", 1)[0].strip() for line in text.splitlines())
    return [line for line in lines if line]


def wheelhouse_requirements(definition: dict, collection_requirements: list[str]) -> list[str]:
    """Every requirement, in a stable order, each once."""
    wanted = definition_requirements(definition) + list(BUILDER_STAGE_REQUIREMENTS) + collection_requirements
    return list(dict.fromkeys(wanted))


def content_hash(paths: list[Path]) -> str:
    """12 hex digits that change when any file under paths changes name or content."""
    files = []
    for path in paths:
        if path.is_dir():
            files += sorted(p for p in path.rglob("*") if p.is_file() and "__pycache__" not in p.parts)
        elif path.is_file():
            files.append(path)
        else:
            raise FileNotFoundError(f"no such file or folder: {path}")
    digest = hashlib.sha256()
    for file in files:
        digest.update(str(file).encode() + b"\0")
        digest.update(hashlib.sha256(file.read_bytes()).hexdigest().encode() + b"\n")
    return digest.hexdigest()[:12]


def main(argv: list[str]) -> int:
    if len(argv) >= 2 and argv[0] == "requirements" and len(argv) <= 3:
        definition = yaml.safe_load(Path(argv[1]).read_text())
        collection = introspected_requirements(Path(argv[2]).read_text()) if len(argv) == 3 else []
        print("\n".join(wheelhouse_requirements(definition, collection)))
        return 0
    if len(argv) >= 2 and argv[0] == "hash":
        print(content_hash([Path(p) for p in argv[1:]]))
        return 0
    print(__doc__, file=sys.stderr)
    return 2


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
