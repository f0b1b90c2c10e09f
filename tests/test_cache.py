"""ResponseCache (sqlite store): bit-exact replay, resume after a kill, torn writes, several writers,
the one-time JSONL import, keys."""

from __future__ import annotations

import asyncio
import dataclasses
import json
import multiprocessing
import os
import pathlib
import shutil
import signal
import sqlite3
import subprocess
import sys

import pytest

from hieramas_jax.llm.cache import STORE_NAME, ResponseCache, canonical_json, request_key
from hieramas_jax.llm.client import LLMClient
from hieramas_jax.llm.endpoint import sim_endpoint
from hieramas_jax.llm.errors import CacheCorruptError, CacheWriteError
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


def put(cache: ResponseCache, key: str, text: str, **fields) -> None:
  values = dict(endpoint="sim", model="qwen3-8b", prompt_tokens=3, completion_tokens=4, cost_usd=1.7e-06,
                attempts=1, latency_s=0.01)
  values.update(fields)
  cache.put(key, text=text, **values)


ODD_VALUES = [  # (text, cost_usd, prompt_tokens): what a naive store would not give back bit for bit
    ("plain", 1.7e-06, 3),
    ("lone surrogate \ud800 and \udfff", 0.1 + 0.2, 2 ** 40),
    ("NUL \x00 inside, CR\r\nLF, tab\t", 5e-324, 0),
    ("emoji \U0001F600 and \u2013 dash", 1.0000000000000002, 7),
    ("", 0.0, 1),
]


def test_store_replays_every_field_bit_exactly(tmp_path):
  with ResponseCache(tmp_path) as cache:
    for i, (text, cost, tokens) in enumerate(ODD_VALUES):
      put(cache, f"k{i}", text, cost_usd=cost, prompt_tokens=tokens, attempts=i + 1)
    put(cache, "k0", "a second answer for k0")  # first answer wins
  with ResponseCache(tmp_path) as cache:
    assert len(cache) == len(ODD_VALUES)
    for i, (text, cost, tokens) in enumerate(ODD_VALUES):
      hit = cache.get(f"k{i}")
      assert hit.text == text and type(hit.text) is str
      assert hit.cost_usd.hex() == cost.hex() and hit.prompt_tokens == tokens and hit.attempts == i + 1
      assert (hit.model, hit.completion_tokens) == ("qwen3-8b", 4)
    assert cache.get("missing") is None and "missing" not in cache and "k1" in cache


def _old_jsonl_line(key: str, text: str, cost: float = 1.7e-06) -> str:
  """A record exactly as the JSONL cache before the sqlite store wrote it."""
  return json.dumps({"key": key, "endpoint": "sim", "model": "qwen3-8b", "text": text, "prompt_tokens": 3,
                     "completion_tokens": 4, "cost_usd": cost, "attempts": 2, "latency_s": 0.25},
                    separators=(",", ":")) + "\n"


def test_jsonl_shards_are_imported_once_with_torn_lines_skipped(tmp_path):
  (tmp_path / "20260101T000000-1-aa.jsonl").write_text(
      _old_jsonl_line("k1", "first \ud83d half of a pair", 0.1 + 0.2) + _old_jsonl_line("k2", "second\nline")
      + _old_jsonl_line("dup", "from the older shard"))
  (tmp_path / "20260102T000000-2-bb.jsonl").write_text(
      _old_jsonl_line("dup", "from the newer shard") + _old_jsonl_line("k3", "third")
      + '{"key": "k4", "endpoint": "sim", "model": "qwen3-8b", "text": "fou')  # killed mid-write
  with ResponseCache(tmp_path) as cache:
    assert (cache.imported, cache.torn_lines, len(cache)) == (4, 1, 4)
    assert cache.get("k1").text == "first \ud83d half of a pair" and cache.get("k1").cost_usd == 0.1 + 0.2
    assert cache.get("k2") == ("second\nline", "qwen3-8b", 3, 4, 1.7e-06, 2, "", 0)
    assert cache.get("dup").text == "from the older shard"  # the old loader's "first shard wins"
    assert "k4" not in cache
    put(cache, "k4", "fourth")  # the retried call lands in the store
  with ResponseCache(tmp_path) as cache:
    assert (cache.imported, cache.torn_lines, len(cache)) == (0, 0, 5)  # nothing imported twice
  assert len(list(tmp_path.glob("*.jsonl"))) == 2  # the shards are left as they were


