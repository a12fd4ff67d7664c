"""Where code lives: plugins/module_utils is what runs on the target, and each piece of
vocabulary has one definition.

module_utils holds what the modules (plugins/modules/*), the on-host watch
(module_utils/services/start_watch.py), its per-poll outlook (module_utils/services/start_outlook.py) and the
unit's supervisor (module_utils/services/supervisor.py) import; code only the controller needs lives in
plugin_utils. Nothing in module_utils may import controller code.
"""
import ast
import re
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
PLUGINS = ROOT / "plugins"
MODULE_UTILS = PLUGINS / "module_utils"
PREFIX = "ansible_collections.sglang_ops.serving.plugins."
# The subpackages of module_utils, each importing only those before it (docs/architecture.md).
LAYERS = ["domain", "records", "host", "services"]
# start_outlook.py: the ETA and metrics file a host watcher updates every poll
# (docs/metrics.md), on the target like the watch itself.
ON_HOST_ENTRY_POINTS = sorted((PLUGINS / "modules").glob("*.py")) + [
    MODULE_UTILS / "services/start_watch.py", MODULE_UTILS / "services/start_outlook.py",
    MODULE_UTILS / "services/supervisor.py",
    # the supervised unit's OnFailure= handler (roles/sglang_service, <unit>-needed-human.service)
    MODULE_UTILS / "services/unit_failed.py"]


def _module_utils_files():
    return sorted(p for p in MODULE_UTILS.rglob("*.py") if p.stem != "__init__" and "__pycache__" not in p.parts)


def _name(path):
    """'host/probe' for plugins/module_utils/host/probe.py."""
    return path.relative_to(MODULE_UTILS).with_suffix("").as_posix()


def _collection_imports(path):
    """(kind, name) of every import of this collection in a file: ('module_utils', 'host/probe')."""
    found = set()
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
        modules = []
        if isinstance(node, ast.ImportFrom) and node.module and node.module.startswith(PREFIX):
            parts = node.module[len(PREFIX):].split(".")
            if parts[0] == "module_utils" and len(parts) == 2:   # from ...module_utils.host import a, b
                modules += [parts + [alias.name] for alias in node.names]
            else:
                modules.append(parts)
        elif isinstance(node, ast.Import):
            modules += [alias.name[len(PREFIX):].split(".") for alias in node.names if alias.name.startswith(PREFIX)]
        found.update((parts[0], "/".join(parts[1:])) for parts in modules)
    return found


def _module_utils_reached_from(entry_points):
    reached, todo = set(), list(entry_points)
    while todo:
        for kind, name in _collection_imports(todo.pop()):
            if kind == "module_utils" and name not in reached:
                reached.add(name)
                todo.append(MODULE_UTILS / (name + ".py"))
    return reached


def test_module_utils_files_all_live_in_a_layer():
    assert {_name(p).split("/")[0] for p in _module_utils_files()} == set(LAYERS)
    assert all(_name(p).count("/") == 1 for p in _module_utils_files())


def test_module_utils_layers_import_one_way():
    upward = []
    for path in _module_utils_files():
        layer = LAYERS.index(_name(path).split("/")[0])
        for kind, name in _collection_imports(path):
            if kind == "module_utils" and LAYERS.index(name.split("/")[0]) > layer:
                upward.append("%s imports %s" % (_name(path), name))
    assert upward == []


def test_every_module_utils_file_is_used_on_the_target():
    on_disk = {_name(p) for p in _module_utils_files()}
    reached = _module_utils_reached_from(ON_HOST_ENTRY_POINTS) | {
        _name(p) for p in ON_HOST_ENTRY_POINTS if MODULE_UTILS in p.parents}
    assert on_disk - reached == set(), "only the controller imports these: move them to plugin_utils"
    assert reached <= on_disk


def test_module_utils_never_imports_controller_code():
    controller = re.compile(r"^\s*(from|import)\s+(ansible\.(?!module_utils\b)\S+|"
                            r"ansible_collections\.sglang_ops\.serving\.plugins\.(plugin_utils|action|filter))", re.M)
    offenders = [_name(p) for p in _module_utils_files() if controller.search(p.read_text(encoding="utf-8"))]
    assert offenders == []


def _definitions(pattern):
    """Files of plugins/ whose text matches a definition."""
    rx = re.compile(pattern, re.M)
    return sorted(str(p.relative_to(ROOT)) for p in PLUGINS.rglob("*.py") if rx.search(p.read_text(encoding="utf-8")))


# Overrides turned into DetectorSettings other than by detector_settings.from_overrides
# (tests/unit/cli/test_settings_parse_point.py applies it to the tools of the checkout).
PARSED_ELSEWHERE = r"\.with_overrides\(|DetectorSettings\(\s*\*\*|dataclasses\.replace\(\s*DetectorSettings"


def test_detector_overrides_become_settings_in_one_place():
    """Every caller (the action, the supervisor's settings, the supervisor, the restart
    procedure, the incident report) turns overrides into DetectorSettings with from_overrides."""
    assert _definitions(PARSED_ELSEWHERE) == ["plugins/module_utils/domain/detector_settings.py"]
    assert _definitions(r"^def from_overrides\(") == ["plugins/module_utils/domain/detector_settings.py"]


