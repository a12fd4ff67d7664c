# Task runner. Every target creates what it needs on first use (virtualenv, podman
# settings, the systemd test-host image), so a fresh clone needs nothing else.
SHELL := /bin/bash
VENV ?= .venv
PY := $(VENV)/bin/python
export PATH := $(CURDIR)/$(VENV)/bin:$(PATH)
export ANSIBLE_CONFIG := $(CURDIR)/ansible.cfg
# Molecule scenarios run by `make test`, in this order.
MOLECULE_SCENARIOS ?= default restart

.PHONY: help venv podman image unit detector lint molecule test demo bench bench-restart clean

help:
	@echo "make demo           restart the local demo host with an injected stall (README)"
	@echo "make test           unit tests, the detector over every trace, ansible-lint and the Molecule scenarios (README)"
	@echo "make detector       the detector on every labelled trace, as recorded and perturbed (fails on any miss)"
	@echo "make bench          detector benchmark on the trace corpus, beside the reference watchers, and perturbed"
	@echo "make bench-restart  restart downtime, cold page cache against prewarmed"

venv: $(VENV)/.installed

$(VENV)/.installed: requirements.txt
	bin/bootstrap-venv $(VENV)
	@touch $@

# Podman settings this machine needs (runtime, ulimits): .cache/podman/, never /etc.
podman:
	@bin/podman-setup

# The systemd test-host image, rebuilt only when tests/image/ changes.
image: podman
	@tests/image/build

unit: venv
	$(PY) -m pytest -q tests/unit

# Every labelled trace through the replay, as recorded (score.py) and under each
# perturbation of perturb.py: any false restart, miss or late verdict fails.
DETECTOR_TRACES := ../shared/traces tests/traces tests/traces/real
detector: venv
	$(PY) ../shared/tools/score.py --cmd 'bin/sglang-ops replay {trace}' $(DETECTOR_TRACES)
	$(PY) ../shared/tools/perturb.py --quiet --jobs 2 --cwd . $(DETECTOR_TRACES)

lint: venv
	$(VENV)/bin/ansible-lint

# Every scenario builds on the shared base .config/molecule/config.yml (molecule/README.md).
molecule: venv image
	@set -e; . bin/podman-env; for s in $(MOLECULE_SCENARIOS); do \
	  echo "== molecule test -s $$s"; start=$$SECONDS; \
	  $(VENV)/bin/molecule --base-config .config/molecule/config.yml test -s $$s; \
	  echo "== molecule test -s $$s passed in $$((SECONDS - start)) s"; \
	done

test: unit detector lint molecule

demo: venv image
	bin/demo

bench: venv
	$(PY) bench/detector.py

bench-restart: venv image
	$(PY) bench/restart_downtime.py

clean:
	rm -rf $(VENV) .cache
