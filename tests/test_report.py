"""The report layer: statistics against hand computations, the tables' layout from a hand-made record, regret."""

from __future__ import annotations

import json
import math
import os
import shutil
import subprocess
import sys

import numpy as np
import pytest

from hieramas_jax.experiment.record import CellRecord
from hieramas_jax.paths import REPO_DIR, RESULTS_DIR
from hieramas_jax.report import ablations
from hieramas_jax.report import regret as regret_lib
from hieramas_jax.report.stats import (bootstrap_ci, error_bars, mcnemar_exact_p, mean_sd, paired_difference,
                                       wilson_interval)
from hieramas_jax.report.table1 import derive, table1_markdown, table3_markdown, table4_markdown, table11_markdown


def test_mcnemar_exact_p_by_hand():
  a = [1, 1, 0, 1, 0, 1, 1, 1, 1, 0]
  b = [0, 1, 0, 0, 0, 1, 0, 1, 1, 1]
  # Discordant pairs: a only at 0, 3, 6 (3), b only at 9 (1): p = 2 P[Bin(4, 1/2) <= 1] = 2 (1 + 4) / 16.
  p, only_a, only_b = mcnemar_exact_p(np.array(a, bool), np.array(b, bool))
  assert (only_a, only_b) == (3, 1) and p == pytest.approx(10 / 16)
  assert mcnemar_exact_p([True, False], [True, False]) == (1.0, 0, 0)
  assert mcnemar_exact_p([True] * 6, [False] * 6)[0] == pytest.approx(2 / 64)


@pytest.mark.parametrize("n", [4, 90, 250])
def test_wilson_interval_stays_within_0_and_100_and_holds_its_point(n):
  for k in (0, 1, n - 1, n):
    lo, hi = wilson_interval(k, n)
    assert 0.0 <= lo <= 100.0 * k / n <= hi <= 100.0
  assert wilson_interval(n, n)[1] == 100.0 and wilson_interval(0, n)[0] == 0.0
  (below, above) = error_bars([100.0, 0.0, 50.0], [wilson_interval(n, n), wilson_interval(0, n), (-3.0, 104.0)])
  assert min(below + above) >= 0.0 and above[0] == 0.0 and below[1] == 0.0
  assert below[2] == 50.0 and above[2] == 50.0  # an interval past the scale is drawn up to it, not beyond


def test_paired_bootstrap_interval_matches_the_exact_bootstrap_distribution():
  # 10 paired queries, the method right and the reference wrong on 3, equal on the others: the bootstrap
  # mean of the differences is Binomial(10, 0.3) / 10. Its 2.5% and 97.5% quantiles by hand:
  # P[X <= 0] = 0.7^10 = 0.028 > 0.025 -> 0.0; P[X <= 5] = 0.953 < 0.975 <= P[X <= 6] = 0.989 -> 0.6.
  cdf = np.cumsum([math.comb(10, k) * 0.3**k * 0.7**(10 - k) for k in range(11)])
  assert cdf[0] > 0.025 and cdf[5] < 0.975 <= cdf[6]
  a = [1, 1, 1, 0, 0, 1, 1, 0, 1, 0]
  b = [0, 0, 0, 0, 0, 1, 1, 0, 1, 0]
  out = paired_difference(a, b, scale=100.0, n_boot=40_000, seed=1)
  assert out["delta"] == pytest.approx(30.0)
  assert out["ci"] == [pytest.approx(0.0), pytest.approx(60.0)]
  assert out["p_mcnemar"] == pytest.approx(2 / 8) and (out["only_a"], out["only_b"]) == (3, 0)
  assert bootstrap_ci([1.0] * 5) == (1.0, 1.0)
  assert mean_sd([70.0, 72.0, 74.0]) == (72.0, pytest.approx(2.0)) and mean_sd([5.0]) == (5.0, None)


