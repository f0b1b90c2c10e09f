"""The response store's open and lookup at 10k, 100k and 1M entries, JSONL shards against sqlite
(`results/bench.json` key `cache`).

For each size a synthetic cache is made in a scratch directory: JSONL shards in the earlier cache's exact
format (50k records a shard, texts of 200-2,000 characters like the sim's answers), then the sqlite store
is built from them by the one-time import (`import_s`). Each open is measured in a fresh spawned process
(`repeats` of them, median):
  * `jsonl`: what the earlier cache did at every open, every shard parsed into a dict;
  * `store`: `ResponseCache(directory)` (connect, WAL, schema check, the shard listing of the import
    check), then `lookups` random stored keys and as many absent ones.
Memory: the process's peak RSS (VmHWM) growth over the open and the lookups (`rss_growth_mb`). The OS page
cache is warm (the files were just written), the case of a sweep's next point; nothing here drops it.

Goals (issue 11): open <= 50 ms and lookup <= 100 us at 1M entries, memory independent of the size.
"""

from __future__ import annotations

import hashlib
import json
import multiprocessing
import os
import pathlib
import shutil
import statistics
import tempfile
import time
from typing import Any, Mapping, Sequence

import numpy as np

from hieramas_jax.bench.results import machine, publish
from hieramas_jax.experiment.provenance import provenance
from hieramas_jax.llm.cache import STORE_NAME, CachedResponse, ResponseCache, iter_jsonl_shard

KEY = "cache"
SHARD_RECORDS = 50_000
WORDS = ("the", "answer", "is", "step", "therefore", "we", "compute", "(B)", "x", "=", "so", "let", "\\boxed{3}",
         "first", "note", "that", "\u2013", "sum", "of", "roots")
GOALS = {"open_ms_1m": 50.0, "lookup_us_1m": 100.0}


def _key(i: int) -> str:
  return hashlib.sha256(f"request {i}".encode()).hexdigest()


def _write_jsonl(directory: pathlib.Path, n: int, seed: int) -> None:
  """n records in the earlier cache's line format, `SHARD_RECORDS` to a shard."""
  rng = np.random.default_rng([seed, n])
  words = np.array(WORDS)
  # A pool of answers of 40-400 words (~200-2,000 characters), each record one of them plus its id.
  pool = [" ".join(words[rng.integers(0, len(words), size=int(k))]) for k in rng.integers(40, 400, size=2000)]
  picks = rng.integers(0, len(pool), size=n)
  for start in range(0, n, SHARD_RECORDS):
    lines = []
    for i in range(start, min(n, start + SHARD_RECORDS)):
      text = f"{pool[picks[i]]} (request {i})"
      lines.append(json.dumps({"key": _key(i), "endpoint": "sim:seed0:bench", "model": "qwen3-8b", "text": text,
                               "prompt_tokens": 3 * len(text) // 4, "completion_tokens": len(text) // 4,
                               "cost_usd": len(text) * 1.3e-9, "attempts": 1, "latency_s": 0.5},
                              separators=(",", ":")))
    (directory / f"20260101T{start // SHARD_RECORDS:06d}-1-bench.jsonl").write_text("\n".join(lines) + "\n")


def _memory_mb(field: str) -> float:
  """VmRSS (now) or VmHWM (peak) of this process; unlike ru_maxrss, the peak is not inherited through exec."""
  with open("/proc/self/status") as f:
    for line in f:
      if line.startswith(field + ":"):
        return int(line.split()[1]) / 1024
  raise RuntimeError(f"no {field} in /proc/self/status")


def _measure(kind: str, directory: str, present: list[str], absent: list[str], conn) -> None:
  """Child process: open the cache `kind` ways, look keys up, report times and memory."""
  rss_before = _memory_mb("VmRSS")
  start = time.perf_counter()
  if kind == "jsonl":  # the earlier cache's open: every shard into one dict, first record wins
    index: dict[str, CachedResponse] = {}
    for shard in sorted(pathlib.Path(directory).glob("*.jsonl")):
      for row in iter_jsonl_shard(shard):
        if row is not None:
          index.setdefault(row[0], CachedResponse(row[3], row[2], row[4], row[5], row[6], row[7]))
    get = index.get
  else:
    cache = ResponseCache(directory)
    assert cache.imported == 0  # already imported when the store was built
    get = cache.get
  open_s = time.perf_counter() - start
  first = time.perf_counter()
  assert get(present[0]) is not None
  first_lookup_s = time.perf_counter() - first
  times = []
  for key in present:
    t = time.perf_counter()
    hit = get(key)
    times.append(time.perf_counter() - t)
    assert hit is not None
  miss_start = time.perf_counter()
  for key in absent:
    assert get(key) is None
  miss_s = (time.perf_counter() - miss_start) / len(absent)
  conn.send({"open_ms": open_s * 1e3, "first_lookup_us": first_lookup_s * 1e6,
             "lookup_us_mean": statistics.fmean(times) * 1e6,
             "lookup_us_median": statistics.median(times) * 1e6, "lookup_us_p99": float(np.percentile(times, 99)) * 1e6,
             "miss_us_mean": miss_s * 1e6, "rss_growth_mb": _memory_mb("VmHWM") - rss_before})


