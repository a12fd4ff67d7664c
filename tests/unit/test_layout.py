"""Where code lives: plugins/module_utils is what runs on the target, and each piece of
vocabulary has one definition.

module_utils holds what the modules (plugins/modules/*), the on-host watch
(module_utils/start_watch.py), its per-poll outlook (module_utils/start_outlook.py) and the
unit's supervisor (module_utils/supervisor.py) import; code only the controller needs lives in
plugin_utils. Nothing in module_utils may import controller code.
"""
import ast
import re
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
PLUGINS = ROOT / "plugins"
MODULE_UTILS = PLUGINS / "module_utils"
PREFIX = "ansible_collections.sglang_ops.serving.plugins."
# start_outlook.py: the ETA and metrics file a host watcher updates every poll
# (docs/metrics.md), on the target like the watch itself.
ON_HOST_ENTRY_POINTS = sorted((PLUGINS / "modules").glob("*.py")) + [
    MODULE_UTILS / "start_watch.py", MODULE_UTILS / "start_outlook.py", MODULE_UTILS / "supervisor.py",
    # the supervised unit's OnFailure= handler (roles/sglang_service, <unit>-needed-human.service)
    MODULE_UTILS / "unit_failed.py"]


def _collection_imports(path):
    """(kind, name) of every import of this collection in a file: ('module_utils', 'probe')."""
    found = set()
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
        if isinstance(node, ast.ImportFrom) and node.module and node.module.startswith(PREFIX):
            parts = node.module[len(PREFIX):].split(".")
            if len(parts) == 1:   # from ...plugins.module_utils import a, b
                found.update((parts[0], alias.name) for alias in node.names)
            else:
                found.add((parts[0], parts[1]))
        elif isinstance(node, ast.Import):
            for alias in node.names:
                if alias.name.startswith(PREFIX):
                    parts = alias.name[len(PREFIX):].split(".")
                    found.add((parts[0], parts[1]))
    return found


def _module_utils_reached_from(entry_points):
    reached, todo = set(), list(entry_points)
    while todo:
        for kind, name in _collection_imports(todo.pop()):
            if kind == "module_utils" and name not in reached:
                reached.add(name)
                todo.append(MODULE_UTILS / (name + ".py"))
    return reached


def test_every_module_utils_file_is_used_on_the_target():
    on_disk = {p.stem for p in MODULE_UTILS.glob("*.py") if p.stem != "__init__"}
    reached = _module_utils_reached_from(ON_HOST_ENTRY_POINTS) | {p.stem for p in ON_HOST_ENTRY_POINTS if p.parent == MODULE_UTILS}
    assert on_disk - reached == set(), "only the controller imports these: move them to plugin_utils"
    assert reached <= on_disk


def test_module_utils_never_imports_controller_code():
    controller = re.compile(r"^\s*(from|import)\s+(ansible\.(?!module_utils\b)\S+|"
                            r"ansible_collections\.sglang_ops\.serving\.plugins\.(plugin_utils|action|filter))", re.M)
    offenders = [p.name for p in MODULE_UTILS.glob("*.py") if controller.search(p.read_text(encoding="utf-8"))]
    assert offenders == []


def _definitions(pattern):
    """Files of plugins/ whose text matches a definition."""
    rx = re.compile(pattern, re.M)
    return sorted(str(p.relative_to(ROOT)) for p in PLUGINS.rglob("*.py") if rx.search(p.read_text(encoding="utf-8")))


def test_each_vocabulary_has_one_definition():
    assert _definitions(r"^FINAL_VERDICTS\s*=") == ["plugins/module_utils/failure_classes.py"]
    assert _definitions(r"^VERDICTS\s*=") == ["plugins/module_utils/failure_classes.py"]
    assert _definitions(r"^\s*def \w*duration\w*\((?!self)") == ["plugins/module_utils/durations.py"]
    assert _definitions(r"(=|compile\()\s*r?\"Main process exited") == ["plugins/module_utils/sglang_dialect.py"]
    assert _definitions(r"\(\"checkpoint shards\"") == ["plugins/module_utils/sglang_dialect.py"]
    assert _definitions(r"\[DTPE\]P|\[TDPE\]P") == ["plugins/module_utils/sglang_dialect.py"]
    assert _definitions(r"sglang::scheduler_") == ["plugins/module_utils/sglang_dialect.py"]
    assert _definitions(r"\"sglang-trace/1\"") == ["plugins/module_utils/trace_format.py"]
    assert _definitions(r"^\s*def read_trace\(") == ["plugins/module_utils/trace_format.py"]
    assert _definitions(r"^class \w*TraceWriter") == ["plugins/module_utils/trace_format.py"]