def test_a_number_out_of_range_is_said_one_way():
    """One range checker (module_utils/domain/number_range.py) for the action's options, the
    detector settings and the supervisor's settings file."""
    assert _definitions(r"and at most %|\"at least\"|\"greater than\"|must be %s %") == [
        "plugins/module_utils/domain/number_range.py"]


def test_each_vocabulary_has_one_definition():
    assert _definitions(r"^FINAL_VERDICTS\s*=") == ["plugins/module_utils/domain/failure_classes.py"]
    assert _definitions(r"^VERDICTS\s*=") == ["plugins/module_utils/domain/failure_classes.py"]
    assert _definitions(r"^\s*def \w*duration\w*\((?!self)") == ["plugins/module_utils/domain/durations.py"]
    # and no formatter under another name: one value reads the same everywhere ('1h15m', never '75m00s')
    assert _definitions(r"%dm%02ds|%dh%02dm") == ["plugins/module_utils/domain/durations.py"]
    assert _definitions(r"(=|compile\()\s*r?\"Main process exited") == ["plugins/module_utils/domain/sglang_dialect.py"]
    assert _definitions(r"\(\"checkpoint shards\"") == ["plugins/module_utils/domain/sglang_dialect.py"]
    assert _definitions(r"\[DTPE\]P|\[TDPE\]P") == ["plugins/module_utils/domain/sglang_dialect.py"]
    assert _definitions(r"sglang::scheduler_") == ["plugins/module_utils/domain/sglang_dialect.py"]
    assert _definitions(r"\"sglang-trace/1\"") == ["plugins/module_utils/records/trace_format.py"]
    assert _definitions(r"^\s*def read_trace\(") == ["plugins/module_utils/records/trace_format.py"]
    assert _definitions(r"^class \w*TraceWriter") == ["plugins/module_utils/records/trace_format.py"]


PLUGIN_UTILS = PLUGINS / "plugin_utils"
# The subpackages of plugin_utils (controller only), each importing only those before it:
# shared helpers, the incident report, the restart (which writes reports).
CONTROLLER_LAYERS = ["shared", "report", "restart"]


def _plugin_utils_files():
    return sorted(p for p in PLUGIN_UTILS.rglob("*.py") if "__pycache__" not in p.parts)


def test_plugin_utils_files_all_live_in_a_layer():
    assert {p.relative_to(PLUGIN_UTILS).parts[0] for p in _plugin_utils_files()} == set(CONTROLLER_LAYERS)
    assert all(len(p.relative_to(PLUGIN_UTILS).parts) == 2 for p in _plugin_utils_files())


def test_plugin_utils_layers_import_one_way():
    upward = []
    for path in _plugin_utils_files():
        layer = CONTROLLER_LAYERS.index(path.relative_to(PLUGIN_UTILS).parts[0])
        for kind, name in _collection_imports(path):
            if kind == "plugin_utils" and CONTROLLER_LAYERS.index(name.split("/")[0]) > layer:
                upward.append("%s imports %s" % (path.relative_to(PLUGIN_UTILS), name))
            if kind in ("action", "filter", "modules"):
                upward.append("%s imports %s/%s" % (path.relative_to(PLUGIN_UTILS), kind, name))
    assert upward == []


# A reader holds a class or a function in mind at once: these are the most lines either may
# span in plugins/ (docstrings included).
CLASS_LINES = 300
FUNCTION_LINES = 60


def _too_long():
    found = []
    for path in sorted(PLUGINS.rglob("*.py")):
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            limit = (CLASS_LINES if isinstance(node, ast.ClassDef) else
                     FUNCTION_LINES if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)) else None)
            if limit is not None and node.end_lineno - node.lineno + 1 > limit:
                found.append("%s:%d %s (%d lines)" % (
                    path.relative_to(ROOT), node.lineno, node.name, node.end_lineno - node.lineno + 1))
    return found


def test_no_class_or_function_in_plugins_is_longer_than_a_reader_holds():
    assert _too_long() == []


def test_each_file_name_in_plugins_is_used_once():
    """A name says which file it is: the action plugin and the module it runs share theirs, as
    Ansible requires; no other two files of plugins/ do."""
    names = {}
    for path in PLUGINS.rglob("*.py"):
        if "__pycache__" not in path.parts:
            names.setdefault(path.name, []).append(str(path.relative_to(PLUGINS)))
    shared = {name: sorted(paths) for name, paths in names.items() if len(paths) > 1}
    action_and_module = {p.name for p in (PLUGINS / "action").glob("*.py")} & {p.name for p in (PLUGINS / "modules").glob("*.py")}
    assert {name: paths for name, paths in shared.items()
            if not (name in action_and_module and len(paths) == 2)} == {}


def test_the_replay_has_one_home_in_plugins():
    """The CLI's replay, the benchmarks and the report all replay through plugin_utils/shared/replay.py
    (tests/unit/cli/test_settings_parse_point.py checks the checkout's tools import it from there)."""
    assert _definitions(r"^def replay\(|^def assessments\(") == ["plugins/plugin_utils/shared/replay.py"]


def test_the_role_installs_every_layer_of_module_utils():
    """roles/sglang_service copies these subpackages to the host (and removes any other)."""
    role_vars = (ROOT / "roles" / "sglang_service" / "vars" / "main.yml").read_text(encoding="utf-8")
    installed = re.search(r"^_sglang_service_module_utils_packages: \[(.*)\]$", role_vars, re.M)
    assert installed and [p.strip() for p in installed.group(1).split(",")] == LAYERS
