# What playbooks/upgrade.yml does with a host, decided from what runs on it (the server's
# MainPID and its venv), what the unit file says (ExecStart's venv) and the record an
# unfinished upgrade of the host left. Documented in sglang_upgrade_plan.yml and
# sglang_running_venv.yml beside this file.
from ansible.errors import AnsibleFilterError

from ansible_collections.sglang_ops.serving.plugins.module_utils.host.systemd_unit import venv_prefix


def _check_probe(probe, name):
    if not isinstance(probe, dict) or not isinstance(probe.get("unit_state"), dict):
        raise AnsibleFilterError("%s needs sglang_probe's result with unit_state and unit_processes" % name)


def sglang_running_venv(probe):
    """The venv the unit's main process runs SGLang from (read off its command line, also
    after the supervisor's `--`), or None when no main process runs. probe: sglang_probe's
    result with unit_state and unit_processes."""
    _check_probe(probe, "sglang_running_venv")
    main_pid = probe["unit_state"].get("main_pid")
    if not main_pid:
        return None
    cmdline = next((p.get("cmdline") for p in probe.get("unit_processes") or () if p.get("pid") == main_pid), None)
    return venv_prefix(cmdline) if cmdline else None


def _named(venv, versions):
    if not venv:
        return "nothing (no main process runs)"
    return "SGLang %s from %s" % ((versions or {}).get(venv) or "of an unreadable release", venv)


def sglang_upgrade_plan(probe, host, to_version, to_venv, versions=None, record=None, record_path="the upgrade record"):
    """{action, from_venv, from_version, unit_venv, running_venv, say}.

    probe: sglang_probe's result with unit_state and unit_processes; versions: {venv: release
    or None}; record: what an unfinished upgrade of this host wrote before it changed anything
    ({to_version, to_venv, from_version, from_venv, ...}), or None.

    action: upgrade (from what runs), resume (the record's upgrade: its kept files stand for
    the release it ran), left_alone (it runs to_version already, unit and server alike) or
    stop (half-done in a way this run cannot take over; say names the host and the state)."""
    _check_probe(probe, "sglang_upgrade_plan")
    versions = versions or {}
    to_version = str(to_version)
    unit_venv = probe["unit_state"].get("venv")
    running = sglang_running_venv(probe)
    plan = {"unit_venv": unit_venv, "running_venv": running}
    state = "its unit runs %s (ExecStart), its server runs %s" % (_named(unit_venv, versions), _named(running, versions))
    if record:
        rec_to, rec_from = str(record.get("to_version")), record.get("from_venv")
        known = {rec_from, record.get("to_venv")}
        if rec_to != to_version or record.get("to_venv") != to_venv:
            return dict(plan, action="stop", say=(
                "%s: an upgrade to %s (in %s) from %s is unfinished there (%s): %s; run the upgrade to %s again, "
                "which finishes it or rolls it back to %s, before upgrading to %s"
                % (host, rec_to, record.get("to_venv"), record.get("from_version"), record_path, state, rec_to,
                   record.get("from_version"), to_version)))
        if unit_venv not in known or (running is not None and running not in known):
            return dict(plan, action="stop", say=(
                "%s: the unfinished upgrade from %s to %s recorded in %s does not match the host: %s; put the host on "
                "one release (playbooks/site.yml or restart.yml), then remove %s"
                % (host, record.get("from_version"), rec_to, record_path, state, record_path)))
        return dict(plan, action="resume", from_venv=rec_from, from_version=str(record.get("from_version")), say=(
            "%s: resumes the upgrade from %s to %s that an earlier run left half-done (%s): %s"
            % (host, record.get("from_version"), to_version, record_path, state)))
    if running is not None and running != unit_venv:
        return dict(plan, action="stop", say=(
            "%s is half-upgraded: %s, and no upgrade of this host left a record (%s); restart it on its unit "
            "(playbooks/restart.yml) or put its unit back (playbooks/site.yml), then upgrade"
            % (host, state, record_path)))
    from_version = versions.get(unit_venv) or "unknown"
    plan.update(from_venv=unit_venv, from_version=from_version)
    if from_version == to_version:
        return dict(plan, action="left_alone", say="%s: its unit runs %s already, left alone" % (host, _named(unit_venv, versions)))
    return dict(plan, action="upgrade", say="%s: runs %s; upgrade to %s in %s" % (host, _named(unit_venv, versions), to_version, to_venv))


class FilterModule:
    def filters(self):
        return {"sglang_upgrade_plan": sglang_upgrade_plan, "sglang_running_venv": sglang_running_venv}
