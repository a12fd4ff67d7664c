# Task runner. Every target creates what it needs on first use (virtualenv, podman
# settings, the systemd test-host image), so a fresh clone needs nothing else.
SHELL := /bin/bash
VENV ?= .venv
PY := $(VENV)/bin/python
export PATH := $(CURDIR)/$(VENV)/bin:$(PATH)
export ANSIBLE_CONFIG := $(CURDIR)/ansible.cfg
# Molecule scenarios run by `make test`, in this order.
MOLECULE_SCENARIOS ?= default

.PHONY: help venv podman image unit lint molecule test demo bench bench-restart clean

help:
	@echo "make demo           restart the local demo host with an injected stall (README)"
	@echo "make test           unit tests, ansible-lint and the Molecule scenarios (README)"
	@echo "make bench          detector benchmark on the trace corpus, beside the reference watchers"
	@echo "make bench-restart  restart downtime, cold page cache against prewarmed"

venv: $(VENV)/.installed

$(VENV)/.installed: requirements.txt
	bin/bootstrap-venv $(VENV)
	@touch $@

podman: venv
	@bin/podman-setup

image: podman
	@tests/image/build

unit: venv
	$(PY) -m pytest -q tests/unit

lint: venv
	$(VENV)/bin/ansible-lint

molecule: image
	@set -e; for s in $(MOLECULE_SCENARIOS); do \
	  echo "== molecule test -s $$s"; \
	  . bin/podman-env; $(VENV)/bin/molecule test -s $$s; \
	done

test: unit lint molecule

demo: image
	bin/demo

bench: venv
	$(PY) bench/detector.py

bench-restart: image
	$(PY) bench/restart_downtime.py

clean:
	rm -rf $(VENV) .cache
