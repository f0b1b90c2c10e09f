"""W&B writers against offline runs read back from disk: one run per cell and per training stage, with
config (secrets redacted), curves, summary, the per-query table and artifacts; the mode rules."""

from __future__ import annotations

import asyncio
import json

import pytest

from hieramas_jax.experiment.backend import Backend
from hieramas_jax.experiment.cell_writers import PER_QUERY_COLUMNS
from hieramas_jax.experiment.runner import run_table
from hieramas_jax.experiment.spec import TableSpec
from hieramas_jax.experiment.writers import StageWandbWriters, WandbWriter, log_result_run, wandb_mode
from hieramas_jax.llm.client import LLMClient
from hieramas_jax.llm.endpoint import sim_endpoint
from hieramas_jax.sim.server import SimConfig, start_sim_in_thread
from wandb_offline import offline_runs

SECRET = "sk-or-v1-do-not-leak-0123456789"


@pytest.fixture(autouse=True)
def _quiet(monkeypatch):
  monkeypatch.setenv("WANDB_SILENT", "true")
  monkeypatch.delenv("WANDB_RUN_GROUP", raising=False)


@pytest.mark.parametrize("env, mode", [({}, "offline"), ({"WANDB_API_KEY": "x" * 40}, "online"),
                                       ({"WANDB_MODE": "online"}, "online"),
                                       ({"WANDB_MODE": "disabled", "WANDB_API_KEY": "x" * 40}, "disabled")])
def test_offline_by_default_and_never_forced_offline_when_the_user_chose_online(monkeypatch, env, mode):
  monkeypatch.delenv("WANDB_MODE", raising=False)
  monkeypatch.delenv("WANDB_API_KEY", raising=False)
  for k, v in env.items():
    monkeypatch.setenv(k, v)
  assert wandb_mode() == mode


def test_a_bad_wandb_mode_is_one_clear_error(monkeypatch):
  monkeypatch.setenv("WANDB_MODE", "sometimes")
  with pytest.raises(ValueError, match="WANDB_MODE='sometimes'"):
    wandb_mode()


def test_writer_logs_config_curves_summary_table_and_artifact_into_the_offline_run(tmp_path):
  result = tmp_path / "results.json"
  result.write_text('{"accuracy": 50.0}')
  w = WandbWriter(tmp_path / "run", {"seed": 3, "api_key": SECRET, "nested": {"token": SECRET, "note": SECRET},
                                     "api_key_env": "OPENROUTER_API_KEY", "max_tokens": 2048, "prompt_tokens": 7,
                                     "authorization": "Bearer abc", "HF_TOKEN": "abc", "OPENAI_API_KEY": "abc",
                                     "apiKey": "abc"},
                  name="cell", group="table1/sim", job_type="base", tags=("main", ""))
  w.write_scalars(1, {"eval/running_accuracy": 100.0})
  w.write_scalars(2, {"eval/running_accuracy": 50.0})
  w.write_summary({"accuracy": 50.0})
  w.write_table("per_query", ["query_id", "correct"], [["q1", True], ["q2", False]])
  w.write_artifact("results-cell|x", "results", [result, tmp_path / "missing.json"])
  w.close()
  (run,) = offline_runs(tmp_path / "run")
  assert (run.name, run.group, run.job_type, run.tags) == ("cell", "table1/sim", "base", ["main"])
  assert run.config["seed"] == 3 and run.config["api_key"] == "<redacted>"
  assert run.config["nested"] == {"token": "<redacted>", "note": "<redacted>"}
  assert run.config["api_key_env"] == "OPENROUTER_API_KEY"
  # Secrets by name, as whole words: counts named "...tokens" are not secrets.
  assert run.config["max_tokens"] == 2048 and run.config["prompt_tokens"] == 7
  assert all(run.config[k] == "<redacted>" for k in ("authorization", "HF_TOKEN", "OPENAI_API_KEY", "apiKey"))
  assert [h["eval/running_accuracy"] for h in run.history if "eval/running_accuracy" in h] == [100.0, 50.0]
  assert run.summary["accuracy"] == 50.0
  (table,) = [p for p in run.files if p.name.startswith("per_query") and p.name.endswith(".table.json")]
  assert '"q2"' in table.read_text()
  assert {"name": "results-cell-x", "type": "results", "paths": ["results.json"]} in run.artifacts
  leaked = [p for p in tmp_path.rglob("*") if p.is_file() and SECRET.encode() in p.read_bytes()]
  assert not leaked