def test_a_corrupt_shard_is_an_error_and_imports_nothing(tmp_path):
  shard = tmp_path / "20260101T000000-1-aa.jsonl"
  shard.write_text(_old_jsonl_line("k1", "one") + '{"key": "k2", "te\n' + _old_jsonl_line("k3", "three"))
  with pytest.raises(CacheCorruptError, match="line 2"):
    ResponseCache(tmp_path)
  shard.write_text(_old_jsonl_line("k1", "one") + _old_jsonl_line("k3", "three"))  # repaired
  with ResponseCache(tmp_path) as cache:
    assert cache.imported == 2 and cache.get("k3").text == "three"


def test_a_file_that_is_not_a_store_is_a_clear_error(tmp_path):
  (tmp_path / STORE_NAME).write_bytes(b"this is not an sqlite file" * 100)
  with pytest.raises(CacheCorruptError, match="not a usable response store"):
    ResponseCache(tmp_path)


WRITER = """
import sys
sys.path.insert(0, {repo!r})
from hieramas_jax.llm.cache import ResponseCache
who, n_own, n_shared = int(sys.argv[1]), int(sys.argv[2]), int(sys.argv[3])
with ResponseCache({store!r}) as cache:
  for i in range(max(n_own, n_shared)):
    for key, text in ((f"own-{{who}}-{{i}}", f"own {{who}} {{i}} " * 50), (f"shared-{{i}}", f"writer {{who}} " * 60)):
      if (key.startswith("own") and i < n_own) or (key.startswith("shared") and i < n_shared):
        cache.put(key, endpoint="sim", model="qwen3-8b", text=text, prompt_tokens=i, completion_tokens=who,
                  cost_usd=i * 1e-6, attempts=1, latency_s=0.0)
        assert cache.get(key) is not None
"""


def _open_at_barrier(directory, barrier, answers):
  barrier.wait()
  try:
    with ResponseCache(directory):
      pass
    answers.put("")
  except Exception as e:  # reported to the parent, which asserts on it
    answers.put(repr(e))


# Slow (600 process starts); the fast tier opens, imports and replays stores in one process.
@pytest.mark.slow
def test_processes_opening_one_new_store_together_all_succeed(tmp_path):
  """Six processes open one fresh store at the same instant, 100 times over. Switching a new file into
  WAL answers SQLITE_BUSY without the busy handler; before the retry, about 4% of these opens failed
  with "database is locked" (54 of 1,200 measured)."""
  ctx = multiprocessing.get_context("fork")
  errors = []
  for round_ in range(100):
    barrier, answers = ctx.Barrier(6), ctx.Queue()
    procs = [ctx.Process(target=_open_at_barrier, args=(tmp_path / str(round_), barrier, answers))
             for _ in range(6)]
    for proc in procs:
      proc.start()
    errors += [answer for answer in (answers.get(timeout=120) for _ in procs) if answer]
    for proc in procs:
      proc.join()
  assert errors == []


def test_several_processes_write_one_store_at_once(tmp_path):
  script = WRITER.format(repo=str(REPO_DIR), store=str(tmp_path))
  writers, n_own, n_shared = 4, 300, 100
  procs = [subprocess.Popen([sys.executable, "-c", script, str(w), str(n_own), str(n_shared)],
                            stderr=subprocess.PIPE) for w in range(writers)]
  errors = [p.communicate(timeout=240)[1] for p in procs]
  assert [p.returncode for p in procs] == [0] * writers, errors
  with ResponseCache(tmp_path) as cache:
    assert len(cache) == writers * n_own + n_shared
    for w in range(writers):
      for i in range(n_own):
        hit = cache.get(f"own-{w}-{i}")
        assert hit.text == f"own {w} {i} " * 50 and hit.prompt_tokens == i and hit.completion_tokens == w
    for i in range(n_shared):
      hit = cache.get(f"shared-{i}")  # one writer's answer, whole
      assert hit.text == f"writer {hit.completion_tokens} " * 60
  db = sqlite3.connect(tmp_path / STORE_NAME)
  assert db.execute("PRAGMA integrity_check").fetchone()[0] == "ok"
  db.close()


