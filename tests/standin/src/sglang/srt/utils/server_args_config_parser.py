"""`--config FILE.yaml` as SGLang 0.5.23 reads it, in the SGLang stand-in (test double).

Behaviour of the 0.5.23 wheel (sglang/srt/utils/server_args_config_parser.py), written
here from what it does: only an exact `--config PATH` pair is taken (at most one); the
file must end in .yaml or .yml and exist; its root must be a mapping; each entry
becomes `--<key as written>` with its value (a true store_true flag alone, a false one
dropped, other booleans as `true`/`false`, a list as its items, a mapping as JSON,
anything else as str()), and these come before the command line's own arguments, so
the command line wins. ValueError for every refusal, as there.

YAML is read with PyYAML when the venv has it (SGLang's own dependency); the stand-in
needs only the standard library, so without it a flat mapping of scalars is read:
comments, plain words, numbers, true/false/null, single-quoted and double-quoted
(JSON-escaped) strings, and flow lists or mappings written as JSON.
"""
import argparse
import json
import re
from pathlib import Path

_INT = re.compile(r"^[-+]?[0-9]+$")
_FLOAT = re.compile(r"^[-+]?([0-9]+\.[0-9]*|\.[0-9]+)([eE][-+]?[0-9]+)?$")


def _scalar(text):
    if text.startswith('"') or text[:1] in "[{":
        return json.loads(text)
    if text.startswith("'"):
        if not text.endswith("'") or len(text) < 2:
            raise ValueError("unterminated single-quoted string: %s" % text)
        return text[1:-1].replace("''", "'")
    if text in ("", "~", "null", "Null", "NULL"):
        return None
    if text in ("true", "True", "TRUE", "yes", "Yes", "YES", "on", "On", "ON"):     # YAML 1.1, as PyYAML
        return True
    if text in ("false", "False", "FALSE", "no", "No", "NO", "off", "Off", "OFF"):
        return False
    if _INT.match(text):
        return int(text)
    if _FLOAT.match(text):
        return float(text)
    return text


def _strip_comment(value):
    if value[:1] in "\"'":
        return value
    return re.split(r"\s+#", value, maxsplit=1)[0].strip()


def _load_flat_yaml(text):
    data = {}
    for number, line in enumerate(text.splitlines(), 1):
        if not line.strip() or line.lstrip().startswith("#"):
            continue
        if line[0].isspace() or ":" not in line:
            raise ValueError("line %d: the SGLang stand-in reads only a flat YAML mapping without PyYAML" % number)
        key, _, value = line.partition(":")
        data[key.strip()] = _scalar(_strip_comment(value.strip()))
    return data or None


def load_yaml(text):
    try:
        import yaml
    except ImportError:
        return _load_flat_yaml(text)
    return yaml.safe_load(text)


class ConfigArgumentMerger:
    def __init__(self, parser):
        self.store_true_keys = set()
        for action in parser._actions:
            if isinstance(action, argparse._StoreTrueAction):
                self.store_true_keys |= {action.dest} | {o[2:].replace("-", "_") for o in action.option_strings
                                                         if o.startswith("--")}

    def merge_config_with_args(self, cli_args):
        found = [i for i, arg in enumerate(cli_args) if arg == "--config"]
        if not found:
            return cli_args
        if len(found) > 1:
            raise ValueError("Multiple config files specified! Only one allowed.")
        at = found[0]
        if at == len(cli_args) - 1:
            raise ValueError("No config file specified after --config flag!")
        config = self._read(cli_args[at + 1])
        return self._to_args(config) + cli_args[:at] + cli_args[at + 2:]

    @staticmethod
    def _read(file_path):
        path = Path(file_path)
        if path.suffix.lower() not in (".yaml", ".yml"):
            raise ValueError(f"Config file must be YAML format, got: {path.suffix}")
        if not path.exists():
            raise ValueError(f"Config file not found: {file_path}")
        data = load_yaml(path.read_text(encoding="utf-8"))
        if data is None:
            return {}
        if not isinstance(data, dict):
            raise ValueError("Config file must contain a dictionary at root level")
        return data

    def _to_args(self, config):
        args = []
        for key, value in config.items():
            flag = f"--{key}"
            if isinstance(value, bool):
                if key.replace("-", "_") in self.store_true_keys:
                    args += [flag] if value else []
                else:
                    args += [flag, str(value).lower()]
            elif isinstance(value, list):
                args += [flag] + [str(item) for item in value] if value else []
            elif isinstance(value, dict):
                args += [flag, json.dumps(value)]
            else:
                args += [flag, str(value)]
        return args
