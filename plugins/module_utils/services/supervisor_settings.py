"""The settings file of the unit's supervisor (one JSON object, written by the
sglang_service role), proven whole before anything is started: every field's type and
range, or one ValueError naming the file, the field and what is wrong with it.

A bad setting is not something a restart fixes: the supervisor exits with the
supervisor_config status (failure_classes.py), which is in the unit's
RestartPreventExitStatus=.
"""
import json
import os
import urllib.parse
from dataclasses import dataclass, field, fields

from ansible_collections.sglang_ops.serving.plugins.module_utils.host import service_defaults
from ansible_collections.sglang_ops.serving.plugins.module_utils.records import safe_files, start_records
from ansible_collections.sglang_ops.serving.plugins.module_utils.domain import observe_only_decision, weight_cache
from ansible_collections.sglang_ops.serving.plugins.module_utils.domain.detector_settings import from_overrides
from ansible_collections.sglang_ops.serving.plugins.module_utils.domain.number_range import range_words

_NOTHING = object()
# The role writes a few KiB; a file over this is refused unread.
SETTINGS_MAX_BYTES = 1 << 20


def _text(value):
    if not isinstance(value, str):
        return "must be a string"
    if not value.strip():
        return "must not be empty"
    if any(ord(ch) < 32 or ord(ch) == 127 for ch in value):
        return "must not hold control characters"
    return None


def _number(minimum, inclusive):
    return lambda value: range_words(value, minimum, low_ok=inclusive)


def _integer(minimum):
    return lambda value: range_words(value, minimum, integer=True)


def _boolean(value):
    return None if isinstance(value, bool) else "must be true or false"


def _path(value):
    return _text(value) or (None if os.path.isabs(value) else "must be an absolute path")


def _optional(check):
    return lambda value: None if value is None else check(value)


def _http_url(value):
    why = _text(value)
    if why:
        return why
    try:
        url = urllib.parse.urlsplit(value)
        port = url.port
    except ValueError as e:
        return "must be an http(s) URL with a valid port (%s)" % e
    if url.scheme not in ("http", "https") or not url.hostname:
        return "must be an http:// or https:// URL with a host"
    if port is None and ":" in url.netloc.rsplit("]", 1)[-1]:
        return "must be an http(s) URL with a valid port"
    return None


def _detector(value):
    if not isinstance(value, dict):
        return "must be a JSON object of detector settings"
    try:
        from_overrides(value)
    except (TypeError, ValueError) as e:
        return "is invalid: %s" % e
    return None