KILLED_WRITER = """
import os, signal, sys
sys.path.insert(0, {repo!r})
from hieramas_jax.llm.cache import ResponseCache
cache = ResponseCache({store!r})
start, stop, per_commit = int(sys.argv[1]), int(sys.argv[2]), int(sys.argv[3])
for first in range(start, stop, per_commit):
  for i in range(first, min(stop, first + per_commit)):
    cache.put(f"k{{i}}", endpoint="sim", model="qwen3-8b", text=f"record {{i}} " + "x" * (i % 7000),
              prompt_tokens=i, completion_tokens=1, cost_usd=i * 1e-7, attempts=1, latency_s=0.0)
  cache.flush()
  for i in range(first, min(stop, first + per_commit)):
    print(i, flush=True)  # acknowledged: committed
if len(sys.argv) > 4:
  os.kill(os.getpid(), signal.SIGKILL)  # no close(): the WAL keeps every frame
"""


def _check_whole(store_dir, acknowledged) -> int:
  """Every stored row is the record that was written for its key; returns how many there are."""
  db = sqlite3.connect(pathlib.Path(store_dir) / STORE_NAME)
  try:
    assert db.execute("PRAGMA integrity_check").fetchone()[0] == "ok"
  finally:
    db.close()
  with ResponseCache(store_dir) as cache:
    for i in acknowledged:
      assert f"k{i}" in cache, f"acknowledged record k{i} lost"
    n = len(cache)
  db = sqlite3.connect(pathlib.Path(store_dir) / STORE_NAME)
  for key, text, tokens, cost in db.execute("SELECT key, text, prompt_tokens, cost_usd FROM responses"):
    i = int(key[1:])
    assert (text, tokens, cost) == (f"record {i} " + "x" * (i % 7000), i, i * 1e-7), key
  db.close()
  return n


def test_a_writer_killed_halfway_never_corrupts_the_store(tmp_path):
  """SIGKILL at arbitrary moments of a stream of puts and commits: every committed record survives whole,
  nothing half-written appears."""
  script = KILLED_WRITER.format(repo=str(REPO_DIR), store=str(tmp_path))
  acknowledged: list[int] = []
  start = 0
  for kill_after in (40, 75, 130):
    proc = subprocess.Popen([sys.executable, "-c", script, str(start), str(start + 100_000), "5"],
                            stdout=subprocess.PIPE, text=True)
    for n, line in enumerate(proc.stdout, 1):
      acknowledged.append(int(line))
      if n == kill_after:
        break
    proc.kill()  # lands while the next put is in progress (puts are back to back)
    proc.wait()
    start = acknowledged[-1] + 1 + 1000  # the resumed writer starts elsewhere (the killed one may have run on)
    _check_whole(tmp_path, acknowledged)