def _cell(label, benchmark, pool, correct, cost, seed=0, setting="main", training=None):
  """A complete runner cell record (`CellRecord`, the report's input) with the given outcomes."""
  return CellRecord(label=label, method=label.partition("-")[0], tag=label.partition("-")[2], benchmark=benchmark,
                    pool=pool, setting=setting, seed=seed, n=len(correct), n_correct=sum(correct),
                    accuracy=100.0 * sum(correct) / len(correct), cost_usd=sum(cost), prompt_tokens=0,
                    completion_tokens=0, n_calls=0, cached_calls=0, truncated_calls=0, usage_by_model={},
                    mean_cost_usd=sum(cost) / len(cost), training=training, fit=None, loaded_from=None,
                    sizes={"train": 0, "val": 0, "test": len(correct)}, timing={}, computed_by=[], run_dir="runs/x",
                    outcomes={"ids_sha256": "same", "correct": "".join(map(str, correct)), "cost_usd": cost}).to_json()


def _record(cells, setting="main", seeds=(0,)):
  key = lambda c: CellRecord.from_json(c).key
  return {"spec": {"methods": sorted({c["method"] for c in cells}),
                   "benchmarks": sorted({c["benchmark"] for c in cells}),
                   "pools": ["gpt-5-mini", "qwen3-80b"], "setting": setting, "seeds": list(seeds),
                   "train_limit": {"math": None}, "val_limit": None, "test_limit": None},
          "endpoint": "sim:seed0:abc", "cells": {key(c): c for c in cells},
          "provenance": {"backend": "sim", "label": "simulated pool (x)", "seed": 0, "command": "python reproduce.py",
                         "flags": {"sim_profile": "high"}}}


def test_table1_has_the_paper_layout_published_figures_intervals_and_the_paired_comparison():
  cells = [_cell("base", "math", p, [1, 0, 1, 1], [0.1] * 4) for p in ("gpt-5-mini", "qwen3-80b")]
  cells += [_cell("hieramas", "math", p, [1, 1, 1, 1], [0.05] * 4, training={"cost_usd": 1.5}) for p in
            ("gpt-5-mini", "qwen3-80b")]
  derived = derive(_record(cells))
  md = table1_markdown(derived)
  assert md.splitlines()[0] == "# Table 1 - simulated pool (profile high)"  # the run's --sim_profile
  assert "| Method | Comp. | MATH GPT-5-Mini | MATH Qwen3-80B | Avg. |" in md
  base_row = next(l for l in md.splitlines() if l.startswith("| Base†"))
  assert "**75.00 [" in base_row and "· 77.78" in base_row and "· 74.44" in base_row  # ours beside the paper's
  paired = next(l for l in md.splitlines() if l.startswith("| Base |"))
  assert "-25.00" in paired and "p=1" in paired  # one discordant pair: McNemar p = 1
  assert derived["cells"]["base|math|gpt-5-mini|main|seed0"]["vs_hieramas"]["only_b"] == 1
  assert "python reproduce.py" in md
  cost = table4_markdown(derived)
  assert "| HieraMAS | $0.2000 · paper $1.52 | $0.2000 |" in cost
  train = table11_markdown(derived)
  assert "| HieraMAS | $1.5000 · paper $2.03 | $1.5000 |" in train and "| Base |" not in train


def test_the_cost_tables_show_the_spend_ledger_billed_reserved_and_unbilled_apart():
  cells = [_cell("base", "math", p, [1, 0], [0.1] * 2, seed=s) for p in ("gpt-5-mini", "qwen3-80b") for s in (0, 1)]
  record = _record(cells, seeds=(0, 1))
  spend = {"spent_usd": 1.25, "reserved_usd": 0.5, "estimated_unbilled_usd": 0.125, "total_usd": 1.875,
           "paid_calls": 40, "attempts": 43, "max_usd": 5.0, "left_usd": 3.125}
  record["backends"] = {"0": {"name": "sim:seed0", "spend": spend}, "1": {"name": "sim:seed1", "spend": spend}}
  derived = derive(record)
  for md in (table4_markdown(derived), table11_markdown(derived)):
    lines = [l for l in md.splitlines() if l.startswith("Spend ledger")]
    assert lines == ["Spend ledger of the run root (seeds 0, 1; every cell, seed and rerun in that root): $1.8750 of a "
                     "--max_usd cap of $5.0000 = billed $1.2500 + reserved $0.5000 (in flight when the run ended) + "
                     "estimated unbilled $0.1250 (sent and never answered, at its upper estimate); 40 paid calls of "
                     "43 attempts."]  # one ledger, shown once for both seeds
    assert "no money was spent" in md  # the sim's dollars are the price table's
  record["backends"]["1"] = {"name": "sim:seed1", "spend": {**spend, "spent_usd": 2.0, "total_usd": 2.625}}
  assert sum(l.startswith("Spend ledger") for l in table4_markdown(derive(record)).splitlines()) == 2
  del record["backends"]
  assert "Spend ledger" not in table4_markdown(derive(record))  # a file from before the ledger: no line


