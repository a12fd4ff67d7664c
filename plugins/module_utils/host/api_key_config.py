"""The API key in SGLang's --config YAML file: written by the sglang_service role, read by
SGLang itself (PyYAML, through prepare_server_args), by the unit's log filter and by the
probe's completion request.

The file's one setting is the line `api-key: "<key>"`, the key as a JSON string: JSON's
double-quoted strings are also YAML's, so every reader gets the same characters back
without a shell, systemd or YAML escaping layer of its own. The setting is named
`api-key` because SGLang 0.5.23 turns each YAML key into `--<key>` as written.
"""
import json

from ansible_collections.sglang_ops.serving.plugins.module_utils.records import safe_files

SETTING = "api-key"
# SGLang's --config file the role writes: a few lines; a file over this is refused unread.
CONFIG_MAX_BYTES = 1 << 20


def problem(key):
    """Why `key` cannot be the API key, or None. Printable ASCII fits an HTTP header and
    every file it passes through; a leading dash would read as a flag to argparse."""
    if not isinstance(key, str):
        return "must be a string"
    for ch in key:
        if not " " <= ch <= "~":
            return "holds the character %s; only printable ASCII is allowed" % (
                "U+%04X" % ord(ch) if ch.isprintable() else repr(ch).strip("'"))
    if key.startswith("-"):
        return "starts with '-', which SGLang's argument parser would read as a flag"
    return None


def render(key):
    """The setting line for `key` (no trailing newline); ValueError for a key `problem` refuses."""
    why = problem(key)
    if why:
        raise ValueError("the API key " + why)
    return "%s: %s" % (SETTING, json.dumps(key))


def read_config_text(path):
    """The text of the --config file at path, a regular file read within CONFIG_MAX_BYTES;
    OSError (safe_files.UnsafeEntry naming why) when it cannot be."""
    return safe_files.read_file(path, CONFIG_MAX_BYTES).decode("utf-8")


def parse(text):
    """The key from the text of a file `render` wrote; None when it holds none."""
    prefix = SETTING + ":"
    for line in text.splitlines():
        if line.startswith(prefix):
            return json.loads(line[len(prefix):].strip())
    return None


def read_api_key(path):
    """(key or None, reason or None) from the --config file at `path`."""
    if not path:
        return None, None
    try:
        return parse(read_config_text(path)) or None, None
    except OSError as e:
        return None, "API key file unreadable: %s" % e.strerror
    except ValueError:
        return None, "API key file holds no valid api-key line"