def test_a_torn_wal_tail_loses_only_the_last_commit(tmp_path):
  """A commit cut off mid-frame (the WAL truncated by a crash): the store opens with the earlier ones."""
  written = tmp_path / "written"
  script = KILLED_WRITER.format(repo=str(REPO_DIR), store=str(written))
  proc = subprocess.run([sys.executable, "-c", script, "0", "20", "1", "kill"], capture_output=True, text=True)
  assert proc.returncode == -signal.SIGKILL and len(proc.stdout.split()) == 20
  wal = written / (STORE_NAME + "-wal")
  assert wal.stat().st_size > 0
  counts = []
  for cut in (100, wal.stat().st_size // 2, wal.stat().st_size - 32):  # bytes cut off the WAL's end
    torn = tmp_path / f"torn-{cut}"
    torn.mkdir()
    shutil.copy(written / STORE_NAME, torn / STORE_NAME)
    shutil.copy(wal, torn / wal.name)
    with open(torn / wal.name, "r+b") as f:
      f.truncate(wal.stat().st_size - cut)
    counts.append(_check_whole(torn, []))
  assert counts[0] == 19 and counts[2] < counts[1] < 19, counts  # the torn commit, and only it, is gone
  assert _check_whole(written, range(20)) == 20


def test_puts_replay_at_once_and_a_failed_commit_is_a_clear_error(tmp_path):
  with ResponseCache(tmp_path) as cache:
    put(cache, "k1", "one")
    assert cache.get("k1").text == "one"  # replayed at once, committed or not
    cache.flush()
    with ResponseCache(tmp_path) as other:  # another connection (another process) sees it after flush
      assert other.get("k1").text == "one"
  db = sqlite3.connect(tmp_path / STORE_NAME)
  db.execute("CREATE TRIGGER refuse BEFORE INSERT ON responses BEGIN SELECT RAISE(ABORT, 'disk says no'); END")
  db.commit()
  db.close()
  cache = ResponseCache(tmp_path)
  put(cache, "k2", "two")
  with pytest.raises(CacheWriteError, match="disk says no.*1 answers are not stored"):
    cache.flush()
  assert cache.get("k2").text == "two"  # this process still replays it
  with pytest.raises(CacheWriteError):
    put(cache, "k3", "three")  # a run stops instead of paying for calls it cannot keep
  with pytest.raises(CacheWriteError):
    cache.close()


def test_rows_hold_no_request_secrets_or_extra_fields(tmp_path):
  with ResponseCache(tmp_path) as cache:
    put(cache, "k1", "answer")
  db = sqlite3.connect(tmp_path / STORE_NAME)
  columns = [c[1] for c in db.execute("PRAGMA table_info(responses)")]
  assert columns == ["key", "endpoint", "model", "text", "prompt_tokens", "completion_tokens", "cost_usd",
                     "attempts", "latency_s", "finish_reason", "reasoning_tokens"]
  db.close()
  assert os.listdir(tmp_path) == [STORE_NAME]  # closed: the WAL is checkpointed and removed


def test_a_v1_store_gains_the_finish_reason_columns_and_keeps_its_rows(tmp_path):
  # A store written before schema 2 (no finish_reason / reasoning_tokens) opens, keeps every row, and
  # replays it with "" / 0; new rows record both.
  db = sqlite3.connect(tmp_path / STORE_NAME)
  db.execute("CREATE TABLE responses (key TEXT NOT NULL UNIQUE, endpoint TEXT NOT NULL, model TEXT NOT NULL, "
             "text TEXT NOT NULL, prompt_tokens INTEGER NOT NULL, completion_tokens INTEGER NOT NULL, "
             "cost_usd REAL NOT NULL, attempts INTEGER NOT NULL, latency_s REAL NOT NULL)")
  db.execute("CREATE TABLE jsonl_imports (name TEXT PRIMARY KEY, size INTEGER NOT NULL, records INTEGER NOT NULL, "
             "torn_lines INTEGER NOT NULL)")
  db.execute("INSERT INTO responses VALUES ('old', 'sim', 'qwen3-8b', 'hello', 3, 4, 0.5, 1, 0.1)")
  db.execute("PRAGMA user_version=1")
  db.commit()
  db.close()
  with ResponseCache(tmp_path) as cache:
    assert cache.get("old") == ("hello", "qwen3-8b", 3, 4, 0.5, 1, "", 0)
    cache.put("new", endpoint="sim", model="gpt-5-mini", text="cut", prompt_tokens=1, completion_tokens=9,
              cost_usd=0.25, attempts=1, latency_s=0.0, finish_reason="length", reasoning_tokens=8)
  with ResponseCache(tmp_path) as cache:
    assert cache.get("new") == ("cut", "gpt-5-mini", 1, 9, 0.25, 1, "length", 8)
    assert cache.get("old").text == "hello"
