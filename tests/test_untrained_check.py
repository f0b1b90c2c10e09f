"""The untrained check: a learned cell's test queries answered again from the state its fit starts from, so a
report can say whether training beat the method's own start (paired, same queries).

End to end on the simulated pool (slow): the check's record, its folder, its resume; and the report's rule on
hand-made outcomes (fast), a fresh initialisation included.
"""

from __future__ import annotations

import asyncio
import json

import numpy as np
import pytest

from hieramas_jax.experiment.backend import Backend
from hieramas_jax.experiment.record import CellRecord, ids_sha256
from hieramas_jax.experiment.rundir import UNTRAINED_DIR, from_repo
from hieramas_jax.experiment.runner import run_table
from hieramas_jax.experiment.spec import TableSpec
from hieramas_jax.learn.checkpoint import params_sha256
from hieramas_jax.llm.client import LLMClient
from hieramas_jax.llm.endpoint import sim_endpoint
from hieramas_jax.methods.agentprune import model as agentprune_model
from hieramas_jax.methods.aflow.workflow import Workflow
from hieramas_jax.methods.registry import make_method
from hieramas_jax.report import learning, table1
from mas_fakes import Counting

TINY = {"gdesigner": {"iterations": 2, "batch_size": 2},
        "agentprune": {"iterations": 2, "batch_size": 2, "imp_per_iterations": 1},
        "maas": {"train_queries": 2, "repetitions": 1, "batch_size": 2}}


def _spec(check: bool) -> TableSpec:
  return TableSpec(methods=("base", *TINY), benchmarks=("mmlu_redux",), pools=("gpt-5-mini",), seeds=(0,),
                   train_limit={"mmlu_redux": 6}, val_limit=3, test_limit=3, method_options=TINY,
                   untrained_check=check)


async def _table(sim, spec, run_root):
  endpoint = sim_endpoint(sim.base_url)
  async with LLMClient(endpoint) as client:  # no response cache: every call the sim answers is counted
    counting = Counting(client)
    table = await run_table(spec, {0: Backend(counting, endpoint, None)}, run_root=run_root, flags={},
                            max_queries=8, progress=False)
    return table, counting.sent


@pytest.mark.slow
@pytest.mark.timeout(1800)
def test_each_learned_cell_is_answered_again_untrained_on_the_same_queries_and_the_check_resumes(session_sim,
                                                                                               tmp_path):
  plain, _ = asyncio.run(_table(session_sim, _spec(False), tmp_path / "plain"))
  table, sent = asyncio.run(_table(session_sim, _spec(True), tmp_path / "checked"))
  assert sent > 0
  for key, cell in table["cells"].items():
    same = plain["cells"][key]
    # The check never changes the cell's own figures: its calls are counted apart.
    for field in ("accuracy", "cost_usd", "n_calls", "outcomes"):
      assert cell[field] == same[field], (key, field)
    if cell["method"] == "base":  # nothing learned: no check
      assert "untrained" not in cell and "untrained" not in same
      continue
    assert "untrained" not in same
    u = cell["untrained"]
    assert u["n"] == 3 and u["n_calls"] >= 3 and u["cost_usd"] > 0
    assert u["outcomes"]["ids_sha256"] == cell["outcomes"]["ids_sha256"]
    lines = (from_repo(cell["run_dir"]) / UNTRAINED_DIR / "items.jsonl").read_text().splitlines()
    assert sorted(json.loads(line)["item_id"] for line in lines) == sorted(
        json.loads(line)["item_id"] for line in (from_repo(cell["run_dir"]) / "items.jsonl").read_text().splitlines())
    assert CellRecord.from_json(cell).untrained == u
  # The untrained AgentPrune keeps every edge; the trained one pruned on schedule.
  ap = table["cells"]["agentprune|mmlu_redux|gpt-5-mini|main|seed0"]
  trace = json.loads((from_repo(ap["run_dir"]) / UNTRAINED_DIR / "traces.jsonl").read_text().splitlines()[0])
  trained = json.loads((from_repo(ap["run_dir"]) / "traces.jsonl").read_text().splitlines()[0])
  untrained_edges, trained_edges = trace["extra"]["unmasked_edges"], trained["extra"]["unmasked_edges"]
  assert sum(untrained_edges.values()) > sum(trained_edges.values())
  # A rerun replays everything, the check included: no call, the same records.
  again, sent_again = asyncio.run(_table(session_sim, _spec(True), tmp_path / "checked"))
  assert sent_again == 0
  assert {k: c.get("untrained") for k, c in again["cells"].items()} == \
      {k: c.get("untrained") for k, c in table["cells"].items()}