def test_stage_writer_opens_one_run_per_training_stage(tmp_path):
  stages = StageWandbWriters(tmp_path, {"seed": 0}, method="hieramas", name="hieramas|math", group="g")
  stages.write_scalars(1, {"stage1/loss": 1.0})
  stages.write_scalars(2, {"stage1/loss": 0.5})
  stages.write_scalars(3, {"stage2/train_loss": 0.7})
  stages.close()
  runs = {r.job_type: r for r in offline_runs(tmp_path)}
  assert set(runs) == {"hieramas:stage1", "hieramas:stage2"}
  assert [h["stage1/loss"] for h in runs["hieramas:stage1"].history if "stage1/loss" in h] == [1.0, 0.5]
  assert not any("stage1/loss" in h for h in runs["hieramas:stage2"].history)
  assert runs["hieramas:stage2"].name == "hieramas|math/stage2"


def test_a_result_run_has_the_results_file_as_artifact_and_its_numbers_as_summary(tmp_path, monkeypatch):
  monkeypatch.setenv("WANDB_MODE", "offline")
  result = tmp_path / "bench.json"
  result.write_text("{}")
  log_result_run(result, {"cache": {"open_ms": 3.5, "provenance": {"seed": 1}}, "n": 2}, job_type="bench_cache",
                 name="cache", group="bench", config={"seed": 0}, run_dir=tmp_path / "w")
  (run,) = offline_runs(tmp_path / "w")
  assert run.job_type == "bench_cache" and run.group == "bench"
  assert run.summary["cache/open_ms"] == 3.5 and run.summary["n"] == 2.0 and "cache/provenance/seed" not in run.summary
  assert run.artifacts[0]["paths"] == ["bench.json"]


# Tiny HieraMAS: 2 stage-1 steps, 2 stage-2 epochs (the test_runner budgets), and an untrained row.
HIERAMAS_TINY = {"stage1_steps": 2, "stage1_batch": 2, "stage1_samples": 2, "stage1_val_every": 2, "k_pool": 8,
                 "stage2_graphs": 2, "stage2_epochs": 2, "stage2_batch": 4}


@pytest.mark.slow
@pytest.mark.timeout(900)
def test_every_cell_and_training_stage_is_its_own_wandb_run(tmp_path):
  spec = TableSpec(methods=("base", "hieramas"), benchmarks=("mmlu_redux",), pools=("gpt-5-mini",), setting="main",
                   seeds=(0,), train_limit={"mmlu_redux": 6}, val_limit=3, test_limit=3,
                   method_options={"hieramas": HIERAMAS_TINY})
  sim = start_sim_in_thread(SimConfig(seed=0))
  try:
    async def go():
      endpoint = sim_endpoint(sim.base_url)
      async with LLMClient(endpoint) as client:
        return await run_table(spec, {0: Backend(client, endpoint, None)}, run_root=tmp_path / "table1",
                               flags={"methods": "base,hieramas", "api_key": SECRET}, progress=False,
                               use_wandb=True)
    table = asyncio.run(go())
  finally:
    sim.close()
  runs = offline_runs(tmp_path / "table1")
  by_job = {r.job_type: r for r in runs}
  # job_type: the Table 1 row label; config: the cell's own values at the top level, not the command's flags.
  assert set(by_job) == {"Base", "HieraMAS", "HieraMAS:stage1", "HieraMAS:stage2"}
  assert len({r.group for r in runs}) == 1 and runs[0].group.startswith("table1/sim")
  cell = by_job["HieraMAS"]
  record = table["cells"][cell.name]
  assert cell.config["method"] == "hieramas" and cell.config["benchmark"] == "mmlu_redux"
  assert cell.config["stage1_steps"] == 2 and cell.config["n_test"] == 3 and cell.config["max_tokens"] > 0
  assert "methods" not in cell.config and "api_key" not in cell.config and SECRET not in json.dumps(cell.config)
  assert cell.summary["accuracy"] == pytest.approx(record["accuracy"])
  curve = [h["eval/running_accuracy"] for h in cell.history if "eval/running_accuracy" in h]
  assert len(curve) == 3 and curve[-1] == pytest.approx(record["accuracy"])
  # The per-query table is one table per run, logged when the run closes (not an artifact per query).
  (table_file,) = [p for p in cell.files if p.name.startswith("per_query")]
  data = json.loads(table_file.read_text())
  rows = data["data"]
  assert data["columns"] == list(PER_QUERY_COLUMNS) and len(rows) == 3
  assert len([a for a in cell.artifacts if "per_query" in a.get("name", "")]) == 1  # W&B's own run_table, once
  assert all(json.loads(row[3])["graph_index"] >= 0 and len(json.loads(row[4])) == 8 for row in rows)
  assert {a["type"] for a in cell.artifacts} >= {"results"}
  results = next(a for a in cell.artifacts if a["type"] == "results")
  assert {"summary.json", "items.jsonl", "chosen_graphs.json"} <= set(results["paths"])
  stage1 = by_job["HieraMAS:stage1"]
  assert [h["_step"] for h in stage1.history if "stage1/loss" in h] == [1, 2]
  # Stage 2 on its own axis: epochs 1, 2 (its global steps continue stage 1's).
  assert [h["stage2/epoch"] for h in by_job["HieraMAS:stage2"].history if "stage2/train_loss" in h] == [1, 2]
  assert any(a["type"] == "model" and any(p.startswith("state/") for p in a["paths"])
             for a in by_job["HieraMAS:stage2"].artifacts)
  assert "training/cost_usd" in by_job["HieraMAS:stage2"].summary