def _in_fresh_process(kind: str, directory: pathlib.Path, present: list[str], absent: list[str]) -> dict:
  ctx = multiprocessing.get_context("spawn")
  parent, child = ctx.Pipe()
  proc = ctx.Process(target=_measure, args=(kind, str(directory), present, absent, child))
  proc.start()
  result = parent.recv()
  proc.join()
  if proc.exitcode != 0:
    raise RuntimeError(f"{kind} measurement process exited with {proc.exitcode}")
  return result


def median_of(runs: list[dict]) -> dict:
  """Field by field, the median of several processes' measurements (rounded to 3 places)."""
  return {k: round(statistics.median(r[k] for r in runs), 3) for k in runs[0]}


def bench_size(root: pathlib.Path, n: int, *, repeats: int, jsonl_repeats: int, lookups: int, seed: int) -> dict:
  """One store size: write the shards, import them, time both opens; the scratch files are removed."""
  directory = root / f"n{n}"
  directory.mkdir(parents=True)
  t = time.perf_counter()
  _write_jsonl(directory, n, seed)
  write_s = time.perf_counter() - t
  t = time.perf_counter()
  with ResponseCache(directory) as cache:
    assert cache.imported == n, (cache.imported, n)
  import_s = time.perf_counter() - t
  rng = np.random.default_rng([seed, n, 1])
  present = [_key(int(i)) for i in rng.integers(0, n, size=lookups)]
  absent = [_key(n + int(i)) for i in range(lookups)]
  out = {"entries": n, "jsonl_mb": round(sum(p.stat().st_size for p in directory.glob("*.jsonl")) / 2**20, 1),
         "store_mb": round((directory / STORE_NAME).stat().st_size / 2**20, 1),
         "jsonl_write_s": round(write_s, 2), "import_s": round(import_s, 2)}
  for kind, times in (("store", repeats), ("jsonl", jsonl_repeats)):
    out[kind] = median_of([_in_fresh_process(kind, directory, present, absent) for _ in range(times)])
  shutil.rmtree(directory)
  return out


def summarize(results: Mapping[str, dict]) -> dict:
  """The `cache` record's figures from the per-size results (keyed by the size as a string): the 1M
  figures the goals name (None when 1M was not measured), whether they are met, memory by size."""
  largest = max(int(n) for n in results)
  at_1m = results[str(largest)] if largest == 1_000_000 else None
  out: dict = {"by_entries": dict(results)}
  out.update({
      "entries_largest": largest,
      "open_ms_1m": at_1m["store"]["open_ms"] if at_1m else None,
      "lookup_us_1m": at_1m["store"]["lookup_us_mean"] if at_1m else None,
      "jsonl_open_ms_1m": at_1m["jsonl"]["open_ms"] if at_1m else None,
      "goals": dict(GOALS),
  })
  out["met"] = bool(out["open_ms_1m"] is not None and out["open_ms_1m"] <= GOALS["open_ms_1m"]
                    and out["lookup_us_1m"] <= GOALS["lookup_us_1m"])
  out["store_rss_growth_mb"] = {n: r["store"]["rss_growth_mb"] for n, r in results.items()}
  out["jsonl_rss_growth_mb"] = {n: r["jsonl"]["rss_growth_mb"] for n, r in results.items()}
  return out


def run(*, sizes: Sequence[int], repeats: int, jsonl_repeats: int, lookups: int, seed: int, workdir: str | None,
        out: str, flags: Mapping[str, Any]) -> dict:
  """Measures every size (printing each as it lands) and writes key `cache` of `out` (provenance: `flags`).

  The scratch files go under `workdir`, or a new temporary directory removed afterwards.
  """
  load_before = os.getloadavg()
  root = pathlib.Path(workdir or tempfile.mkdtemp(prefix="bench-cache-"))
  try:
    results = {}
    for n in sizes:
      results[str(n)] = bench_size(root, n, repeats=repeats, jsonl_repeats=jsonl_repeats, lookups=lookups,
                                   seed=seed)
      print(json.dumps(results[str(n)]), flush=True)
  finally:
    if workdir is None:
      shutil.rmtree(root, ignore_errors=True)
  record = summarize(results)
  record["machine"] = machine(load_before,
                              "2 cores shared with other work; OS page cache warm (files just written)")
  record["provenance"] = provenance(seed=seed, flags=flags)
  publish(out, KEY, record)
  return record