def test_several_seeds_show_mean_and_sd_and_table3_has_the_pools_as_columns():
  cells = [_cell("gdesigner", "mmlu_redux", p, c, [0.1] * 2, seed=s, setting="generalization")
           for p in ("gpt-5-mini", "qwen3-80b") for s, c in ((0, [1, 1]), (1, [1, 0]), (2, [0, 0]))]
  derived = derive(_record(cells, setting="generalization", seeds=(0, 1, 2)))
  group = derived["groups"]["gdesigner|mmlu_redux|gpt-5-mini|generalization"]
  assert group["accuracy_mean"] == pytest.approx(50.0) and group["accuracy_sd"] == pytest.approx(50.0)
  md = table3_markdown(derived)
  assert "| Method | GPT-5-Mini | Qwen3-80B | Avg. |" in md
  assert "| GDesigner | 50.00 ± 50.00 (3 seeds) | 50.00 ± 50.00 (3 seeds) | 50.00 |" in md


def test_regret_of_three_rows_and_its_paired_interval():
  assert regret_lib.regret(1.0, 0.9, 0.0) == (pytest.approx(0.1), None)
  assert regret_lib.regret(0.2, 0.4, -0.8)[0] == pytest.approx(-0.2)  # learning beats the best static one
  assert regret_lib.regret(0.3, None, 0.1) == (None, "no learned result")
  assert "does not beat random" in regret_lib.regret(0.1, 0.0, 0.1)[1]
  # Cost 0: reward 1 when solved, -1 when not. Oracle 4/4, learned 3/4, random 1/4 -> O = 1, L = 0.5, R = -0.5.
  cells = [_cell("static_search", "math", "gpt-5-mini", [1, 1, 1, 1], [0.0] * 4),
           _cell("hieramas", "math", "gpt-5-mini", [1, 1, 1, 0], [0.0] * 4),
           _cell("random_config", "math", "gpt-5-mini", [1, 0, 0, 0], [0.0] * 4)]
  record = regret_lib.regret_record(_record(cells))
  (entry,) = record["entries"].values()
  assert (entry["oracle_reward"], entry["learned_reward"], entry["random_reward"]) == (1.0, 0.5, -0.5)
  assert entry["regret"] == pytest.approx(1 / 3) and entry["meets_goal"] is False
  lo, hi = entry["regret_ci95"]
  assert lo <= 1 / 3 <= hi
  assert "| math | gpt-5-mini | 0 | 0.500 | 1.000 | -0.500 | n/a | 0.33 [" in regret_lib.regret_markdown(record)
  assert entry["single_call"] == {} and entry["learned_beats_best_single_call"] is None
  # Single-call rows on the same queries are listed; CoT (3/4 at cost 0: reward 0.5) ties HieraMAS, Base wins.
  cells += [_cell("base", "math", "gpt-5-mini", [1, 1, 1, 1], [0.0] * 4),
            _cell("cot", "math", "gpt-5-mini", [1, 1, 0, 1], [0.0] * 4)]
  (entry,) = regret_lib.regret_record(_record(cells))["entries"].values()
  assert entry["single_call"]["base"]["reward"] == 1.0 and entry["single_call"]["cot"]["reward"] == 0.5
  assert entry["best_single_call"] == "base" and entry["learned_beats_best_single_call"] is False
  assert "| -0.500 | base 1.000 | 0.33 [" in regret_lib.regret_markdown(regret_lib.regret_record(_record(cells)))


