"""ResponseCache: bit-exact replay through the client, resume after a kill, torn lines, keys."""

from __future__ import annotations

import asyncio
import dataclasses
import json
import signal
import subprocess
import sys
import textwrap

import pytest

from hieramas_jax.llm.cache import ResponseCache, canonical_json, request_key
from hieramas_jax.llm.client import LLMClient
from hieramas_jax.llm.endpoint import sim_endpoint
from hieramas_jax.llm.errors import CacheCorruptError
from hieramas_jax.paths import REPO_DIR
from fault_server import FaultServer

MODELS = ["qwen3-8b", "gpt-5-mini", "gemma-3-27b"]


def msgs(i: int) -> list[dict]:
  return [{"role": "user", "content": f"item {i}: compute {i} * 7 \u2013 ok \U0001F600"}]


async def run_calls(base_url: str, cache_dir, indices, *, name: str = "sim") -> list:
  with ResponseCache(cache_dir) as cache:
    async with LLMClient(sim_endpoint(base_url, name=name), cache=cache, timeout_s=2, max_retries=5,
                         backoff_base_s=0.005, backoff_cap_s=0.02) as client:
      return await asyncio.gather(*(
          client.chat(MODELS[i % 3], msgs(i), temperature=0.7, max_tokens=64, sample_index=i % 2)
          for i in indices))


def strip(result) -> dict:
  d = dataclasses.asdict(result)
  d.pop("latency_s")
  d.pop("cached")
  return d


def test_rerun_replays_bit_exactly_and_resumes_without_paying_twice(tmp_path):
  async def main():
    async with FaultServer(fault_rate=0.2, seed=3, faults=("500", "429", "malformed")) as server:
      first = await run_calls(server.base_url, tmp_path, range(0, 30))   # a run killed after 30 calls
      paid_first = server.served_ok
      second = await run_calls(server.base_url, tmp_path, range(0, 60))  # the rerun: all 60
      paid_second = server.served_ok - paid_first
      third = await run_calls(server.base_url, tmp_path, range(0, 60))
      return first, second, third, paid_first, paid_second, server.served_ok

  first, second, third, paid_first, paid_second, paid_total = asyncio.run(main())
  assert paid_first == 30 and paid_second == 30 and paid_total == 60  # each call paid exactly once
  assert [r.cached for r in second] == [True] * 30 + [False] * 30
  assert all(r.cached for r in third)
  assert [strip(r) for r in second[:30]] == [strip(r) for r in first]
  assert [strip(r) for r in third] == [strip(r) for r in second]
  assert any(r.attempts > 1 for r in third)  # the original attempts are replayed too
  assert all(r.cost_usd > 0 for r in third)  # a replay reports what the call costs


def test_endpoint_name_and_sampling_params_separate_entries(tmp_path):
  async def main():
    async with FaultServer() as server:
      await run_calls(server.base_url, tmp_path, [0, 1], name="sim:seed0")
      again = await run_calls(server.base_url, tmp_path, [0, 1], name="sim:seed1")
      return again, server.served_ok

  again, served = asyncio.run(main())
  assert served == 4 and not any(r.cached for r in again)


def test_request_key_is_canonical():
  a = {"model": "m", "messages": [{"role": "user", "content": "hi"}], "seed": 0, "temperature": 0.2}
  b = {"temperature": 0.2, "seed": 0, "messages": [{"content": "hi", "role": "user"}], "model": "m"}
  assert canonical_json(a) == canonical_json(b)
  assert request_key("sim", canonical_json(a)) == request_key("sim", canonical_json(b))
  for changed in ({**a, "seed": 1}, {**a, "temperature": 0.3}, {**a, "model": "n"},
                  {**a, "messages": [{"role": "user", "content": "hi!"}]}, {**a, "max_tokens": 5}):
    assert request_key("sim", canonical_json(changed)) != request_key("sim", canonical_json(a))
  assert request_key("openrouter", canonical_json(a)) != request_key("sim", canonical_json(a))


def put(cache: ResponseCache, key: str, text: str) -> None:
  cache.put(key, endpoint="sim", model="qwen3-8b", text=text, prompt_tokens=3, completion_tokens=4,
            cost_usd=1.7e-06, attempts=1, latency_s=0.01)


def test_torn_last_line_is_ignored_and_corruption_elsewhere_is_an_error(tmp_path):
  with ResponseCache(tmp_path) as cache:
    put(cache, "k1", "first")
    put(cache, "k2", "second\nline")
    shard = cache.shard_path
  with open(shard, "a") as f:
    f.write('{"key": "k3", "endpoint": "sim", "model": "qwen3-8b", "text": "thi')  # killed mid-write
  reopened = ResponseCache(tmp_path)
  assert len(reopened) == 2 and reopened.torn_lines == 1 and "k3" not in reopened
  assert reopened.get("k2").text == "second\nline"
  put(reopened, "k3", "third")  # the retried call lands in a new shard, whole
  reopened.close()
  assert reopened.shard_path != shard
  assert ResponseCache(tmp_path).get("k3").text == "third"

  shard.write_text(shard.read_text().replace('"k1"', '"k1', 1))  # a bad line in the middle
  with pytest.raises(CacheCorruptError, match="line 1"):
    ResponseCache(tmp_path)


def test_killed_writer_loses_nothing_it_flushed(tmp_path):
  """A process SIGKILLed after put() returned: every record it wrote is there on reload."""
  script = textwrap.dedent(f"""
      import os, signal, sys
      sys.path.insert(0, {str(REPO_DIR)!r})
      from hieramas_jax.llm.cache import ResponseCache
      cache = ResponseCache({str(tmp_path)!r})
      for i in range(50):
        cache.put(f"k{{i}}", endpoint="sim", model="qwen3-8b", text="x" * 1000, prompt_tokens=1,
                  completion_tokens=1, cost_usd=0.0, attempts=1, latency_s=0.0)
      os.kill(os.getpid(), signal.SIGKILL)
  """)
  proc = subprocess.run([sys.executable, "-c", script], capture_output=True)
  assert proc.returncode == -signal.SIGKILL
  assert len(ResponseCache(tmp_path)) == 50


def test_records_are_plain_json_without_request_secrets(tmp_path):
  with ResponseCache(tmp_path) as cache:
    put(cache, "k1", "answer")
  record = json.loads(next(tmp_path.glob("*.jsonl")).read_text())
  assert set(record) == {"key", "endpoint", "model", "text", "prompt_tokens", "completion_tokens",
                         "cost_usd", "attempts", "latency_s"}
