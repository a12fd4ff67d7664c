"""The probe's options are defined once (ProbeRequest): the module's argument spec is made
from it, its DOCUMENTATION says the same, and the controller only sends names it knows."""
import dataclasses

import pytest
import yaml

from ansible_collections.sglang_ops.serving.plugins.module_utils.host import probe as probe_mod
from ansible_collections.sglang_ops.serving.plugins.modules import sglang_probe
from ansible_collections.sglang_ops.serving.plugins.plugin_utils.shared import remote_host_access

DOC_OPTIONS = yaml.safe_load(sglang_probe.DOCUMENTATION)["options"]
SPEC = probe_mod.argument_spec()


def test_every_request_field_is_an_option_of_the_module_and_nothing_else():
    assert list(SPEC) == [f.name for f in dataclasses.fields(probe_mod.ProbeRequest)]
    assert set(DOC_OPTIONS) == set(SPEC)


@pytest.mark.parametrize("name", sorted(SPEC))
def test_documentation_states_the_type_default_aliases_and_choices_of_the_spec(name):
    doc, spec = DOC_OPTIONS[name], SPEC[name]
    for key in ("type", "default", "aliases", "choices"):
        assert doc.get(key) == spec.get(key), "%s: DOCUMENTATION says %s=%r, the spec %r" % (
            name, key, doc.get(key), spec.get(key))
    assert doc.get("description"), name


def test_the_defaults_of_a_request_are_the_defaults_of_the_module():
    req = probe_mod.ProbeRequest()
    for name, spec in SPEC.items():
        assert getattr(req, name) == spec.get("default"), name


def test_module_params_become_a_request_field_by_field():
    params = {name: spec.get("default") for name, spec in SPEC.items()}
    params.update(unit="u.service", since_epoch_s=12.5, port=30001, host="::1", stacks=True, model="k2")
    req = probe_mod.request_from_params(params)
    assert (req.unit, req.since_epoch_s, req.stacks, req.model) == ("u.service", 12.5, True, "k2")
    assert req.url() == "http://[::1]:30001"
    assert probe_mod.ProbeRequest(base_url="http://h:1", port=2).url() == "http://h:1"
    assert probe_mod.ProbeRequest().url() is None


def test_request_problems_name_each_bad_value():
    assert probe_mod.request_problems(probe_mod.ProbeRequest(unit="u")) == []
    problems = probe_mod.request_problems(probe_mod.ProbeRequest(pid=1, starts=-1, holders=True, pyspy_timeout_s=0))
    assert problems == ["starts must be 0 or more, got -1", "holders need unit (a systemd unit's cgroup), not pid",
                        "pyspy_timeout_s must be positive, got 0"]


def test_the_controller_sends_only_probe_options():
    args = {"unit": "u", "port": 30001, "host": "127.0.0.1", "completion_model": "k2", "api_key_file": "/etc/k.yaml"}
    sent = remote_host_access.probe_args(args)
    assert set(sent) <= set(SPEC)
    assert sent["model"] == "k2" and sent["completion"] == "auto"
    assert remote_host_access.probe_args(args, serves_api=False)["completion"] == "never"
    with pytest.raises(ValueError, match="not sglang_probe options: want_venv"):
        remote_host_access.checked_probe_args({"unit": "u", "want_venv": "/x"})