def test_stage1_recipe_comparison_picks_the_higher_mean_validation_reward(tmp_path):
  def write(name, val_reward, test_acc):
    fit = {"stage1_best": {"step": 10, "val_mean_reward": val_reward, "val_accuracy": 0.9, "val_mean_cost": 0.001},
           "stage2": {"contrastive_queries": 3}}
    (tmp_path / name).write_text(json.dumps({"accuracy": test_acc, "cost_usd": 1.0, "fit": fit}))

  # MATH: the total-cost recipe wins on validation; MMLU-Redux: the published one, by more. Test accuracy says
  # the opposite on MMLU-Redux and must not matter.
  write("hieramas_math_gpt-5-mini.json", 0.25, 93.0)
  write("hieramas_math_gpt-5-mini_total_cost.json", 0.45, 91.0)
  write("hieramas_mmlu_redux_gpt-5-mini.json", 0.70, 80.0)
  write("hieramas_mmlu_redux_gpt-5-mini_total_cost.json", 0.30, 99.0)
  write("hieramas_math_qwen3-80b.json", 0.9, 90.0)  # no variant run here: left out of the comparison
  record = ablations.stage1_recipe_record(tmp_path, {"backend": "sim", "command": "test"})
  assert [(r["benchmark"], r["pool"]) for r in record["rows"]] == [("math", "gpt-5-mini"), ("mmlu_redux", "gpt-5-mini")]
  assert record["mean_val_reward"]["published"] == pytest.approx(0.475)
  assert record["mean_val_reward"]["total-cost"] == pytest.approx(0.375)
  assert record["winner"] == "published"
  md = ablations.stage1_recipe_markdown(record)
  assert "simulated pool" in md.splitlines()[0] and "Higher mean validation reward: **published**" in md


def test_hieramas_cells_say_what_was_learned(tmp_path):
  r = {"accuracy": 90.0, "cost_usd": 0.5, "mean_active_roles": 1.0, "num_roles": 8, "config": {"k_pool": 0},
       "graph_density": {"mean": 0.5, "distinct_graphs": 3},
       "llm_preferences": {"proposer": {"skip": 10, "gpt-5-nano": 3, "qwen3-8b": 4},
                           "synthesizer": {"skip": 7}},
       "fit": {"stage1_best": {"step": 20}, "stage2": {"queries": 512, "contrastive_queries": 0,
                                                        "skipped": "0 of 512 training queries show any reward"}}}
  (tmp_path / "hieramas_mmlu_redux_gpt-5-mini.json").write_text(json.dumps(r))
  (tmp_path / "hieramas_mmlu_redux_gpt-5-mini_k50.json").write_text(json.dumps(r))  # an ablation: not a main cell
  record = ablations.hieramas_cells_record(tmp_path, {"backend": "sim", "command": "test"})
  [row] = record["rows"]
  assert (row["benchmark"], row["pool"], row["k"]) == ("mmlu_redux", "gpt-5-mini", 200)  # k_pool 0: the default K
  assert row["classifier"] == "not fit (left at initialisation)" and row["contrastive_queries"] == 0
  assert row["most_picked"] == {"proposer": "qwen3-8b", "synthesizer": None}
  md = ablations.hieramas_cells_markdown(record)
  assert "| 0 (512) | - | not fit (left at initialisation) | qwen3-8b / - |" in md
  assert "Classifier trained" not in md  # never "trained" of a classifier never fit
  assert "| **did not learn**: never fit: 0 of 512 training queries" in md


def test_table4_shows_the_share_of_cut_calls_and_a_real_endpoint_is_named_not_called_a_prediction():
  cells = [_cell("base", "math", p, [1, 0, 1, 1], [0.1] * 4) for p in ("gpt-5-mini", "qwen3-80b")]
  cells[0].update(n_calls=8, truncated_calls=2)  # a quarter of the calls cut by max_tokens
  cells[1].update(n_calls=4, truncated_calls=0)
  record = _record(cells)
  record["endpoint"] = "pool:local_smoke:0123456789ab"
  record["provenance"] = {**record["provenance"], "backend": "pool:local_smoke:0123456789ab"}
  derived = derive(record)
  assert derived["groups"]["base|math|gpt-5-mini|main"]["truncation_rate"] == 0.25
  cost = table4_markdown(derived)
  assert "| Base | $0.4000 · 25.0% cut | $0.4000 |" in cost
  md = table1_markdown(derived)
  assert "prediction" not in md and "Every row was measured on `pool:local_smoke:0123456789ab`." in md
  assert "**paper** = the published figure" in md  # the cell legend holds on every backend
  assert md.splitlines()[0] == "# Table 1 - pool:local_smoke:0123456789ab"


