"""results/sim_sensitivity: orderings across the sim's aggregation profiles (hand-made records, a tiny run)."""

from __future__ import annotations

import json
import os
import subprocess
import sys

import pytest

from hieramas_jax.experiment.record import CellRecord
from hieramas_jax.paths import REPO_DIR
from hieramas_jax.report.sensitivity import sensitivity_markdown, sensitivity_record


def _cell(method, benchmark, pool, accuracy) -> CellRecord:
  return CellRecord(method=method, benchmark=benchmark, pool=pool, setting="main", seed=0, tag="", label=method, n=100,
                    n_correct=int(accuracy), accuracy=accuracy, cost_usd=0.0, prompt_tokens=0, completion_tokens=0,
                    n_calls=0, cached_calls=0, truncated_calls=0, usage_by_model={}, mean_cost_usd=0.0, training=None,
                    fit=None, loaded_from=None, sizes={}, timing={}, computed_by=[], run_dir="runs/x", outcomes={})


def _record(acc):
  cells = [_cell(m, b, p, a) for (m, b, p), a in acc.items()]
  return {"spec": {"methods": ["sc_cot", "debate", "hieramas"]}, "cells": {c.key: c.to_json() for c in cells}}


def test_orderings_hold_flip_or_tie_across_profiles():
  base = {("sc_cot", "math", "gpt-5-mini"): 90.0, ("debate", "math", "gpt-5-mini"): 88.0,
          ("hieramas", "math", "gpt-5-mini"): 92.0, ("sc_cot", "mmlu_redux", "gpt-5-mini"): 80.0,
          ("debate", "mmlu_redux", "gpt-5-mini"): 80.0, ("hieramas", "mmlu_redux", "gpt-5-mini"): 84.0}
  # Under high, debate overtakes SC+CoT on MATH and HieraMAS drops to debate's level on MMLU-Redux.
  high = {**base, ("debate", "math", "gpt-5-mini"): 91.0, ("hieramas", "mmlu_redux", "gpt-5-mini"): 80.0}
  rec = sensitivity_record({"low": _record(base), "fitted": _record(base), "high": _record(high)},
                           {"command": "x", "backend": "sim"})
  assert [r["method"] for r in rec["rows"]] == ["sc_cot", "debate", "hieramas"]
  status = {(o["a"], o["b"], o["where"]): o["status"] for o in rec["orderings"]}
  assert status[("sc_cot", "debate", "math/gpt-5-mini")] == "flips"        # +2 / +2 / -1
  assert status[("sc_cot", "debate", "mmlu_redux/gpt-5-mini")] == "tie"    # 0 everywhere
  avg = next(o for o in rec["orderings"] if (o["a"], o["b"], o["where"]) == ("sc_cot", "debate", "average"))
  assert avg["diff"] == {"low": 1.0, "fitted": 1.0, "high": -0.5} and avg["status"] == "flips"  # (2+0)/2, (-1+0)/2
  assert status[("debate", "hieramas", "mmlu_redux/gpt-5-mini")] == "unsettled"  # -4 / -4 / 0
  assert status[("sc_cot", "hieramas", "average")] == "holds"              # -3 / -3 / -1
  assert rec["n_hold"] + rec["n_flip"] + rec["n_unsettled"] + rec["n_tie"] == len(rec["orderings"]) == 3 * 3
  md = sensitivity_markdown(rec)
  assert "simulated pool" in md.splitlines()[0] and "**flips**" in md


# Slow (the script end to end in a subprocess, three profiles); the orderings' logic is in the fast tier above.
@pytest.mark.slow
def test_the_script_runs_three_profiles_on_a_tiny_config_and_refuses_a_real_endpoint(tmp_path):
  env = {**os.environ, "PYTHONPATH": str(REPO_DIR), "WANDB_MODE": "disabled"}
  cmd = [sys.executable, str(REPO_DIR / "experiments" / "sim_sensitivity.py"), "--methods=sc_cot,debate",
         "--benchmarks=math", "--pools=gpt-5-mini", "--limit=2", f"--out_dir={tmp_path}",
         f"--run_root={tmp_path / 'runs'}", "--wandb=false", "--progress=false", "--sim_process=false"]
  subprocess.run(cmd, check=True, env=env, capture_output=True, timeout=600)
  rec = json.loads((tmp_path / "sim_sensitivity_limit2.json").read_text())
  assert rec["profiles"] == ["low", "fitted", "high"]
  assert all(f":{p}:" in rec["endpoints"][p] for p in rec["profiles"])
  assert len(rec["orderings"]) == 2 and rec["provenance"]["flags"]["limit"] == 2
  bad = subprocess.run(cmd + ["--profiles=medium"], env=env, capture_output=True, text=True, timeout=600)
  assert bad.returncode == 2 and "medium" in bad.stderr
