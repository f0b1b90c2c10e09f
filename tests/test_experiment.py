"""Experiment runner: evaluate + resume over real HTTP, torn lines, Table 1 entry point, bad flags."""

from __future__ import annotations

import asyncio
import dataclasses
import json
import os
import socket
import subprocess
import sys

import pytest

from hieramas_jax.benchmarks.data import load_items
from hieramas_jax.experiment.evaluate import ITEMS_FILE, PROMPTS_FILE, evaluate, load_done, read_traces, summarise
from hieramas_jax.llm.cache import ResponseCache
from hieramas_jax.llm.client import LLMClient
from hieramas_jax.llm.endpoint import make_endpoint
from hieramas_jax.llm.registry import get_pool
from hieramas_jax.methods.api import RunContext
from hieramas_jax.methods.registry import make_method
from hieramas_jax.paths import REPO_DIR
from fault_server import FaultServer
from mas_fakes import FakeClient

ITEMS = list(load_items("mmlu_redux")[:12])


class CancelAfter:
  """A metric writer that cancels the evaluation once `n` items have finished (a 'kill')."""

  def __init__(self, n):
    self.n, self.task = n, None

  def write_scalars(self, step, scalars):
    if step == self.n:
      self.task.cancel()

  def write_summary(self, summary):
    pass

  def close(self):
    pass


async def _run(server, run_dir, cache_dir, *, cancel_after=None):
  endpoint = make_endpoint("custom", base_url=server.base_url)
  cache = ResponseCache(cache_dir)
  try:
    async with LLMClient(endpoint, cache=cache, max_concurrency=4) as client:
      ctx = RunContext(client, get_pool("gpt-5-mini"))
      writers = []
      if cancel_after:
        writers = [CancelAfter(cancel_after)]
      task = asyncio.ensure_future(evaluate(make_method("sc"), ITEMS, ctx, run_dir=run_dir, bound=3,
                                            writers=writers, progress=False))
      for w in writers:
        w.task = task
      return await task
  finally:
    cache.close()


def _numbers(results):
  return [(r.item_id, r.correct, r.extracted, r.cost_usd, r.prompt_tokens, r.completion_tokens, r.n_calls)
          for r in results]


def test_a_cancelled_run_resumes_with_the_same_numbers_and_no_call_paid_twice(tmp_path):
  async def go():
    async with FaultServer() as reference_server:
      reference = await _run(reference_server, tmp_path / "ref", tmp_path / "ref-cache")
    async with FaultServer() as server:
      with pytest.raises(asyncio.CancelledError):
        await _run(server, tmp_path / "run", tmp_path / "cache", cancel_after=4)
      done_after_kill = load_done(tmp_path / "run")
      sent_before_resume = len(server.requests)
      resumed = await _run(server, tmp_path / "run", tmp_path / "cache")
      return reference, done_after_kill, sent_before_resume, resumed, server.requests

  reference, done_after_kill, sent_before, resumed, requests = asyncio.run(go())
  assert 4 <= len(done_after_kill) < len(ITEMS)
  assert _numbers(resumed) == _numbers(reference)
  assert summarise(resumed)["cost_usd"] == pytest.approx(summarise(reference)["cost_usd"])
  # The resumed run asked nothing about items finished before the kill...
  done_questions = [load_items_by_id(i).question for i in done_after_kill]
  for body in requests[sent_before:]:
    assert not any(q in body["messages"][1]["content"] for q in done_questions)
  # ...and repeated only calls that were in flight at the kill (3 queries x 5 samples at most).
  keys = [json.dumps(b, sort_keys=True) for b in requests]
  assert len(keys) - len(set(keys)) <= 3 * 5
  assert len(set(keys)) == len(ITEMS) * 5
  lines = (tmp_path / "run" / ITEMS_FILE).read_text().splitlines()
  assert sorted(json.loads(l)["item_id"] for l in lines) == sorted(it.id for it in ITEMS)


def load_items_by_id(item_id):
  return next(it for it in ITEMS if it.id == item_id)


