"""requirements.yml names every collection the project uses, and the installed
collections (from the pinned `ansible` package; nothing is downloaded) satisfy it."""
from __future__ import annotations

import json
import re
import sys
from pathlib import Path

import pytest
import yaml

ROOT = Path(__file__).resolve().parents[2]
OWN_OR_CORE = {("ansible", "builtin"), ("sglang_ops", "serving")}
# Where a module, connection or lookup is named by its full name.
SCANNED = ["roles", "playbooks", "inventories", "plugins", "molecule"]
FQCN = re.compile(r"\b([a-z][a-z0-9_]*)\.([a-z][a-z0-9_]*)\.[a-z][a-z0-9_]*\b")
# In Python, only quoted names and ansible_collections imports (`ansible.utils.display`
# is ansible-core, not the ansible.utils collection).
FQCN_PY = re.compile(r"""(?:["']|\bansible_collections\.)([a-z][a-z0-9_]*)\.([a-z][a-z0-9_]*)\.[a-z][a-z0-9_]*""")


# --- version constraints as ansible-galaxy writes them: "1.2.3", ">=1.2,<2", "*" ---

def parse_version(text: str) -> tuple[int, ...]:
    core = re.split(r"[-+]", text.strip(), maxsplit=1)[0]
    return tuple(int(part) for part in core.split("."))


def satisfies(installed: str, constraint: str) -> bool:
    have = parse_version(installed)
    for clause in (c.strip() for c in str(constraint).split(",")):
        if clause in ("", "*"):
            continue
        op, want = re.match(r"(==|!=|>=|<=|>|<|=)?\s*(.+)", clause).groups()
        want_v = parse_version(want)
        width = max(len(have), len(want_v))
        a, b = have + (0,) * (width - len(have)), want_v + (0,) * (width - len(want_v))
        ok = {None: a == b, "=": a == b, "==": a == b, "!=": a != b, ">=": a >= b,
              "<=": a <= b, ">": a > b, "<": a < b}[op]
        if not ok:
            return False
    return True


def collection_roots() -> list[Path]:
    """Search order of ansible-core: configured paths first, then sys.path."""
    roots = [ROOT / "collections", Path.home() / ".ansible" / "collections",
             Path("/usr/share/ansible/collections")]
    roots += [Path(p) for p in sys.path if p]
    return [r / "ansible_collections" for r in roots if (r / "ansible_collections").is_dir()]


def installed_version(fqcn: str, roots: list[Path]) -> str | None:
    namespace, name = fqcn.split(".")
    for root in roots:
        manifest = root / namespace / name / "MANIFEST.json"
        if manifest.is_file():
            return json.loads(manifest.read_text())["collection_info"]["version"]
        galaxy = root / namespace / name / "galaxy.yml"
        if galaxy.is_file():
            return str(yaml.safe_load(galaxy.read_text())["version"])
    return None


def unsatisfied(requirements: list[dict], roots: list[Path]) -> list[str]:
    problems = []
    for req in requirements:
        have = installed_version(req["name"], roots)
        want = str(req.get("version", "*"))
        if have is None:
            problems.append(f"{req['name']}: not installed (wanted {want})")
        elif not satisfies(have, want):
            problems.append(f"{req['name']}: installed {have}, wanted {want}")
    return problems


def required_collections() -> list[dict]:
    data = yaml.safe_load((ROOT / "requirements.yml").read_text())
    return [{"name": c} if isinstance(c, str) else c for c in data["collections"]]


def used_collections(roots: list[Path]) -> dict[str, str]:
    """Collections named in the project's YAML and Python, with one place each is used."""
    used: dict[str, str] = {}
    for top in SCANNED:
        for path in sorted((ROOT / top).rglob("*")):
            if path.suffix not in (".yml", ".yaml", ".py", ".j2") or not path.is_file():
                continue
            pattern = FQCN_PY if path.suffix == ".py" else FQCN
            for match in pattern.finditer(path.read_text(errors="replace")):
                pair = match.group(1), match.group(2)
                if pair in OWN_OR_CORE or not any((r / pair[0] / pair[1]).is_dir() for r in roots):
                    continue
                used.setdefault(".".join(pair), f"{path.relative_to(ROOT)}: {match.group(0).strip(chr(34) + chr(39))}")
    return used


def test_installed_collections_satisfy_requirements_yml():
    problems = unsatisfied(required_collections(), collection_roots())
    assert not problems, "\n".join(problems)


def test_requirements_yml_names_every_collection_the_project_uses():
    required = {c["name"] for c in required_collections()}
    missing = {name: where for name, where in used_collections(collection_roots()).items()
               if name not in required}
    assert not missing, f"used but not in requirements.yml: {missing}"


def test_an_older_installed_collection_is_reported(tmp_path):
    manifest = tmp_path / "ansible_collections" / "containers" / "podman" / "MANIFEST.json"
    manifest.parent.mkdir(parents=True)
    manifest.write_text(json.dumps({"collection_info": {"version": "1.17.2"}}))
    problems = unsatisfied([{"name": "containers.podman", "version": "1.18.0"}],
                           [tmp_path / "ansible_collections"])
    assert problems == ["containers.podman: installed 1.17.2, wanted 1.18.0"]


def test_a_missing_collection_is_reported(tmp_path):
    problems = unsatisfied([{"name": "ansible.posix", "version": ">=2.1.0"}], [tmp_path])
    assert problems == ["ansible.posix: not installed (wanted >=2.1.0)"]


@pytest.mark.parametrize("installed, constraint, expected", [
    ("1.18.0", "1.18.0", True),
    ("1.18.1", "1.18.0", False),
    ("11.4.2", ">=11.0.0,<12.0.0", True),
    ("12.0.0", ">=11.0.0,<12.0.0", False),
    ("2.1.0", "*", True),
    ("2.1.0", "!=2.1.0", False),
    ("1.18", "==1.18.0", True),
])
def test_version_constraints_follow_galaxy_syntax(installed, constraint, expected):
    assert satisfies(installed, constraint) is expected
