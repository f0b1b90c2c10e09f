"""The runner, end to end against the simulated pool over real HTTP: every method fits and solves, a fitted
state reloads to the same answers, a killed table resumes to the same table, a changed data file refuses."""

from __future__ import annotations

import asyncio
import dataclasses
import json
import shutil

import pytest

from hieramas_jax.benchmarks import data as data_lib
from hieramas_jax.experiment.backend import Backend
from hieramas_jax.experiment.rundir import from_repo
from hieramas_jax.experiment.runner import TablePlanError
from hieramas_jax.experiment.runner import run_table
from hieramas_jax.experiment.spec import TableSpec
from hieramas_jax.llm.cache import ResponseCache
from hieramas_jax.llm.client import LLMClient
from hieramas_jax.llm.endpoint import sim_endpoint
from hieramas_jax.llm.registry import get_pool
from hieramas_jax.methods.api import RunContext
from hieramas_jax.methods.registry import known_methods, make_method
from mas_fakes import Counting
import tiny_reproduction as tiny

# Every method fits (JAX compiles included) in the module's first test: minutes on a busy 2-core machine.
pytestmark = [pytest.mark.slow, pytest.mark.timeout(1800)]

# Tiny budgets: each learned method takes a few real training steps on a few queries.
TINY = {
    "gdesigner": {"iterations": 2, "batch_size": 2},
    "masrouter": {"epochs": 1, "max_batches": 2, "batch_size": 2},
    "aflow": {"rounds": 3},
    "static_search": {"budget": 700, "num_random_graphs": 3, "min_items": 3, "max_search_items": 9},
    "random_config": {"num_random_graphs": 3},
    "hieramas": tiny.TINY_HIERAMAS,  # the session's tiny reproduction's budget: its cell is reused
    "debate": {},
}
TRAINABLE = ("gdesigner", "masrouter", "aflow", "static_search", "hieramas")


@pytest.fixture(scope="module")
def sim(session_sim):
  return session_sim


def _spec(methods, *, test=3, **kwargs):
  return TableSpec(methods=tuple(methods), benchmarks=("mmlu_redux",), pools=("gpt-5-mini",), setting="main",
                   seeds=(0,), train_limit={"mmlu_redux": 6}, val_limit=3, test_limit=test,
                   method_options={m: TINY[m] for m in methods if TINY.get(m)}, **kwargs)


async def _table(sim, spec, run_root, *, cache_dir=None, max_queries=8, counting=None):
  endpoint = sim_endpoint(sim.base_url)
  cache = ResponseCache(cache_dir) if cache_dir else None
  try:
    async with LLMClient(endpoint, cache=cache) as client:
      wrapped = Counting(client) if counting is None else counting
      wrapped.client = client
      table = await run_table(spec, {0: Backend(wrapped, endpoint, cache)}, run_root=run_root, flags={},
                              max_queries=max_queries, progress=False)
      return table, wrapped.sent
  finally:
    if cache is not None:
      cache.close()


@pytest.fixture(scope="module")
def every_method(tiny_reproduction, sim):
  """Every method's cell in one table, run in the session's tiny reproduction's run root: its Base and
  HieraMAS cells (the same spec, budget and queries) are finished there and resume; the others fit and
  solve here, all in the one table run."""
  root = tiny_reproduction.run_root
  methods = [m for m in known_methods() if m in TINY or m in ("base", "cot", "sc", "sc_cot", "full_graph",
                                                               "random_graph")]
  assert set(tiny.METHODS) <= set(methods)
  table, _ = asyncio.run(_table(sim, _spec(methods, untrained_check=True), root))
  return root, table


def test_every_method_fits_and_solves_end_to_end(every_method):
  _, table = every_method
  cells = table["cells"]
  labels = {c["label"] for c in cells.values()}
  assert set(TRAINABLE) | {"base", "cot", "sc", "sc_cot", "full_graph", "random_graph", "random_config"} <= labels
  for c in cells.values():
    assert c["n"] == 3 and c["cost_usd"] > 0 and c["n_calls"] >= 3, c["label"]
    if c["label"] in TRAINABLE:
      # Training cost is recorded apart from the test queries' cost.
      assert c["training"]["cost_usd"] > 0 and c["training"]["calls"] > 0, c["label"]
      assert c["sizes"] == {"train": 6, "val": 3, "test": 3}
    else:
      assert c["training"] is None and c["fit"] is None, c["label"]
  assert cells["gdesigner|mmlu_redux|gpt-5-mini|main|seed0"]["fit"]["iterations"] == 2
  # The untrained check: every learned method with a seeded start answers the same queries from it.
  checked = {c["label"] for c in cells.values() if "untrained" in c}
  assert checked == {"gdesigner", "masrouter", "aflow"}, checked
  for label in checked:
    c = cells[f"{label}|mmlu_redux|gpt-5-mini|main|seed0"]
    assert c["untrained"]["n"] == 3 and c["untrained"]["outcomes"]["ids_sha256"] == c["outcomes"]["ids_sha256"]
  assert len(cells["aflow|mmlu_redux|gpt-5-mini|main|seed0"]["fit"]["rounds"]) == 3