def test_load_untrained_takes_the_seeded_start_of_the_fit():
  arg = make_method("arg_designer", benchmark="math", pool="gpt-5-mini", seed=3)
  arg.load_untrained()
  assert arg.node_range == (2, arg.config.max_agents)
  assert params_sha256(arg.params) == params_sha256(arg._fresh_state()["params"])  # pylint: disable=protected-access
  ap = make_method("agentprune", benchmark="math", pool="gpt-5-mini", seed=3)
  ap.load_untrained()
  for kind, mask in agentprune_model.initial_masks(len(ap.roles)).items():  # nothing pruned yet
    assert np.array_equal(ap.masks[kind], np.asarray(mask) > 0), kind
  assert ap.masks["spatial"].sum() > 0
  aflow = make_method("aflow", benchmark="math", pool="gpt-5-mini")
  aflow.load_untrained()
  assert aflow.best.describe() == Workflow().describe()  # the search's round 1


def _cell(correct, ids=("a", "b", "c", "d"), untrained=None):
  cell = {"label": "gdesigner", "method": "gdesigner", "benchmark": "math", "pool": "gpt-5-mini", "setting": "main",
          "seed": 0, "accuracy": 100.0 * sum(correct) / len(correct),
          "outcomes": {"ids_sha256": ids_sha256(ids), "correct": ["1" if c else "0" for c in correct]}}
  if untrained is not None:
    u_ids, u_correct = untrained
    cell["untrained"] = {"accuracy": 100.0 * sum(u_correct) / len(u_correct), "cost_usd": 0.5, "n_calls": 4,
                         "outcomes": {"ids_sha256": ids_sha256(u_ids), "correct": ["1" if c else "0" for c in u_correct]}}
  return cell


def test_a_fresh_initialisation_is_reported_did_not_learn():
  ids = tuple(f"q{i}" for i in range(40))
  same = [i % 3 != 0 for i in range(40)]
  v = learning.untrained_check(_cell(same, ids, (ids, same)), "k")
  assert v["verdict"] == learning.NOT_LEARNED and v["delta"] == 0.0 and not v["worse"]
  better = learning.untrained_check(_cell([True] * 40, ids, (ids, [i % 2 == 0 for i in range(40)])), "k")
  assert better["verdict"] == learning.LEARNED and better["ci"][0] > 0 and better["delta"] == 50.0
  worse = learning.untrained_check(_cell([i % 2 == 0 for i in range(40)], ids, (ids, [True] * 40)), "k")
  assert worse["verdict"] == learning.NOT_LEARNED and worse["worse"]
  assert "**worse**" in learning.untrained_text(worse)
  other = learning.untrained_check(_cell(same, ids, (ids[::-1], same)), "k")
  assert other["verdict"] is None
  assert learning.untrained_check(_cell(same, ids), "k") is None


def test_table1_prints_the_untrained_verdict_per_learned_cell():
  ids = tuple(f"q{i}" for i in range(40))
  cell = _cell([True] * 40, ids, (ids, [i % 2 == 0 for i in range(40)]))
  derived = {"cells": {"gdesigner|math|gpt-5-mini|main|seed0": {**cell, "vs_untrained": learning.untrained_check(
      cell, "gdesigner|math|gpt-5-mini|main|seed0")}}, "spec": {"seeds": [0]},
      "groups": {"gdesigner|math|gpt-5-mini|main": {"label": "gdesigner"}}}
  lines = table1._untrained_section(derived, [("math", "gpt-5-mini")], "main")  # pylint: disable=protected-access
  text = "\n".join(lines)
  assert "Did training beat the untrained method?" in text
  assert "| GDesigner | **learned**: +50.00 [" in text and "(50.00 untrained) | 1 of 1 |" in text
  plain = {**derived, "cells": {k: {kk: vv for kk, vv in c.items() if kk != "vs_untrained"}
                                for k, c in derived["cells"].items()}}
  assert table1._untrained_section(plain, [("math", "gpt-5-mini")], "main") == []  # pylint: disable=protected-access


def test_a_record_without_the_check_keeps_its_bytes():
  fields = {f: None for f in ("training", "fit", "loaded_from")}
  record = CellRecord(method="base", benchmark="math", pool="gpt-5-mini", setting="main", seed=0, tag="", label="base",
                      n=1, n_correct=1, accuracy=100.0, cost_usd=0.1, prompt_tokens=1, completion_tokens=1, n_calls=1,
                      cached_calls=0, truncated_calls=0, usage_by_model={}, mean_cost_usd=0.1, sizes={}, timing={},
                      computed_by=[], run_dir="runs/x", outcomes={}, **fields)
  data = record.to_json()
  assert "untrained" not in data and list(data)[-1] == "outcomes"
  assert CellRecord.from_json(data) == record
  checked = CellRecord.from_json({**data, "untrained": {"n": 1}})
  assert checked.to_json()["untrained"] == {"n": 1}
