"""A table checks every cell before any starts: all conflicts in one error, in seconds, nothing written."""

from __future__ import annotations

import asyncio
import json
import re
import time

import pytest
from absl import flags

from hieramas_jax.experiment.backend import Backend
from hieramas_jax.experiment.cli import default_run_root, run_or_exit
from hieramas_jax.experiment.runner import TablePlanError, run_table
from hieramas_jax.experiment.spec import TableSpec
from hieramas_jax.llm.client import LLMClient
from hieramas_jax.llm.endpoint import sim_endpoint
from hieramas_jax.sim.server import SimConfig, start_sim_in_thread


class Counting:
  def __init__(self, client):
    self.client, self.sent = client, 0

  async def chat(self, model, messages, **kwargs):
    self.sent += 1
    return await self.client.chat(model, messages, **kwargs)


@pytest.fixture(scope="module")
def sim():
  handle = start_sim_in_thread(SimConfig(seed=0))
  yield handle
  handle.close()


def _spec(test, *, methods=("base", "cot"), train=4, **kwargs):
  return TableSpec(methods=methods, benchmarks=("math",), pools=("gpt-5-mini", "qwen3-80b"), setting="main",
                   seeds=(0,), train_limit={"math": train}, val_limit=2, test_limit=test, **kwargs)


def _table(sim, spec, run_root):
  async def go():
    endpoint = sim_endpoint(sim.base_url)
    async with LLMClient(endpoint) as client:
      counting = Counting(client)
      try:
        return await run_table(spec, {0: Backend(counting, endpoint, None)}, run_root=run_root, flags={},
                               max_queries=8, progress=False), counting.sent
      except TablePlanError as e:
        e.sent = counting.sent
        raise
  return asyncio.run(go())


def _files(root):
  return sorted(p.relative_to(root).as_posix() for p in root.rglob("*")) if root.exists() else []


def test_every_conflicting_cell_is_named_at_once_before_any_call(sim, tmp_path):
  _table(sim, _spec(2), tmp_path)
  before = _files(tmp_path)
  started = time.monotonic()
  with pytest.raises(TablePlanError) as caught:
    _table(sim, _spec(3), tmp_path)  # a quick look's root reused with another --limit
  assert time.monotonic() - started < 10
  assert caught.value.sent == 0 and _files(tmp_path) == before
  problems = caught.value.problems
  assert len(problems) == 4 and all("another configuration (differs in: splits.test.ids_sha256: recorded " in p
                                    and "; splits.test.n: recorded 2, this run 3)" in p for p in problems)
  assert all("--run_root" in p for p in problems)
  assert {p.split(" holds")[0].rsplit("/", 3)[-3] for p in problems} == {"gpt-5-mini", "qwen3-80b"}


def test_a_refused_load_run_leaves_nothing_behind(sim, tmp_path):
  source = tmp_path / "src"
  source.mkdir()
  (source / "fit.json").write_text(json.dumps({"summary": {}, "training": {"calls": 0}}))
  (source / "config.json").write_text(json.dumps({
      "cell": {"method": "base", "benchmark": "math", "pool": "gpt-5-mini", "setting": "main", "seed": 0},
      "splits": {"train": {"n": 99, "ids_sha256": "x"}, "val": {"n": 2, "ids_sha256": "y"}}}))
  root = tmp_path / "runs"
  spec = _spec(2, methods=("base",), tag="v", load_from={"base": str(tmp_path / "missing")})
  with pytest.raises(TablePlanError, match="holds no finished fit") as caught:
    _table(sim, spec, root)
  # The message says the command that trains it (the loading run's limits).
  assert ("train it first: python experiments/reproduce_table1.py --methods=base --benchmarks=math "
          "--pools=gpt-5-mini --seeds=0 --train_limit=4 --val_limit=2 --limit=2") in caught.value.problems[0]
  with pytest.raises(TablePlanError) as caught:
    _table(sim, _spec(2, methods=("base",), tag="v", load_from={"base": str(source)}), root)
  assert len(caught.value.problems) == 2  # one per pool
  assert all("was trained differently: train queries 99 vs 4" in p for p in caught.value.problems)
  assert caught.value.sent == 0 and _files(root) == []


def test_run_or_exit_prints_one_error_line_per_conflict(capsys, monkeypatch):
  monkeypatch.setattr("logging.shutdown", lambda: None)  # run_or_exit's own would close pytest's log handlers

  def refuse():
    raise TablePlanError(["a conflicts", "b conflicts"])
  with pytest.raises(SystemExit) as caught:
    run_or_exit(refuse)
  assert caught.value.code == 2
  assert capsys.readouterr().err.splitlines() == ["error: a conflicts", "error: b conflicts"]


