"""--dry_run against real runs on the embedded sim: the estimate reproduces what a run spends."""

from __future__ import annotations

import asyncio
import json

import pytest

from hieramas_jax.experiment.backend import Backend
from hieramas_jax.experiment.dry_run import estimate, render
from hieramas_jax.experiment.runner import run_table
from hieramas_jax.experiment.spec import TableSpec
from hieramas_jax.llm.client import LLMClient
from hieramas_jax.llm.endpoint import sim_endpoint
from hieramas_jax.llm.registry import MODELS
from hieramas_jax.sim.server import SimConfig, start_sim_in_thread

METHODS = ("base", "cot", "sc", "debate")


@pytest.fixture(scope="module")
def sim():
  handle = start_sim_in_thread(SimConfig(seed=0))
  yield handle
  handle.close()


def _run(sim, tmp_path, test_limit, name):
  spec = TableSpec(methods=METHODS, benchmarks=("mmlu_redux",), pools=("gpt-5-mini",), setting="main", seeds=(0,),
                   train_limit={"mmlu_redux": 4}, val_limit=2, test_limit=test_limit)

  async def main():
    endpoint = sim_endpoint(sim.base_url)
    async with LLMClient(endpoint) as client:
      return await run_table(spec, {0: Backend(client, endpoint, None)}, run_root=tmp_path / name, flags={},
                             max_queries=16, progress=False)

  table = asyncio.run(main())
  out = tmp_path / f"results-{name}"
  out.mkdir()
  (out / "table1.json").write_text(json.dumps(table))
  return spec, table, out


def test_a_dry_run_reproduces_the_spend_of_the_run_it_estimates_and_scales_within_ten_percent(sim, tmp_path):
  registry = {m: (s.price_in, s.price_out) for m, s in MODELS.items()}
  spec40, table40, ref = _run(sim, tmp_path, 40, "ref")
  # Same cells, same sizes: the estimate is the run's own spend, to the cent and below.
  estimates, reference = estimate(spec40, registry, results_dir=ref)
  by_key = {e.key: e for e in estimates}
  for key, cell in table40["cells"].items():
    e = by_key[key]
    assert e.found and e.inference[0] == cell["n_calls"]
    assert e.inference[1] + e.inference[2] == cell["prompt_tokens"] + cell["completion_tokens"]
    assert e.inference[3] == pytest.approx(cell["cost_usd"], rel=1e-9)
  # Other prices: every model's tokens repriced (here gpt-5-mini at twice its price).
  doubled = dict(registry, **{"gpt-5-mini": tuple(2 * p for p in registry["gpt-5-mini"])})
  again, _ = estimate(spec40, doubled, results_dir=ref)
  for e in again:
    assert e.inference[3] == pytest.approx(2 * by_key[e.key].inference[3], rel=1e-9)  # one-model cells
  # Scaled: an estimate for 20 queries from the 40-query run, against a real 20-query run: within 10%.
  spec20, table20, _ = _run(sim, tmp_path, 20, "small")
  scaled, _ = estimate(spec20, registry, results_dir=ref)
  est_total = sum(e.inference[3] for e in scaled)
  real_total = sum(c["cost_usd"] for c in table20["cells"].values())
  assert abs(est_total - real_total) <= 0.10 * real_total, (est_total, real_total)
  text = render(scaled, reference, "test")
  assert "ESTIMATE" in text and "TOTAL" in text and "simulated pool (profile fitted)" in text


def test_a_cell_without_a_simulated_reference_is_named_not_guessed(tmp_path):
  spec = TableSpec(methods=("base",), benchmarks=("math",), pools=("gpt-5-mini",), setting="main", seeds=(0,),
                   train_limit={}, val_limit=None, test_limit=5)
  (tmp_path / "table1.json").write_text(json.dumps({"cells": {}}))
  estimates, reference = estimate(spec, {}, results_dir=tmp_path)
  assert not estimates[0].found
  assert "no simulated reference for 1 cell(s)" in render(estimates, reference, "x")