def test_a_killed_and_resumed_table_has_one_wandb_run_per_cell_and_a_rerun_adds_none(tmp_path):
  spec = TableSpec(methods=("base", "cot"), benchmarks=("math",), pools=("gpt-5-mini",), setting="main", seeds=(0,),
                   train_limit={"math": 4}, val_limit=2, test_limit=6)
  sim = start_sim_in_thread(SimConfig(seed=0, latency_scale=0.2))
  root = tmp_path / "table1"

  async def table():
    endpoint = sim_endpoint(sim.base_url)
    async with LLMClient(endpoint) as client:
      return await run_table(spec, {0: Backend(client, endpoint, None)}, run_root=root, flags={}, progress=False,
                             use_wandb=True)

  async def killed():
    task = asyncio.ensure_future(table())
    while not any(p.stat().st_size for p in root.rglob("items.jsonl")) and not task.done():
      await asyncio.sleep(0.02)
    task.cancel()
    with pytest.raises(asyncio.CancelledError):
      await task

  try:
    asyncio.run(killed())
    first = {r.id for r in offline_runs(root)}
    asyncio.run(table())
    runs = offline_runs(root)
    asyncio.run(table())  # finished: nothing computed, no run opened
    again = offline_runs(root)
  finally:
    sim.close()
  assert first and first <= {r.id for r in runs}
  assert len({r.id for r in runs}) == 2 and {r.job_type for r in runs} == {"Base", "CoT"}
  assert len(again) == len(runs)
  # Per cell, the resumed run's curve goes on from where the killed one stopped, to all 6 queries, and its
  # one per-query table holds all 6 (the killed run's queries included).
  for cell in {r.id for r in runs}:
    steps = sorted(h["_step"] for r in runs if r.id == cell for h in r.history if "eval/running_accuracy" in h)
    assert steps == list(range(1, 7))
    last = max((r for r in runs if r.id == cell), key=lambda r: r.path.name)
    tables = sorted((p for p in last.files if p.name.startswith("per_query")), key=lambda p: p.stat().st_mtime)
    assert len(json.loads(tables[-1].read_text())["data"]) == 6


