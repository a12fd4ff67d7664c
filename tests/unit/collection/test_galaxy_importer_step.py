"""`bin/collection import` (make sanity): galaxy-importer as Galaxy and Automation Hub run
it, offline and without containers, failing on any finding but the sanity ignore file's."""
import os
import subprocess

from galaxy_importer import config as importer_config

from .conftest import ROOT

COLLECTION = os.path.join(ROOT, "bin", "collection")
IMPORTER_CONFIG = os.path.join(ROOT, ".config", "galaxy-importer.cfg")
IGNORE_FILE_WARNING = "WARNING: Ignore files skip ansible-test sanity tests, found ignore-2.19.txt with 5 statement(s)"


def findings(tmp_path, *lines):
    log = tmp_path / "importer.log"
    log.write_text("\n".join(lines) + "\n")
    result = subprocess.run([COLLECTION, "import-findings", str(log)], capture_output=True, text=True, check=True)
    return result.stdout.splitlines()


def test_a_clean_import_with_the_sanity_ignore_file_has_no_finding(tmp_path):
    assert findings(tmp_path, "Importing with galaxy-importer 0.4.44", "Loading role sglang",
                    "Linting collection via ansible-lint 26.10.1...", "...ansible-lint run complete",
                    IGNORE_FILE_WARNING, "Importer processing completed successfully") == []


def test_lint_findings_and_errors_are_findings(tmp_path):
    lint = "WARNING: roles/sglang/tasks/main.yml:3: fqcn[action-core]: Use FQCN for builtin module actions (copy)."
    error = "ERROR: The import failed for the following reason: Invalid collection metadata."
    ee = ("WARNING: Error when checking meta/execution-environment.yml for dependency files: "
          "[Errno 2] No such file or directory: 'bindep.txt'")
    assert findings(tmp_path, lint, IGNORE_FILE_WARNING, error, ee) == [lint, error, ee]


def test_a_warning_that_only_resembles_the_ignore_file_one_is_a_finding(tmp_path):
    other = IGNORE_FILE_WARNING + " and a lint finding"
    assert findings(tmp_path, other) == [other]


def test_importer_reads_its_settings_offline_without_ansible_test(monkeypatch):
    monkeypatch.setenv("GALAXY_IMPORTER_CONFIG", IMPORTER_CONFIG)
    monkeypatch.setattr(importer_config, "FILE_LOCATIONS", [])
    cfg = importer_config.Config(config_data=importer_config.ConfigFile.load())
    assert cfg.run_ansible_test is False
    assert cfg.offline_ansible_lint is True
    assert cfg.run_ansible_lint is True
    assert cfg.run_ansible_doc is True
    assert cfg.check_changelog is True
