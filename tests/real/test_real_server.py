"""Every method against a real model server, through a pool file, as a user would run it.

The model is a 135M-parameter instruct model: its answers are mostly wrong and often off-format. What
is checked is the plumbing on real outputs: runs finish, real prose is graded (a sample of what the
graders extracted is checked against the texts), token counts are the server's, truncation is
recorded, the cache replays a rerun without a request, the preflight refuses a missing model. With room
to finish, answers are graded from real finished text, and a broken extraction or a broken route makes
that check fail (mutations, in the test itself).
"""

from __future__ import annotations

import asyncio
import json
import os
import pathlib
import re
import subprocess
import sys

import pytest

from hieramas_jax.benchmarks import graders
from hieramas_jax.benchmarks.data import Item
from hieramas_jax.llm.errors import LLMError
from hieramas_jax.llm.cache import ResponseCache
from hieramas_jax.llm.client import LLMClient, PoolClient
from hieramas_jax.llm.endpoint import make_endpoint
from hieramas_jax.llm.local_server import MODEL_ID
from hieramas_jax.llm.pool import load_pool_file
from hieramas_jax.llm.preflight import PreflightError, preflight
from hieramas_jax.report.paper import TABLE1_METHODS

REPO = pathlib.Path(__file__).resolve().parents[2]
SMOKE_POOL = REPO / "launch" / "pools" / "local_smoke.toml"
pytestmark = pytest.mark.timeout(3600)


def _pool_file(tmp_path, server, *, replace_id=None) -> pathlib.Path:
  """The shipped smoke pool pointed at this session's server port (and optionally one id broken)."""
  text = SMOKE_POOL.read_text().replace("http://127.0.0.1:8765/v1", server.base_url)
  if replace_id:
    text = text.replace(f'[models."{replace_id}"]\nbackend = "custom"\nbase_url = "{server.base_url}"\n'
                        f'model_id = "{MODEL_ID}"',
                        f'[models."{replace_id}"]\nbackend = "custom"\nbase_url = "{server.base_url}"\n'
                        f'model_id = "no-such-model"')
  path = tmp_path / "pool.toml"
  path.write_text(text)
  return path


def test_usage_truncation_and_replay_come_from_the_real_server(real_server, tmp_path):
  question = [{"role": "user", "content": "What is 7 times 6? End with: The answer is N."}]

  async def main():
    ep = make_endpoint("custom", base_url=real_server.base_url, environ={}, model_map={"qwen3-8b": MODEL_ID})
    with ResponseCache(tmp_path) as cache:
      async with LLMClient(ep, cache=cache, timeout_s=300) as client:
        full = await client.chat("qwen3-8b", question, temperature=0.0, max_tokens=48)
        cut = await client.chat("qwen3-8b", question, temperature=0.0, max_tokens=3)
        again = await client.chat("qwen3-8b", question, temperature=0.0, max_tokens=48)
    return full, cut, again

  full, cut, again = asyncio.run(main())
  assert full.text and full.prompt_tokens > 10 and 0 < full.completion_tokens <= 48
  assert cut.finish_reason == "length" and cut.completion_tokens == 3 and cut.truncated
  assert full.finish_reason == "stop" or full.completion_tokens == 48
  assert again.cached and again.text == full.text and again.finish_reason == full.finish_reason


# Questions the 135M model answers in a few dozen tokens (greedy, so the same text every run), with the
# suite's MATH instruction: what is checked is that a finished real answer is graded, not that it is right.
FINISHING = (("What is 15 plus 27?", "42"), ("What is 3 + 4 * 2?", "11"))
BOXED = "Solve the problem. Put your final answer in \\boxed{}."


def _finished_answers(pool, model: str = "qwen3-8b"):
  """The server's answers to FINISHING, routed by the pool file, with room to finish (256 tokens)."""
  async def main():
    async with PoolClient(pool.endpoints, timeout_s=600, max_retries=1) as client:
      return await asyncio.gather(*(client.chat(model, [{"role": "system", "content": BOXED},
                                                        {"role": "user", "content": q}], temperature=0.0, max_tokens=256)
                                    for q, _ in FINISHING))
  return asyncio.run(main())


def _graded_from_finished_text(results) -> list[graders.Grade]:
  """The grades of answers that finished (`stop`) and were graded from their own text; fails if none was."""
  graded = []
  for (question, gold), r in zip(FINISHING, results):
    grade = graders.grade(Item(benchmark="math", id=question, question=question, answer=gold), r.text)
    if r.finish_reason == "stop" and grade.extracted is not None:
      assert grade.extracted.replace(" ", "") in r.text.replace(" ", ""), (grade.extracted, r.text[-300:])
      graded.append(grade)
  assert graded, [(r.finish_reason, r.text[-200:]) for r in results]
  return graded


def test_answers_with_room_to_finish_are_graded_from_real_text_and_mutations_fail(real_server, tmp_path, monkeypatch):
  pool = load_pool_file(_pool_file(tmp_path, real_server), environ={})
  results = _finished_answers(pool)
  assert all(r.completion_tokens < 256 for r in results)  # room to finish: nothing was cut
  assert _graded_from_finished_text(results)
  # Mutation 1: extraction that finds nothing. Mutation 2: extraction that returns what the text never says.
  for broken in (lambda text: None, lambda text: "\\frac{1}{2}"):
    with monkeypatch.context() as m:
      m.setattr(graders, "extract_math_answer", broken)
      with pytest.raises(AssertionError):
        _graded_from_finished_text(results)
  # Mutation 3: routing to an id the server does not serve: the answers never come.
  misrouted = load_pool_file(_pool_file(tmp_path, real_server, replace_id="qwen3-8b"), environ={})
  with pytest.raises(LLMError):
    _finished_answers(misrouted)