def test_writers_on_many_threads_never_call_the_sdk_at_once(tmp_path, monkeypatch):
  """The runner writes cells' runs from worker threads; the SDK's process-wide state is not thread-safe
  (two artifacts made at once raced in its artifact cache and ended a Table 1 run). A fake SDK that
  counts how many calls are inside it at once: with 8 threads writing, never more than one."""
  import sys  # pylint: disable=import-outside-toplevel
  import threading  # pylint: disable=import-outside-toplevel
  import time  # pylint: disable=import-outside-toplevel
  import types  # pylint: disable=import-outside-toplevel

  inside, most, guard = [0], [0], threading.Lock()

  def sdk_call(*_args, **_kwargs):
    with guard:
      inside[0] += 1
      most[0] = max(most[0], inside[0])
    time.sleep(0.005)
    with guard:
      inside[0] -= 1

  class Run:
    summary: dict = {}
    def log(self, *a, **k): sdk_call()
    def log_artifact(self, *a, **k): sdk_call()
    def define_metric(self, *a, **k): sdk_call()
    def finish(self): sdk_call()

  class Artifact:
    def __init__(self, *a, **k): sdk_call()
    def add_file(self, *a, **k): sdk_call()
    def add_dir(self, *a, **k): sdk_call()

  def init(**_kwargs):
    sdk_call()
    return Run()

  fake = types.SimpleNamespace(init=init, Artifact=Artifact, Table=lambda **k: sdk_call())
  monkeypatch.setitem(sys.modules, "wandb", fake)
  (tmp_path / "f.json").write_text("{}")

  def one_cell(i: int) -> None:
    writer = WandbWriter(tmp_path / f"w{i}", {"i": i}, name=f"cell{i}", mode="offline")
    for step in range(3):
      writer.write_scalars(step, {"x": float(step)})
      writer.write_artifact(f"results-{i}-{step}", "results", [tmp_path / "f.json"])
    writer.close()

  threads = [threading.Thread(target=one_cell, args=(i,)) for i in range(8)]
  for t in threads:
    t.start()
  for t in threads:
    t.join()
  assert most[0] == 1, f"{most[0]} SDK calls at once"


def test_a_table_imports_the_sdk_on_its_own_thread_before_any_cell_starts(tmp_path, monkeypatch):
  """72 cells importing the SDK from worker threads at once failed every cell of a Table 1 run (CPython
  3.11's shared AST state: "AST constructor recursion depth mismatch", then a half-imported module). The
  table imports it first, on the calling thread; without W&B it is not imported for the table at all."""
  import threading  # pylint: disable=import-outside-toplevel
  from hieramas_jax.experiment import runner  # pylint: disable=import-outside-toplevel
  from hieramas_jax.experiment import writers as writers_lib  # pylint: disable=import-outside-toplevel

  events = []
  monkeypatch.setattr(writers_lib, "import_wandb", lambda: events.append(("import", threading.current_thread().name)))

  async def no_cell(plan, *_args, **_kwargs):
    events.append(("cell", plan.cell.method))
    raise RuntimeError("cells are not run here")

  monkeypatch.setattr(runner, "run_cell", no_cell)
  spec = TableSpec(methods=("base", "cot"), benchmarks=("mmlu_redux",), pools=("gpt-5-mini",), setting="main",
                   seeds=(0,), test_limit=2)
  endpoint = sim_endpoint("http://127.0.0.1:9")
  for use_wandb in (True, False):
    events.clear()
    with pytest.raises(RuntimeError, match="cells are not run here"):
      asyncio.run(run_table(spec, {0: Backend(None, endpoint, None)}, run_root=tmp_path / f"t{use_wandb}", flags={},
                            progress=False, use_wandb=use_wandb))
    imports = [e for e in events if e[0] == "import"]
    assert imports == ([("import", threading.current_thread().name)] if use_wandb else []), events
    assert [e[0] for e in events][len(imports):] == ["cell", "cell"]


def test_runs_record_the_installed_packages_but_read_them_once_per_process(tmp_path, monkeypatch):
  """Each run's requirements.txt lists the packages; the SDK's scan of every package's metadata (most of
  opening a run) happens once, not once per run."""
  import importlib.metadata  # pylint: disable=import-outside-toplevel
  from hieramas_jax.experiment import writers  # pylint: disable=import-outside-toplevel
  wandb = writers.import_wandb()
  reads = []
  real = importlib.metadata.distributions
  monkeypatch.setattr(importlib.metadata, "distributions", lambda *a, **k: reads.append(1) or real(*a, **k))
  # A fresh memo (another test may have filled this process's): unwrap to the SDK's own reader and wrap again.
  monkeypatch.setattr(wandb.util, "working_set", writers._sdk_working_set)  # pylint: disable=protected-access
  writers.import_wandb()
  for name in ("a", "b", "c"):
    w = WandbWriter(tmp_path / name, {"seed": 0}, name=name)
    w.close()
  assert len(reads) == 1
  for name in ("a", "b", "c"):
    (req,) = (tmp_path / name).rglob("requirements.txt")
    assert "wandb==" in req.read_text() and "jax==" in req.read_text()
