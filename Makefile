# The two commands of the README: `make run` (set up + main job) and `make test`.
# Everything installs into ./.venv; torch is pinned to the CPU build on disk.
PYTHON ?= python3.11
VENV ?= .venv
PY := $(VENV)/bin/python
PIP := $(PY) -m pip install --quiet --disable-pip-version-check

.PHONY: setup run smoke test test-slow bench clean

$(VENV)/.installed: pyproject.toml
	$(PYTHON) -m venv $(VENV)
	$(PIP) --upgrade pip
	$(PIP) torch==2.13.0
	$(PIP) -e '.[dev,pipeline,deepspeed]'
	touch $@

## setup: create .venv and install the package with its test tools
setup: $(VENV)/.installed

## run: the main job: the paper reproduction on the CPU default (mage reproduce, ~11 min on 2 cores)
run: setup
	$(VENV)/bin/mage validate
	$(VENV)/bin/mage reproduce

## smoke: the same pipeline on the smoke profile, in its own workspace (~1 min)
smoke: setup
	$(VENV)/bin/mage reproduce --profile smoke

## test: the fast test suite (what CI runs)
test: setup
	$(PY) -m pytest

## test-slow: the opt-in slow tests (statistical opponent checks, long analyses)
test-slow: setup
	$(PY) -m pytest -m slow

## bench: the benchmarks that print figures
bench: setup
	$(PY) benchmarks/bench_mcts.py
	$(PY) benchmarks/bench_sokoban.py
	$(PY) benchmarks/bench_cli.py
	$(PY) benchmarks/bench_flow.py

clean:
	rm -rf $(VENV) .pytest_cache .hypothesis