def test_preflight_catches_a_missing_model_on_the_real_server(real_server, tmp_path):
  pool = load_pool_file(_pool_file(tmp_path, real_server, replace_id="llama-8b"), environ={})
  with pytest.raises(PreflightError, match="llama-8b: .* does not serve the id 'no-such-model'"):
    asyncio.run(preflight(pool.endpoints, ["qwen3-8b", "llama-8b"]))
  report = asyncio.run(preflight(pool.endpoints, ["qwen3-8b", "gpt-5-mini"]))
  assert {m for _, m, _ in report.checked} == {"qwen3-8b", "gpt-5-mini"}


def _tiny_options(methods) -> list[str]:
  from test_runner import TINY  # the tiny budgets the sim tests use: every method trains a few steps
  # The total-cost variant is HieraMAS with another recipe: the same tiny budget (its own is 100 steps).
  tiny = {**TINY, "hieramas_total_cost": TINY["hieramas"]}
  return [f"--method_option={m}.{k}={json.dumps(v)}" for m, opts in tiny.items() if m in methods
          for k, v in opts.items()]


def _run_table(pool_file, out_dir, run_root, *extra) -> subprocess.CompletedProcess:
  cmd = [sys.executable, "experiments/reproduce_table1.py", f"--pool_file={pool_file}", "--benchmarks=math",
         "--pools=gpt-5-mini", "--limit=2", "--train_limit=4", "--val_limit=2", "--max_tokens=48",
         "--max_queries=8", "--max_concurrency=8", "--request_timeout_s=600", "--nosim_process", "--nowandb",
         "--noprogress", f"--out_dir={out_dir}", f"--run_root={run_root}", *extra]
  methods = next((e.split("=", 1)[1].split(",") for e in extra if e.startswith("--methods=")), TABLE1_METHODS)
  cmd += _tiny_options(methods)
  return subprocess.run(cmd, cwd=REPO, capture_output=True, text=True, timeout=3000,
                        env=dict(os.environ, PYTHONPATH=str(REPO)))


def _table_file(out_dir):
  """The one table a limited run writes: its name carries every limit (TableSpec.results_suffix)."""
  (path,) = out_dir.glob("table1_limit2_*.json")
  return path


def test_every_method_runs_on_the_real_server_through_the_pool_file(real_server, tmp_path):
  pool_file = _pool_file(tmp_path, real_server)
  out, runs = tmp_path / "out", tmp_path / "runs"
  first = _run_table(pool_file, out, runs)
  assert first.returncode == 0, first.stderr[-4000:]
  table = json.loads(_table_file(out).read_text())
  cells = table["cells"]
  assert len(cells) >= 11
  for key, cell in cells.items():
    assert cell["n"] == 2 and cell["n_calls"] >= 2, key
    assert cell["completion_tokens"] > 0 and cell["cost_usd"] > 0, key
  # Real prose graded: what the grader extracted is read from the text it graded (a sample, all cells).
  finals = {}
  for path in runs.rglob("traces.jsonl"):
    for line in path.read_text().splitlines():
      trace = json.loads(line)
      finals[(str(path.parent), trace["item_id"])] = trace
      for call in trace["calls"]:
        assert call["completion_tokens"] <= 48 and call["finish_reason"] in ("stop", "length")
  checked = 0
  for path in runs.rglob("items.jsonl"):
    for line in path.read_text().splitlines():
      item = json.loads(line)
      trace = finals[(str(path.parent), item["item_id"])]
      flat = trace["final_text"].replace(" ", "").replace("**", "")
      if item["extracted"] is not None:
        assert item["extracted"].replace(" ", "") in flat, (item["extracted"], trace["final_text"][-300:])
        checked += 1
  # At 48 tokens most answers are cut: that answers are graded from finished real text is checked with room
  # to finish (test_answers_with_room_to_finish_...); here, what was extracted is read from the graded text.
  assert finals
  truncated = sum(c["finish_reason"] == "length" for t in finals.values() for c in t["calls"])
  assert truncated > 0  # at a 48-token budget a real model is cut, and the cut is recorded
  # A rerun into a fresh run root replays every call from the cache: nothing is sent again.
  second = _run_table(pool_file, tmp_path / "out2", tmp_path / "runs2")
  assert second.returncode == 0, second.stderr[-4000:]
  table2 = json.loads(_table_file(tmp_path / "out2").read_text())
  for key, cell in table2["cells"].items():
    assert cell["cached_calls"] == cell["n_calls"], key
    if cell["training"]:
      assert cell["training"]["cached_calls"] == cell["training"]["calls"], key
    assert cell["accuracy"] == cells[key]["accuracy"], key


def test_a_missing_model_is_refused_before_anything_is_written(real_server, tmp_path):
  pool_file = _pool_file(tmp_path, real_server, replace_id="deepseek-v3")
  out, runs = tmp_path / "out", tmp_path / "runs"
  result = _run_table(pool_file, out, runs, "--methods=base,masrouter")
  assert result.returncode == 2
  assert "deepseek-v3" in result.stderr and "no-such-model" in result.stderr
  assert not runs.exists() and not out.exists()