@dataclass
class SupervisorSettings:
    """The settings file the sglang_service role writes (one JSON object)."""
    unit: str = service_defaults.UNIT_NAME
    # The inventory name of the host: the `host` label of the start metrics (docs/metrics.md).
    host: object = None
    base_url: str = service_defaults.base_url()
    model: str = "default"
    api_key_file: object = None
    starts_dir: str = start_records.DEFAULT_ROOT
    keep_starts: int = 20
    poll_s: float = 10.0
    detector: dict = field(default_factory=dict)
    # Each poll without a final verdict moves systemd's start timeout this far ahead.
    extend_timeout_s: float = 600.0
    # Hard bound on a start, 0 for none (TimeoutStartSec= is the safety net).
    start_timeout_s: float = 0.0
    stop_timeout_s: float = 60.0
    liveness_interval_s: float = 30.0
    liveness_timeout_s: float = 60.0
    liveness_misses: int = 3
    stacks: bool = True
    venv_bin: object = None
    nvidia_smi: str = "nvidia-smi"
    # node_exporter's textfile folder for the start metrics, None for none.
    metrics_dir: object = None
    # Rule 4 (module_utils/services/observe_only.py): the ceiling of a start that runs observe-only is
    # the larger of this and observe_only_ceiling_factor times the host's usual time to ready.
    observe_only_min_ceiling_s: float = observe_only_decision.MIN_CEILING_S
    observe_only_ceiling_factor: float = observe_only_decision.CEILING_FACTOR
    # What the unit runs: "engine" (the SGLang server) or "weight_cache" (SGLang's weight
    # cache daemon, ready when every GPU's ready file names a live pid; no HTTP).
    serves: str = weight_cache.SERVES_ENGINE
    # The daemon's ready-file template (SGLANG_WEIGHT_CACHE_READY_TEMPLATE, with
    # {device_uuid}): the daemon unit's readiness, and for an engine the daemon it attaches
    # to (waited for before the engine starts). None: no weight cache.
    weight_cache_ready_template: object = None
    # An engine beside a later SGLang's daemon: fewer deliveries left than this and its start
    # is cold, as the restart playbook's option of the same name (one role variable for both).
    weight_cache_min_deliveries: int = weight_cache.DEFAULT_MIN_DELIVERIES

    @classmethod
    def load(cls, path):
        """Settings from a JSON file; ValueError with one line naming the file, the field
        and the problem."""
        try:
            data = safe_files.read_json_file(path, SETTINGS_MAX_BYTES)
        except safe_files.UnsafeEntry as e:
            raise ValueError("cannot read the settings file: %s" % e)
        except OSError as e:
            raise ValueError("cannot read the settings file %s: %s" % (path, e.strerror))
        except ValueError as e:
            raise ValueError("the settings file %s is not JSON: %s" % (path, e))
        return cls.from_dict(data, path)

    @classmethod
    def from_dict(cls, data, path="<settings>"):
        if not isinstance(data, dict):
            raise ValueError("the settings file %s must hold a JSON object, not %s" % (path, _json_type(data)))
        known = {f.name for f in fields(cls)}
        unknown = sorted(set(data) - known)
        if unknown:
            raise ValueError("unknown setting(s) in %s: %s (known: %s)" % (path, ", ".join(unknown), ", ".join(sorted(known))))
        for name in sorted(data):
            why = CHECKS[name](data[name])
            if why:
                raise ValueError("%s in %s %s, got %s" % (name, path, why, _shown(data[name])))
        if data.get("serves") == weight_cache.SERVES_WEIGHT_CACHE and not data.get("weight_cache_ready_template"):
            raise ValueError("serves in %s is %r, which needs weight_cache_ready_template (the daemon's ready files)"
                             % (path, weight_cache.SERVES_WEIGHT_CACHE))
        return cls(**data)


CHECKS = {
    "unit": _text,
    "host": _optional(_text),
    "base_url": _http_url,
    "model": _text,
    "api_key_file": _optional(_path),
    "starts_dir": _path,
    "keep_starts": _integer(1),
    "poll_s": _number(0, inclusive=False),
    "detector": _detector,
    "extend_timeout_s": _number(0, inclusive=False),
    "start_timeout_s": _number(0, inclusive=True),
    "stop_timeout_s": _number(0, inclusive=False),
    "liveness_interval_s": _number(0, inclusive=False),
    "liveness_timeout_s": _number(0, inclusive=False),
    "liveness_misses": _integer(1),
    "stacks": _boolean,
    "venv_bin": _optional(_path),
    "nvidia_smi": _text,
    "metrics_dir": _optional(_path),
    "observe_only_min_ceiling_s": _number(0, inclusive=False),
    "observe_only_ceiling_factor": _number(1, inclusive=True),
    "serves": lambda value: None if value in weight_cache.SERVES else "must be one of %s" % ", ".join(weight_cache.SERVES),
    "weight_cache_ready_template": _optional(lambda value: _path(value) or (
        None if weight_cache.DEVICE_UUID_FIELD in value else "must contain %s" % weight_cache.DEVICE_UUID_FIELD)),
    "weight_cache_min_deliveries": _integer(0),
}


def _json_type(value):
    for kind, name in ((bool, "a boolean"), (str, "a string"), (dict, "an object"), (list, "an array"),
                       ((int, float), "a number")):
        if isinstance(value, kind):
            return name
    return "null" if value is None else type(value).__name__


def _shown(value):
    text = json.dumps(value, default=str)
    return "%s (%s)" % (text if len(text) <= 80 else text[:77] + "...", _json_type(value))
