# Task runner. Every target creates what it needs on first use (system packages, virtualenv, podman
# settings, the systemd test-host image), so a fresh clone needs nothing else.
SHELL := /bin/bash
VENV ?= .venv
PY := $(VENV)/bin/python
export PATH := $(CURDIR)/$(VENV)/bin:$(PATH)
export ANSIBLE_CONFIG := $(CURDIR)/ansible.cfg
# Molecule scenarios run by `make test`: "a+b" runs lanes a and b at the same time, a lane
# "c,d" runs c then d (bin/molecule-scenarios; README, "Testing").
MOLECULE_SCENARIOS ?= default+fleet+restart+weights+inputs+ee

.PHONY: help system-packages venv podman image unit detector alerts lint collection sanity units molecule ee ee-test test demo bench bench-eta bench-restart bench-supervisor clean

help:
	@echo "make demo           restart the local demo host with an injected stall (README)"
	@echo "make test           unit tests, the detector over every trace, ansible-lint, the collection checks and the Molecule scenarios (README)"
	@echo "make detector       the detector on every labelled trace, as recorded and perturbed (fails on any miss)"
	@echo "make collection     build the collection tarball and list what is inside"
	@echo "make bench          detector benchmark on the trace corpus, beside the reference watchers, and perturbed; ETA error and metrics write time"
	@echo "make bench-eta      ETA error and range coverage on pairs of starts without load conditions (bench/eta_pairs.py)"
	@echo "make bench-restart  restart downtime: cold, prewarmed and warm (the weight cache daemon kept)"
	@echo "make bench-supervisor  the unit supervisor's own CPU per poll and memory, on the stand-in with 8 ranks"

# The Debian packages the system-level targets need (podman, runc, debootstrap, promtool,
# haproxy, python3-venv), installed when missing as root; a normal user is told which.
system-packages:
	@bin/system-packages

venv: $(VENV)/.installed

$(VENV)/.installed: requirements.txt
	bin/bootstrap-venv $(VENV)
	@touch $@

# Podman settings this machine needs (runtime, ulimits): .cache/podman/, never /etc.
podman:
	@bin/podman-setup

# The systemd test-host image, rebuilt only when tests/image/ changes.
image: system-packages podman
	@tests/image/build

# UNIT_TESTS: a part of them (make unit UNIT_TESTS='tests/unit/standin -k real'). The tests
# that compare with the real pinned SGLang build its venv on first use (tests/sglang_real/setup,
# the real_sglang_python fixture of tests/conftest.py): they run on a fresh clone, never skip.
UNIT_TESTS ?= tests/unit
unit: venv
	$(PY) -m pytest -q $(UNIT_TESTS)

# Every labelled trace of the repository through the replay, as recorded (bench/score.py)
# and under each perturbation of bench/perturb.py: any false restart, miss or late
# verdict fails (docs/trace-format.md has the rules).
DETECTOR_TRACES := tests/traces tests/traces/corpus tests/traces/real
detector: venv
	$(PY) bench/score.py --cmd 'bin/sglang-ops replay {trace}' $(DETECTOR_TRACES)
	$(PY) bench/perturb.py --quiet --jobs 2 $(DETECTOR_TRACES)

# The alert rules of monitoring/ checked and unit-tested by promtool (Debian's
# `prometheus` package).
ALERT_RULES := monitoring/sglang-ops.rules.yml
alerts: system-packages
	promtool check rules $(ALERT_RULES)
	promtool test rules monitoring/sglang-ops.rules.test.yml

# ANSIBLE_HOME in .cache: ansible-lint puts its cache's collections first in the
# collections path, so a copy of this collection left in ~/.ansible would shadow the checkout.
lint: venv
	ANSIBLE_HOME=$(CURDIR)/.cache/ansible-lint $(VENV)/bin/ansible-lint

# The collection as users install it (bin/collection): the tarball, then ansible-test
# on a copy installed from it into an empty collections path, and galaxy-importer on
# the tarball as Galaxy and Automation Hub run it.
collection: venv
	bin/collection build

