# topobind — top-level targets. Area-specific targets live in mk/*.mk and add
# themselves to TEST_PREREQS / BENCH_TARGETS / DEMO_STEPS.
SHELL := /bin/bash
VENV  := .venv
PY    := $(VENV)/bin/python
TOPOBIND := $(VENV)/bin/topobind
export PATH := $(CURDIR)/$(VENV)/bin:$(CURDIR)/launchers:$(PATH)
# The offline mirror of upstream archives (Spack, Flux; docs/install.md): only make spack-check
# reads it, and skips with a line naming the archives when it is absent.
SHARED ?= $(or $(TOPOBIND_OFFLINE_MIRROR),$(TOPOBIND_SHARED),$(CURDIR)/../shared)
export TOPOBIND_SHARED := $(SHARED)

TEST_PREREQS :=
BENCH_TARGETS :=
DEMO_STEPS :=

.PHONY: all setup demo test test-fast lint bench help
all: help

help:
	@echo "make setup   install Debian packages (root), the .venv and build the C parts (kernels, rank step)"
	@echo "make demo    install everything and run the main job"
	@echo "make test    install everything and run the whole test suite"
	@echo "make test-fast  the tests not marked slow: no topobind, kernel, MPI, Slurm or VM subprocess (~30 s)"
	@echo "make bench   run every benchmark, then one summary; results as JSON under results/bench/"

setup:
	@bash scripts/setup.sh

include $(sort $(wildcard mk/*.mk))

lint: setup
	$(VENV)/bin/ruff check src tests reframe_tests site_configs
	$(VENV)/bin/ruff format --check src tests reframe_tests site_configs

test: setup $(TEST_PREREQS)
	$(VENV)/bin/ruff check src tests reframe_tests site_configs
	$(PY) -m pytest -q -ra tests

# The edit loop (issue 23 item 6): in-process tests only, after 'make setup'; 'make test' runs all.
test-fast:
	$(PY) -m pytest -q -ra -m "not slow" tests

demo: setup $(DEMO_STEPS)

# Every benchmark runs, whatever an earlier one measured (scripts/bench-all); one summary at
# the end (results/bench/summary.json); exit status 1 only after all ran.
bench: setup
	@$(PY) scripts/bench-all --make "$(MAKE)" $(BENCH_TARGETS)