@pytest.mark.parametrize("argv,limits,expected", [
    ([], {}, "runs/t1"),
    ([], {"test_limit": 3, "train_limit": {"math": 8}}, "runs/t1-limit3-train8"),
    ([], {"val_limit": 4, "train_limit": {"mmlu_redux": 512}}, "runs/t1-val4"),  # 512 is MMLU-Redux's default
    (["--run_root=elsewhere"], {"test_limit": 3}, "elsewhere"),
])
def test_limited_runs_get_their_own_default_run_root(argv, limits, expected):
  values = flags.FlagValues()
  flags.DEFINE_string("run_root", "runs/t1", "", flag_values=values)
  values(["prog", *argv])
  benchmarks = tuple(limits.get("train_limit", {"math": None}))
  spec = TableSpec(methods=("base",), benchmarks=benchmarks, pools=("gpt-5-mini",), **limits)
  assert default_run_root(values, spec) == expected


@pytest.mark.parametrize("limits,suffix", [
    ({}, ""),
    ({"test_limit": 4, "val_limit": 4, "train_limit": {"math": 8}}, "_limit4_train8_val4"),
    ({"train_limit": {"math": 8}}, "_train8"),  # a training limit alone changes the result too
    ({"train_limit": {"mmlu_redux": 512}}, ""),  # MMLU-Redux's default: the full-size result
])
def test_a_limited_run_writes_results_under_its_limits_suffix(limits, suffix):
  benchmarks = tuple(limits.get("train_limit", {"math": None}))
  spec = TableSpec(methods=("hieramas",), benchmarks=benchmarks, pools=("gpt-5-mini",), **limits)
  assert spec.results_suffix() == suffix


def test_a_method_option_typo_names_the_field_and_lists_the_valid_ones():
  from hieramas_jax.experiment.runner import build_method
  from hieramas_jax.experiment.spec import Cell, InvalidRunError
  spec = TableSpec(methods=("gdesigner",), benchmarks=("math",), pools=("gpt-5-mini",),
                   method_options={"gdesigner": {"iteratons": 2}})
  with pytest.raises(InvalidRunError) as caught:
    build_method(Cell("gdesigner", "math", "gpt-5-mini"), spec)
  message = str(caught.value)
  assert "--method_option gdesigner.iteratons: no such field (did you mean iterations?)" in message
  fields = message.partition("gdesigner's fields: ")[2].split(", ")
  assert {"batch_size", "iterations", "lr"} <= set(fields) and fields == sorted(fields), message
  assert "TypeError" not in message and "__init__" not in message


def test_a_run_root_conflict_names_each_field_and_both_values(tmp_path):
  from hieramas_jax.experiment.rundir import prepare_run_dir, run_dir_conflict
  recorded = {"method_config": {"stage1_steps": 2, "k_pool": 50, "name": "hieramas"}, "seed": 0}
  prepare_run_dir(tmp_path / "cell", recorded)
  err = run_dir_conflict(tmp_path / "cell", {**recorded, "method_config": {**recorded["method_config"],
                                                                           "stage1_steps": 4}})
  assert "(differs in: method_config.stage1_steps: recorded 2, this run 4); use another --run_root" in str(err)
  many = {"method_config": {f"f{i}": i for i in range(6)}, "seed": 1, "new": "x"}
  err = str(run_dir_conflict(tmp_path / "cell", many))
  assert "method_config.f0: recorded (absent), this run 0" in err and "; 7 more)" in err


@pytest.mark.parametrize("limits,message", [
    ({"test_limit": 5000}, "--limit=5000 is more than the 90 queries of math's test split (main setting): give at "
                           "most 90, or leave it out for the whole split"),
    ({"val_limit": 61}, "--val_limit=61 is more than the 60 queries of math's val split"),
    ({"train_limit": {"math": 351}}, "--train_limit=351 is more than the 350 queries of math's train split"),
])
def test_a_limit_above_its_split_is_refused_naming_the_split_and_its_size(limits, message):
  from hieramas_jax.experiment.spec import InvalidRunError, cell_items
  spec = TableSpec(methods=("base",), benchmarks=("math",), pools=("gpt-5-mini",), **limits)
  with pytest.raises(InvalidRunError, match=re.escape(message)):
    cell_items(spec, "math")
  exact = {k: ({"math": 350} if k == "train_limit" else {"test_limit": 90, "val_limit": 60}[k]) for k in limits}
  assert cell_items(TableSpec(methods=("base",), benchmarks=("math",), pools=("gpt-5-mini",), **exact), "math")
