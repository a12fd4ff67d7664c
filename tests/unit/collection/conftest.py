"""The collection as a user installs it: the tarball built from this checkout, installed
into an empty collections path (as bin/collection does for ansible-test)."""
import os
import subprocess
import sys

import pytest

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.dirname(os.path.realpath(__file__)))))
BIN = os.path.dirname(sys.executable)


def checkout_env(**extra):
    """The environment without the checkout's ansible.cfg, whose collections_path leads back here."""
    env = {k: v for k, v in os.environ.items() if k != "ANSIBLE_CONFIG"}
    env.update(extra)
    return env


@pytest.fixture(scope="session")
def installed_collections(tmp_path_factory):
    """The folder holding ansible_collections/sglang_ops/serving, installed from a fresh tarball."""
    dist = tmp_path_factory.mktemp("dist")
    subprocess.run([os.path.join(BIN, "ansible-galaxy"), "collection", "build", "--output-path", str(dist), ROOT],
                   capture_output=True, text=True, check=True, env=checkout_env())
    (tarball,) = dist.glob("sglang_ops-serving-*.tar.gz")
    installed = tmp_path_factory.mktemp("installed")
    subprocess.run([os.path.join(BIN, "ansible-galaxy"), "collection", "install", "--force", "--no-deps",
                    "-p", str(installed), str(tarball)],
                   capture_output=True, text=True, check=True,
                   env=checkout_env(ANSIBLE_COLLECTIONS_PATH=str(installed)))
    return installed