# Slow (make_report twice over every table); the fast tier builds each table from a small record above.
@pytest.mark.slow
def test_make_report_twice_leaves_every_table_byte_identical(tmp_path):
  """Regenerating when nothing but the time (and the command) changed rewrites no table file."""
  results = tmp_path / "results"
  shutil.copytree(RESULTS_DIR, results, ignore=shutil.ignore_patterns("report"))

  def run(out):
    subprocess.run([sys.executable, str(REPO_DIR / "experiments" / "make_report.py"), f"--results={results}",
                    f"--out_dir={tmp_path / out}", "--samples=false"], check=True, cwd=REPO_DIR,
                   capture_output=True, timeout=300, env={**os.environ, "PYTHONPATH": str(REPO_DIR)})
    return {f.name: (f.read_bytes(), f.stat().st_mtime_ns) for f in results.iterdir() if f.is_file()}

  first = run("a")
  second = run("b")
  assert first == second  # same bytes, not even rewritten


def test_hieramas_test_summary_is_the_same_bytes_in_any_completion_order():
  """items.jsonl holds queries in the order they finished, which varies between runs: the summary may
  not (ties among the most frequent graphs, key order, float sums were order-dependent)."""
  from hieramas_jax.report import hieramas as hieramas_report  # pylint: disable=import-outside-toplevel
  rng = np.random.default_rng(0)
  roles = ["solver", "inspector"]
  graphs = [[[0, 1]], [[1, 0]], [[0, 1], [1, 0]], []]
  records = []
  for i in range(40):
    edges = graphs[i % len(graphs)]  # four graphs, ten queries each: every count ties
    records.append({"item_id": f"MATH/{i:03d}", "correct": bool(i % 3), "cost_usd": float(rng.uniform(1e-4, 1e-2)),
                    "trace": {"graph_density": len(edges) / 2, "graph_edges": edges, "graph_index": i % 4,
                              "graph_kind": ("dense", "sparse", "chain")[i % 3],
                              "choices": [["gpt-5-mini", "qwen3-80b"], ["skip", "gpt-5-mini"]],
                              "active_roles": roles[: 1 + i % 2]}})
  want = json.dumps(hieramas_report.test_summary(records, roles, 300.0))
  for seed in range(5):
    shuffled = [records[j] for j in np.random.default_rng(seed).permutation(len(records))]
    assert json.dumps(hieramas_report.test_summary(shuffled, roles, 300.0)) == want
    assert hieramas_report.chosen(shuffled) == hieramas_report.chosen(records)


def test_table3_prints_the_untrained_check_and_the_cost_pointer_names_the_files_written():
  cells = [_cell("gdesigner", "mmlu_redux", p, [1] * 40, [0.1] * 40, setting="generalization")
           for p in ("gpt-5-mini", "qwen3-80b")]
  for c in cells:  # untrained: half right on the same queries
    c["untrained"] = {"accuracy": 50.0, "cost_usd": 1.0, "n_calls": 40,
                      "outcomes": {"ids_sha256": "same", "correct": "".join("10" * 20)}}
  md = table3_markdown(derive(_record(cells, setting="generalization")))
  assert "Did training beat the untrained method?" in md
  assert "| GDesigner | **learned**: +50.00 [" in md and "| 2 of 2 |" in md
  beyond = [_cell(m, "math", p, [1, 0], [0.1] * 2) for m in ("base", "maas") for p in ("gpt-5-mini", "qwen3-80b")]
  derived = derive(_record(beyond))
  assert "`table4.md` and `table11.md`" in table1_markdown(derived)  # a plain table naming a beyond-paper method
  assert "`table4_extended_limit3.md` and `table11_extended_limit3.md`" in table1_markdown(derived, "_extended_limit3")
