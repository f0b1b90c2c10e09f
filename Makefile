# hieramas-jax. `make reproduce-table1` and `make test` each install what they need.
SHELL := /bin/bash
PYTHON ?= python3
VENV ?= .venv
PY := $(VENV)/bin/python
SEED ?= 0
export WANDB_MODE ?= offline
export HF_HUB_OFFLINE := 1
export TRANSFORMERS_OFFLINE := 1

.PHONY: install sandbox-tools test reproduce-table1 reproduce-table3 regret calibrate bench bench-table1 sim-server clean-cache

# torch==2.13.0 comes first: it is a CPU build on local disk; without it sentence-transformers
# would pull a multi-GB CUDA build.
$(VENV)/.installed: setup.cfg requirements.lock
	$(PYTHON) -m venv $(VENV)
	$(VENV)/bin/pip install -q --upgrade pip
	$(VENV)/bin/pip install -q torch==2.13.0
	$(VENV)/bin/pip install -q -c requirements.lock -e '.[test]'
	touch $@

install: $(VENV)/.installed sandbox-tools

# bubblewrap isolates HumanEval+ programs (hieramas_jax/benchmarks/sandbox.py). Installed with apt-get
# where this user may (root, or passwordless sudo); elsewhere one warning, and the sandbox runs its
# fallback mode (it says so again at run time). Does nothing when bwrap is already there.
sandbox-tools:
	@if ! command -v bwrap >/dev/null 2>&1; then \
	  if [ "$$(id -u)" = 0 ]; then sudo=""; elif command -v sudo >/dev/null 2>&1; then sudo="sudo -n"; \
	  else sudo=none; fi; \
	  if [ "$$sudo" != none ] && command -v apt-get >/dev/null 2>&1; then \
	    export DEBIAN_FRONTEND=noninteractive; \
	    $$sudo apt-get install -y -q bubblewrap >/dev/null 2>&1 \
	      || { $$sudo apt-get update -q >/dev/null 2>&1 && $$sudo apt-get install -y -q bubblewrap >/dev/null 2>&1; } \
	      || true; \
	  fi; \
	  command -v bwrap >/dev/null 2>&1 \
	    || echo "warning: bubblewrap (bwrap) is not installed and apt-get could not install it here;" \
	            "HumanEval+ programs will run WITHOUT isolation (install the 'bubblewrap' package)" >&2; \
	fi

test: install
	$(PY) -m pytest tests

reproduce-table1: install
	$(PY) experiments/reproduce_table1.py --seeds=$(SEED)

reproduce-table3: install
	$(PY) experiments/reproduce_table1.py --setting=generalization --benchmarks=mmlu_redux --seeds=$(SEED)

regret: install
	$(PY) experiments/oracle_regret.py --seed=$(SEED) --pools=gpt-5-mini,qwen3-80b

calibrate: install
	$(PY) experiments/calibrate_sim.py --seed=$(SEED)

bench: install
	$(PY) experiments/bench_executor.py
	$(PY) experiments/bench_scoring.py
	$(PY) experiments/bench_sandbox.py
	$(PY) experiments/bench_cache.py
	$(PY) experiments/bench_encoder.py

bench-table1: install
	$(PY) experiments/bench_table1.py

sim-server: install
	$(PY) -m hieramas_jax.sim.server --seed=$(SEED)

clean-cache:
	rm -rf .cache