def test_a_torn_last_line_is_dropped_and_the_item_redone(tmp_path):
  client = FakeClient(lambda m, msg, s: "The answer is (A)")
  ctx = RunContext(client, get_pool("gpt-5-mini"))
  items = ITEMS[:3]
  first = asyncio.run(evaluate(make_method("base"), items, ctx, run_dir=tmp_path, progress=False))
  path = tmp_path / ITEMS_FILE
  lines = path.read_text().splitlines()
  path.write_text(lines[0] + "\n" + lines[1] + "\n" + lines[2][: len(lines[2]) // 2])  # killed mid-write
  assert len(load_done(tmp_path)) == 2
  n_calls = len(client.calls)
  again = asyncio.run(evaluate(make_method("base"), items, ctx, run_dir=tmp_path, progress=False))
  assert len(client.calls) == n_calls + 1
  assert _numbers(again) == _numbers(first)
  assert all(json.loads(l) for l in path.read_text().splitlines())
  assert [r.correct for r in first] == [it.answer == "A" for it in items]


def test_traces_keep_each_calls_messages_once_and_the_gold_answer(tmp_path):
  client = FakeClient(lambda m, msg, s: "The answer is (A)")
  ctx = RunContext(client, get_pool("gpt-5-mini"))
  items = ITEMS[:3]
  first = asyncio.run(evaluate(make_method("sc"), items, ctx, run_dir=tmp_path, progress=False))
  traces = read_traces(tmp_path)
  assert sorted(traces) == sorted(it.id for it in items)
  for it in items:
    t = traces[it.id]
    assert t["target"] == it.answer and len(t["calls"]) == 5
    for call in t["calls"]:
      assert [m["role"] for m in call["messages"]] == ["system", "user"]
      assert it.question in call["messages"][1]["content"]
  # Stored once: one system prompt and one question per item, though every item made five calls.
  assert len((tmp_path / PROMPTS_FILE).read_text().splitlines()) == 1 + len(items)
  # A run directory without prompts.jsonl (older runs) reads back with messages None, not an error.
  (tmp_path / PROMPTS_FILE).unlink()
  assert all(c["messages"] is None for t in read_traces(tmp_path).values() for c in t["calls"])
  assert [r.cost_usd for r in first] == [r.cost_usd for r in load_done(tmp_path).values()]


def test_evaluate_runs_queries_concurrently_under_the_bound():
  client = FakeClient(latency=0.05)
  ctx = RunContext(client, get_pool("qwen3-80b"))
  asyncio.run(evaluate(make_method("sc"), ITEMS[:8], ctx, bound=2, progress=False))
  assert client.max_in_flight == 2 * 5


def _script(*args, env_extra=None, timeout=240):
  env = dict(os.environ, PYTHONPATH=str(REPO_DIR), **(env_extra or {}))
  return subprocess.run([sys.executable, str(REPO_DIR / "experiments" / "reproduce_table1.py"), *args],
                        capture_output=True, text=True, timeout=timeout, env=env, cwd=REPO_DIR)


@pytest.mark.parametrize("bad,message", [
    ("--methods=base,nope", "error: unknown method 'nope'; known: aflow, agentprune, arg_designer, base"),
    ("--benchmarks=gsm8k", "error: unknown benchmark 'gsm8k'"),
    ("--pools=claude", "error: unknown pool setting 'claude'; known: gpt-5-mini, qwen3-80b"),
    ("--pools=gpt5-mini", "error: unknown pool setting 'gpt5-mini' (did you mean 'gpt-5-mini'?); known: "),
    ("--setting=dev", "error: flag --setting=dev: value should be one of <main|generalization>"),
    ("--seeds=abc", "error: --seeds must be integers, got abc"),
    ("--setting=generalization", "error: the generalization setting holds out MMLU-Redux subjects"),
    ("--method_option=gdesigner.iterations", "error: --method_option must look like METHOD.FIELD=VALUE"),
    ("--no_such_flag=1", "error: Unknown command line flag 'no_such_flag'"),
])
def test_bad_flags_exit_non_zero_with_one_clear_line_and_write_nothing(tmp_path, bad, message):
  proc = _script(bad, f"--out_dir={tmp_path / 'out'}", f"--run_root={tmp_path / 'runs'}")
  assert proc.returncode == 2, proc.stderr
  assert proc.stderr.strip().splitlines()[-1].startswith(message), proc.stderr
  assert "Traceback" not in proc.stderr
  assert not (tmp_path / "out").exists() and not (tmp_path / "runs").exists()


def test_missing_key_for_a_real_endpoint_is_one_clear_line(tmp_path):
  env = {k: v for k, v in os.environ.items() if k != "OPENROUTER_API_KEY"}
  proc = subprocess.run([sys.executable, str(REPO_DIR / "experiments" / "reproduce_table1.py"),
                         "--backend=openrouter", "--limit=1", "--benchmarks=mmlu_redux", "--methods=base",
                         f"--out_dir={tmp_path / 'out'}", f"--run_root={tmp_path / 'runs'}"],
                        capture_output=True, text=True, timeout=120, cwd=REPO_DIR,
                        env=dict(env, PYTHONPATH=str(REPO_DIR)))
  assert proc.returncode == 2
  assert "OPENROUTER_API_KEY" in proc.stderr.strip().splitlines()[-1]
  assert not (tmp_path / "out").exists()


def test_unreachable_endpoint_is_one_line_before_any_wandb_output_and_leaves_no_run_dir(tmp_path):
  with socket.socket() as s:  # a port nobody listens on
    s.bind(("127.0.0.1", 0))
    port = s.getsockname()[1]
  proc = _script(f"--base_url=http://127.0.0.1:{port}/v1", "--limit=1", "--benchmarks=math", "--methods=base",
                 "--pools=gpt-5-mini", f"--out_dir={tmp_path / 'out'}", f"--run_root={tmp_path / 'runs'}",
                 env_extra={"WANDB_MODE": "offline"}, timeout=120)
  assert proc.returncode == 2, proc.stderr
  last = proc.stderr.strip().splitlines()[-1]
  assert last.startswith(f"error: endpoint http://127.0.0.1:{port}/v1 is unreachable"), proc.stderr
  assert "wandb" not in (proc.stdout + proc.stderr).lower(), proc.stderr
  assert "Traceback" not in proc.stderr
  assert not (tmp_path / "runs").exists() and not (tmp_path / "out").exists()


@pytest.mark.slow
def test_reproduce_table1_end_to_end_on_the_sim_over_http(tmp_path):
  out = tmp_path / "out"
  args = ("--methods=base,sc", "--benchmarks=mmlu_redux", "--limit=3", "--progress=false", f"--out_dir={out}",
          f"--run_root={tmp_path / 'runs'}")
  proc = _script(*args, env_extra={"HIERAMAS_CACHE_DIR": str(tmp_path / "cache")})
  assert proc.returncode == 0, proc.stderr[-3000:]
  record = json.loads((out / "table1_limit3.json").read_text())
  assert set(record["cells"]) == {f"{m}|mmlu_redux|{p}|main|seed0" for m in ("base", "sc")
                                  for p in ("gpt-5-mini", "qwen3-80b")}
  for cell in record["cells"].values():
    assert cell["n"] == 3 and cell["cost_usd"] > 0 and 0 <= cell["accuracy"] <= 100 and cell["training"] is None
    assert len(cell["outcomes"]["correct"]) == 3 and len(cell["ci95"]) == 2
  assert record["cells"]["sc|mmlu_redux|gpt-5-mini|main|seed0"]["n_calls"] == 15
  assert str(REPO_DIR) not in json.dumps(record)  # no machine paths: data and split files are repo-relative
  assert record["provenance"]["backend"] == "sim" and "simulated" in record["provenance"]["label"]
  md = (out / "table1_limit3.md").read_text()
  assert "simulated pool" in md.splitlines()[0]
  assert "--limit=3" in md and record["provenance"]["data_sha256"]["mmlu_redux"]
  for table in ("table4_limit3.md", "table11_limit3.md"):
    assert (out / table).read_text().startswith("# Table")
  # A rerun replays from the response cache and run dirs: identical numbers, nothing recomputed.
  proc2 = _script(*args, env_extra={"HIERAMAS_CACHE_DIR": str(tmp_path / "cache")})
  assert proc2.returncode == 0, proc2.stderr[-3000:]
  record2 = json.loads((out / "table1_limit3.json").read_text())
  assert {k: (c["accuracy"], c["cost_usd"], c["outcomes"]) for k, c in record2["cells"].items()} == \
         {k: (c["accuracy"], c["cost_usd"], c["outcomes"]) for k, c in record["cells"].items()}


def test_the_extended_table_adds_rows_beside_table_1s_cells_and_writes_its_own_files(tmp_path):
  """--extended (issue 32) writes table{1,4,11}_extended*, never Table 1's files, and reuses the cells a
  Table 1 run left in the same run root (the same answers, no new calls for them)."""
  common = ("--benchmarks=mmlu_redux", "--pools=gpt-5-mini", "--limit=2", "--train_limit=4", "--val_limit=2",
            "--progress=false", "--wandb=false", f"--out_dir={tmp_path / 'out'}", f"--run_root={tmp_path / 'runs'}")
  env = {"HIERAMAS_CACHE_DIR": str(tmp_path / "cache")}
  first = _script("--methods=base", *common, env_extra=env)
  assert first.returncode == 0, first.stderr[-3000:]
  table1 = (tmp_path / "out" / "table1_limit2_train4_val2.json").read_bytes()
  second = _script("--extended", "--methods=base,agentprune", "--method_option=agentprune.iterations=1", *common,
                   env_extra=env)
  assert second.returncode == 0, second.stderr[-3000:]
  assert (tmp_path / "out" / "table1_limit2_train4_val2.json").read_bytes() == table1
  ext = json.loads((tmp_path / "out" / "table1_extended_limit2_train4_val2.json").read_text())
  base = json.loads(table1)["cells"]["base|mmlu_redux|gpt-5-mini|main|seed0"]
  assert ext["cells"]["base|mmlu_redux|gpt-5-mini|main|seed0"]["outcomes"] == base["outcomes"]
  assert ext["cells"]["agentprune|mmlu_redux|gpt-5-mini|main|seed0"]["training"]["cost_usd"] > 0
  md = (tmp_path / "out" / "table1_extended_limit2_train4_val2.md").read_text()
  assert md.startswith("# Table 1, extended with methods published after the paper") and "| AgentPrune | MT-- |" in md
  # Their published figures and each cell's learning evidence (one update: too few points for a verdict).
  # The published figure where its benchmark matches ours (data/published_beyond_paper.json).
  assert "| AgentPrune | MMLU → MMLU-Redux | gpt-4-1106-preview (five agents) | 84.72 (S) ·" in md
  assert "## Learning evidence of the methods beyond" in md
  assert ext["beyond_paper"]["learning"]["agentprune|mmlu_redux|gpt-5-mini|main|seed0"]["verdict"] is None
  for stem in ("table4", "table11"):
    assert (tmp_path / "out" / f"{stem}_extended_limit2_train4_val2.md").exists()
  bad = _script("--extended", "--setting=generalization", *common, env_extra=env)
  assert bad.returncode == 2 and bad.stderr.strip().splitlines()[-1] == \
      "error: --extended extends Table 1 (--setting=main)", bad.stderr


def test_wandb_writer_runs_offline_and_never_sees_a_secret(tmp_path, monkeypatch):
  from hieramas_jax.experiment.writers import WandbWriter
  monkeypatch.setenv("WANDB_SILENT", "true")
  w = WandbWriter(tmp_path, {"seed": 0, "api_key": "sk-do-not-leak", "api_key_env": "OPENROUTER_API_KEY"},
                  name="test")
  assert w._run.config["api_key"] == "<redacted>" and w._run.config["api_key_env"] == "OPENROUTER_API_KEY"
  assert w._run.settings.mode == "offline"
  w.write_scalars(1, {"accuracy": 50.0})
  w.write_summary({"accuracy": 50.0})
  w.close()
  leaked = [p for p in tmp_path.rglob("*") if p.is_file() and b"sk-do-not-leak" in p.read_bytes()]
  assert not leaked


def test_jsonl_writer_writes_null_for_non_finite_values(tmp_path):
  from hieramas_jax.experiment.writers import JsonlWriter
  w = JsonlWriter(tmp_path)
  w.write_scalars(1, {"accuracy": float("nan")})
  w.write_summary({"accuracy": 50.0})
  w.close()
  assert json.loads((tmp_path / "metrics.jsonl").read_text()) == {"step": 1, "accuracy": None}
  assert json.loads((tmp_path / "summary.json").read_text()) == {"accuracy": 50.0}


def _sim_flags():
  import types
  return types.SimpleNamespace(backend="sim", base_url=None, api_key_env=None, model_map=[], max_concurrency=16,
                               request_timeout_s=30.0, max_retries=3)


def test_calibration_measures_each_section_through_the_sim(tmp_path):
  from hieramas_jax.experiment.backend import open_backend
  from hieramas_jax.experiment.calibration import calibration_items, run_calibration
  from hieramas_jax.report.calibration import write_calibration

  assert [it.id for it in calibration_items("mmlu_redux", 5, 0)] == [it.id for it in calibration_items("mmlu_redux", 5, 0)]
  assert len(calibration_items("humaneval_plus", 500, 0)) == 164

  async def go():
    async with open_backend(_sim_flags(), seed=0, cache_root=tmp_path / "cache") as backend:
      return await run_calibration({0: backend}, models=["llama-8b"], benchmarks=["mmlu_redux", "math"],
                                   n_items=3, collab_items=2, code_seeds=[0], seed=0, run_root=tmp_path / "runs",
                                   flags={"n_items": 3}, progress=False, cost_limit=2)
  record = asyncio.run(go())
  write_calibration(record, tmp_path / "out")
  # Every configuration's cells are runner cells: the one cell key, the runner's summary.json fields.
  from hieramas_jax.experiment.record import OPTIONAL_FIELDS, CellRecord, cell_key
  summaries = {}
  for path in (tmp_path / "runs").rglob("summary.json"):
    summary = json.loads(path.read_text())
    # Calibration's cells learn nothing: no untrained check, so its optional field is absent.
    assert set(summary) == {f.name for f in dataclasses.fields(CellRecord)} - {"outcomes", *OPTIONAL_FIELDS}
    summaries[cell_key(summary["label"], summary["benchmark"], summary["pool"], summary["setting"],
                       summary["seed"])] = summary
  cost = record["cost_check"]["rows"][0]
  (key,) = next(c for c in record["collaboration"]["cells"] if c["key"] == "self_moa_2")["cell_keys"]
  assert key.startswith("self_moa_2-collaboration-items") and "-T0.7|" in key and summaries[key]["n"] == 2
  measured = [*record["single"]["cells"], *record["fit"]["cells"], *record["collaboration"]["cells"],
              *record["validation"]["full_graph"]["cells"], *record["cost_check"]["rows"]]
  assert sorted(k for c in measured for k in c["cell_keys"]) == sorted(summaries)
  assert cost["n"] == 2 and summaries[cost["cell_keys"][0]]["sizes"] == {"train": 0, "val": 0, "test": 2}
  # A rerun resumes every cell from its run directory: the same record, no query solved again.
  sizes = {p: p.stat().st_size for p in (tmp_path / "runs").rglob("items.jsonl")}
  again = asyncio.run(go())
  assert {p: p.stat().st_size for p in (tmp_path / "runs").rglob("items.jsonl")} == sizes
  assert {k: v for k, v in again.items() if k != "provenance"} == {k: v for k, v in record.items() if k != "provenance"}
  single = {c["benchmark"]: c for c in record["single"]["cells"]}
  assert single["mmlu_redux"]["n"] == 3 and single["math"]["n"] == 3
  for c in single.values():
    assert c["off"] == (abs(c["measured"] - c["target"]) > 3.0) and c["source"] and c["cost_per_query"] > 0
  fit = record["fit"]["cells"]
  assert len(fit) == 5 * 2 * 2 and all(c["fitted"] == (c["method"] != "debate") and c["n"] == 3 for c in fit)
  assert {c["method"] for c in fit} == {"base", "cot", "sc", "sc_cot", "debate"}
  debate = next(c for c in fit if c["method"] == "debate")
  assert debate["calls_per_query"] == 6  # 3 agents x 2 rounds
  fg = record["validation"]["full_graph"]
  assert len(fg["cells"]) == 4 and fg["target"] == 92.78
  assert {d["name"] for d in record["validation"]["directions"]} >= {"self_moa_beats_best_single",
                                                                      "weaker_mix_lowers_synthesis"}
  assert {r["name"] for r in record["cost_check"]["rows"]} == {"wo_llm_selection", "full_graph"}
  assert len(record["collaboration"]["cells"]) == 2 * 2 * len(record["collaboration"]["configs"])
  md = (tmp_path / "out" / "calibration.md").read_text()
  assert md.startswith("# Calibration of the simulated pool (profile fitted)")
  assert "llama-8b" in md and "Full-Graph" in md
  assert "sign_vs_sc_cot_holds" in fg and {r["use"] for r in record["aggregation_fit"]["rows"]} >= {"fit", "validation"}
  params = {r["name"]: r for r in record["parameters"]["rows"]}
  power = params["Aggregation.support_power"]
  assert power["status"] == "fitted" and set(power["profiles"]) == {"low", "fitted", "high"}
  assert params["Aggregation.dilution_tokens"]["status"] == "assumed"


def test_rewritten_results_do_not_make_the_tree_dirty_but_code_changes_do(tmp_path, monkeypatch):
  from hieramas_jax.experiment import provenance as provenance_lib

  def git(*args):
    subprocess.run(["git", *args], cwd=tmp_path, check=True, capture_output=True)

  git("init", "-q")
  (tmp_path / "results").mkdir()
  (tmp_path / "results" / "table1.md").write_text("old\n")
  (tmp_path / "code.py").write_text("x = 1\n")
  git("add", ".")
  git("-c", "user.name=t", "-c", "user.email=t@t", "commit", "-qm", "init")
  monkeypatch.setattr(provenance_lib, "REPO_DIR", tmp_path)
  assert provenance_lib.git_commit()["dirty"] is False
  (tmp_path / "results" / "table1.md").write_text("rerun\n")
  assert provenance_lib.git_commit()["dirty"] is False
  (tmp_path / "code.py").write_text("x = 2\n")
  assert provenance_lib.git_commit()["dirty"] is True


def test_a_process_names_the_commit_it_started_at_even_when_the_checkout_moves_on(tmp_path, monkeypatch):
  from hieramas_jax.experiment import provenance as provenance_lib

  def git(*args):
    return subprocess.run(["git", *args], cwd=tmp_path, check=True, capture_output=True, text=True).stdout.strip()

  git("init", "-q")
  (tmp_path / "code.py").write_text("x = 1\n")
  git("add", ".")
  git("-c", "user.name=t", "-c", "user.email=t@t", "commit", "-qm", "one")
  first = git("rev-parse", "HEAD")
  monkeypatch.setattr(provenance_lib, "REPO_DIR", tmp_path)
  monkeypatch.setattr(provenance_lib, "_PROCESS_COMMIT", None)  # a process starting here
  assert provenance_lib.process_commit()["commit"] == first
  (tmp_path / "code.py").write_text("x = 2\n")
  git("-c", "user.name=t", "-c", "user.email=t@t", "commit", "-qam", "two")  # the checkout moves on mid-run
  assert provenance_lib.git_commit()["commit"] != first
  assert provenance_lib.process_commit()["commit"] == first
  assert provenance_lib.provenance(seed=0)["git"]["commit"] == first


def test_a_results_command_carries_no_machines_absolute_paths():
  """Result files are committed and read elsewhere: a path in the command is relative to the checkout, or
  names only its last part when it lies outside (the bench's --work_dir=/tmp/... of an earlier stop)."""
  from hieramas_jax.experiment.provenance import command_line
  from hieramas_jax.paths import REPO_DIR
  line = command_line([str(REPO_DIR / "experiments" / "bench_table1.py"), "--work_dir=/work/bench-work",
                       f"--out={REPO_DIR}/results/bench.json", "--limit=3", "/tmp/other"])
  assert line == ("python experiments/bench_table1.py '--work_dir=<outside the repo>/bench-work' "
                  "--out=results/bench.json --limit=3 '<outside the repo>/other'")
  assert str(REPO_DIR) not in line and "/work/" not in line and "/tmp/" not in line


def test_a_results_flags_carry_no_machines_absolute_paths():
  """The flags in a result's provenance follow the command's rule (a run with --out_dir=/tmp/x had put
  /tmp/x into table1.json's flags)."""
  from hieramas_jax.experiment.provenance import provenance
  from hieramas_jax.paths import REPO_DIR
  prov = provenance(seed=0, flags={"out_dir": "/tmp/t1out", "run_root": str(REPO_DIR / "runs" / "table1"),
                                   "seeds": [0], "files": ["/data/a.flags", "rel/b"], "limit": 3})
  assert prov["flags"] == {"out_dir": "<outside the repo>/t1out", "run_root": "runs/table1", "seeds": [0],
                           "files": ["<outside the repo>/a.flags", "rel/b"], "limit": 3}