@pytest.mark.parametrize("name", TRAINABLE)
def test_a_fitted_state_saved_and_loaded_gives_the_same_answers(every_method, sim, name):
  root, table = every_method
  cell = table["cells"][f"{name}|mmlu_redux|gpt-5-mini|main|seed0"]
  run_dir = from_repo(cell["run_dir"])
  first = json.loads((run_dir / "traces.jsonl").read_text().splitlines()[0])
  item = data_lib.items_by_id("mmlu_redux")[first["item_id"]]
  method = make_method(name, benchmark="mmlu_redux", pool="gpt-5-mini", seed=0, **TINY[name])
  method.load(run_dir / "state")

  async def solve():
    async with LLMClient(sim_endpoint(sim.base_url)) as client:  # no cache: the sim answers again
      ctx = RunContext(client, get_pool("gpt-5-mini"), 0)
      await method.prepare([item], ctx)
      return await method.solve(ctx, item)

  trace = asyncio.run(solve())
  assert trace.final_text == first["final_text"]
  assert sorted((c.model, c.text) for c in trace.calls) == sorted((c["model"], c["text"]) for c in first["calls"])


def _numbers(table):
  return {k: (c["accuracy"], c["cost_usd"], c["outcomes"], c["training"] and round(c["training"]["cost_usd"], 9),
              c["training"] and c["training"]["calls"]) for k, c in table["cells"].items()}


def test_a_killed_table_resumes_to_the_same_table_and_pays_no_finished_call_twice(sim, tmp_path):
  methods = ("base", "sc", "gdesigner", "aflow")
  spec = _spec(methods, test=4)
  # Four GDesigner updates, not TINY's two: the kill must land after the first checkpoint and before the fit
  # ends, and with two updates that window sometimes closed before any test query was written (flaky).
  spec = dataclasses.replace(spec, method_options={**spec.method_options,
                                                   "gdesigner": {**TINY["gdesigner"], "iterations": 4}})
  reference, reference_sent = asyncio.run(_table(sim, spec, tmp_path / "ref"))

  counting = Counting(None)

  async def killed():
    task = asyncio.ensure_future(_table(sim, spec, tmp_path / "run", cache_dir=tmp_path / "cache", counting=counting))
    # Kill once gdesigner has checkpointed its first update (mid-fit) and some test queries are done.
    state = tmp_path / "run"
    while not any(state.rglob("gdesigner/state/checkpoints/state.msgpack")) or \
        not any(p.stat().st_size for p in state.rglob("items.jsonl")):
      if task.done():
        break
      await asyncio.sleep(0.05)
    task.cancel()
    with pytest.raises(asyncio.CancelledError):
      await task

  asyncio.run(killed())
  sent_before = counting.sent
  assert not any((tmp_path / "run").rglob("gdesigner/fit.json"))  # the kill came in the middle of the fit
  resumed, sent_after = asyncio.run(_table(sim, spec, tmp_path / "run", cache_dir=tmp_path / "cache"))
  assert _numbers(resumed) == _numbers(reference)
  # Only calls in flight at the kill can be sent twice (8 queries x 7 calls at most here).
  assert sent_before + sent_after - reference_sent <= 8 * 7
  again, sent_again = asyncio.run(_table(sim, spec, tmp_path / "run", cache_dir=tmp_path / "cache"))
  assert _numbers(again) == _numbers(reference) and sent_again == 0


def test_a_changed_data_file_refuses_to_resume(sim, tmp_path, monkeypatch):
  data_dir = tmp_path / "data"
  shutil.copytree(data_lib.BENCHMARK_DATA_DIR, data_dir)
  monkeypatch.setattr(data_lib, "BENCHMARK_DATA_DIR", data_dir)
  spec = _spec(("base",), test=2)
  asyncio.run(_table(sim, spec, tmp_path / "run"))
  path = data_dir / data_lib.DATA_FILES["mmlu_redux"]
  path.write_bytes(path.read_bytes() + b"\n")  # any edit changes the hash
  with pytest.raises(TablePlanError, match=r"mmlu_redux_1.0_normalized.jsonl changed \(sha256") as caught:
    asyncio.run(_table(sim, spec, tmp_path / "run"))
  assert caught.value.problems[0].startswith(str(tmp_path / "run"))