sanity: collection
	bin/collection sanity
	bin/collection import

units: collection
	bin/collection units

# Every scenario builds on the shared base .config/molecule/config.yml (molecule/README.md).
molecule: system-packages venv image ee
	@VENV=$(VENV) bin/molecule-scenarios $(MOLECULE_SCENARIOS)

# The execution environment (execution-environment.yml), built offline by ee/build and
# tagged by the hash of its inputs; ee-test runs the restart inside it with
# ansible-navigator and compares it with the same run from the checkout (Molecule
# scenario ee; docs/execution-environment.md).
ee: system-packages venv podman
	@VENV=$(VENV) ee/build > /dev/null

ee-test: ee image
	@VENV=$(VENV) bin/molecule-scenarios ee

# The unit tests (about 9 min of CPU on a fresh clone) and the checks (detector, alerts, lint, the
# collection's sanity and units) run beside the Molecule scenarios; their output goes to
# .cache/unit-tests.log and .cache/checks.log, and their ends are shown when all three are
# done. The checks that wait on no clock of their own (the detector's replays run on trace
# time, promtool, ansible-lint, ansible-test sanity and galaxy-importer are static; about
# 320 s of CPU together, the detector two processes at once) run at nice 10, so that they
# do not take the two cores from the scenarios' first minutes (seven hosts created and
# converged at once, on every lane's critical path) and finish in the CPU the scenarios
# leave idle while their cases wait (molecule/README.md, "Time in make test"). Not 19: a
# replay still has bench/scoring's 120-second limit, and at 19 a busy machine could starve
# one that takes 2 s alone. The unit tests and the collection's units keep the normal
# priority: some wait on real processes with timeouts. The execution environment is built
# first: its build writes the collection tarball that the sanity check also builds.
UNIT_LOG := .cache/unit-tests.log
CHECKS_LOG := .cache/checks.log
test: system-packages venv image ee
	@mkdir -p .cache; echo "== unit tests in the background, output in $(UNIT_LOG)"; \
	$(MAKE) --no-print-directory unit > $(UNIT_LOG) 2>&1 & unit_pid=$$!; \
	echo "== checks (detector alerts lint sanity units) in the background, output in $(CHECKS_LOG)"; \
	{ nice -n 10 $(MAKE) --no-print-directory detector alerts lint sanity && \
	  $(MAKE) --no-print-directory units; } > $(CHECKS_LOG) 2>&1 & checks_pid=$$!; \
	VENV=$(VENV) bin/molecule-scenarios $(MOLECULE_SCENARIOS); molecule=$$?; \
	wait $$checks_pid; checks=$$?; wait $$unit_pid; unit=$$?; \
	echo "== checks (end of $(CHECKS_LOG))"; tail -n 25 $(CHECKS_LOG); \
	grep -a -E '^(make: \*\*\*|(fail|missed|late) |ERROR: )' $(CHECKS_LOG) || true; \
	[ $$checks -eq 0 ] || echo "== checks failed (exit $$checks): $(CHECKS_LOG)"; \
	echo "== unit tests (end of $(UNIT_LOG))"; tail -n 15 $(UNIT_LOG); \
	grep -a -E '^(FAILED|ERROR) ' $(UNIT_LOG) || true; \
	[ $$unit -eq 0 ] || echo "== unit tests failed (exit $$unit): $(UNIT_LOG)"; \
	[ $$molecule -eq 0 ] && [ $$checks -eq 0 ] && [ $$unit -eq 0 ]

demo: system-packages venv image
	bin/demo

bench: venv
	$(PY) bench/detector.py
	$(PY) bench/eta.py

# The ETA on pairs of recorded starts (history -> current) with their load conditions removed:
# error at 25/50/75 % and how often the line's range holds the true time, tuning and held-out.
bench-eta: venv
	$(PY) bench/eta_pairs.py

bench-restart: venv image
	$(PY) bench/restart_downtime.py

bench-supervisor: venv
	$(PY) bench/supervisor_cost.py

clean:
	rm -rf $(VENV) .cache
