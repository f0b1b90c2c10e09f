"""The cost-accuracy frontier: Pareto arithmetic by hand, and a tiny frontier run whose file matches its runs."""

from __future__ import annotations

import asyncio
import json
import pathlib

import pytest

from hieramas_jax.experiment.backend import Backend
from hieramas_jax.experiment.runner import run_table
from hieramas_jax.experiment.spec import TableSpec
from hieramas_jax.llm.client import LLMClient
from hieramas_jax.llm.endpoint import sim_endpoint
from hieramas_jax.experiment.frontier import frontier_specs, frontier_tag, run_frontier
from hieramas_jax.report import frontier
from hieramas_jax.sim.server import SimConfig, start_sim_in_thread


def _p(label, acc, cost):
  return {"label": label, "accuracy": acc, "mean_cost_usd": cost}


def test_pareto_front_and_where_a_frontier_lies():
  base = [_p("a", 80.0, 0.001), _p("b", 90.0, 0.01), _p("c", 85.0, 0.02), _p("d", 90.0, 0.02)]
  # c is dominated by b (more accurate, cheaper); d by b (as accurate, cheaper).
  assert [p["label"] for p in frontier.pareto_front(base)] == ["a", "b"]
  assert frontier.frontier_position([_p("h", 91.0, 0.005)], base) == "above"   # dominates b
  assert frontier.frontier_position([_p("h", 85.0, 0.005)], base) == "on"      # a trade-off between a and b
  assert frontier.frontier_position([_p("h", 79.0, 0.002), _p("i", 88.0, 0.03)], base) == "below"
  assert frontier.frontier_position([_p("h", 90.0, 0.01)], base) == "on"       # equal to b: not dominated
  assert frontier.frontier_position([], base) is None


def test_default_k_is_the_table1_cell_and_other_ks_are_tagged():
  assert frontier_tag(300.0) == "" and frontier_tag(0.0) == "k0" and frontier_tag(1000.0) == "k1000"
  specs = frontier_specs(["math"], ["gpt-5-mini"], [0.0, 300.0], ["published", "total_cost"])
  got = [(s.methods, s.tag, dict(s.method_options)) for s, _, _ in specs]
  assert got == [(("hieramas",), "k0", {"hieramas": {"reward_k": 0.0}}), (("hieramas",), "", {}),
                 (("hieramas_total_cost",), "k0", {"hieramas_total_cost": {"reward_k": 0.0}}),
                 (("hieramas_total_cost",), "", {})]


TINY = {"stage1_steps": 1, "stage1_batch": 2, "stage1_val_every": 1, "stage1_proposers": 2, "k_pool": 8,
        "stage2_graphs": 2, "stage2_epochs": 1, "stage2_batch": 4}


@pytest.mark.slow
@pytest.mark.timeout(1200)
def test_frontier_file_points_are_the_trained_runs_results(tmp_path):
  handle = start_sim_in_thread(SimConfig(seed=0))
  specs = frontier_specs(["mmlu_redux"], ["gpt-5-mini"], [0.0, 300.0], ["published"], train_limit=4, val_limit=2,
                         test_limit=3, options=TINY)

  async def go():
    endpoint = sim_endpoint(handle.base_url)
    async with LLMClient(endpoint) as client:
      backends = {0: Backend(client, endpoint, None)}
      out = await run_frontier(specs, backends, run_root=tmp_path / "runs", flags={}, max_queries=8, progress=False)
      base = await run_table(TableSpec(methods=("base",), benchmarks=("mmlu_redux",), pools=("gpt-5-mini",),
                                       setting="main", seeds=(0,), train_limit={"mmlu_redux": 4}, val_limit=2,
                                       test_limit=3), backends, run_root=tmp_path / "runs", flags={}, progress=False)
      return out, base

  try:
    (cells, ks, prov), base = asyncio.run(go())
  finally:
    handle.close()
  assert ks == {"hieramas-k0": 0.0, "hieramas": 300.0}
  frontier.write_frontier(frontier.frontier_record(cells, base["cells"], ks, prov), tmp_path)
  record = json.loads((tmp_path / "hieramas_frontier.json").read_text())
  (setting,) = record["settings"].values()
  assert [p["k"] for p in setting["hieramas"]] == [0.0, 300.0]
  for p in setting["hieramas"]:
    run_dir = pathlib.Path(p["run_dir"])
    summary = json.loads((run_dir / "summary.json").read_text())
    assert (p["accuracy"], p["mean_cost_usd"], p["n"]) == (summary["accuracy"], summary["mean_cost_usd"], 3)
    assert p["ci95"][0] <= p["accuracy"] <= p["ci95"][1]
    trained = (run_dir / "config.json").read_text()
    assert f'"reward_k": {p["k"]}' in trained and trained.count('"reward_k"') == 1  # trained with its k
  (b,) = setting["baselines"]
  assert b["label"] == "base" and setting["position"] in ("above", "on", "below") and not setting["left_out"]
  assert (tmp_path / "hieramas_frontier.png").stat().st_size > 1000
  md = (tmp_path / "hieramas_frontier.md").read_text()
  assert "## MMLU-Redux GPT-5-Mini" in md
  assert md.splitlines()[0] == "# HieraMAS cost-accuracy frontier - simulated pool (profile fitted)"


def test_a_frontier_of_one_recipe_is_not_captioned_as_both():
  """`--recipes=published` writes a frontier of one recipe: its record and the report's caption say which."""
  from hieramas_jax.report.frontier import recipes_phrase
  assert recipes_phrase(["published"]) == "the published recipe only"
  assert recipes_phrase(["total_cost"]) == "the total-cost recipe only"
  assert recipes_phrase(["published", "total_cost"]) == "both rewards"
