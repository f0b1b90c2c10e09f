"""Response-store benchmark: open and lookup at 10k, 100k and 1M entries, the JSONL shards against sqlite.

Writes `results/bench.json` key `cache` (with provenance). For each size a synthetic cache is made in a
scratch directory: JSONL shards in the earlier cache's exact format (50k records a shard, texts of
200-2,000 characters like the sim's answers), then the sqlite store is built from them by the one-time
import (`import_s`). Each open is measured in a fresh spawned process (`--repeats` of them, median):
  * `jsonl`: what the earlier cache did at every open, every shard parsed into a dict;
  * `store`: `ResponseCache(directory)` (connect, WAL, schema check, the shard listing of the import
    check), then `--lookups` random stored keys and as many absent ones.
Memory: the process's peak RSS (VmHWM) growth over the open and the lookups (`rss_growth_mb`). The OS page
cache is warm (the files were just written), the case of a sweep's next point; nothing here drops it.

Goals (issue 11): open <= 50 ms and lookup <= 100 us at 1M entries, memory independent of the size.

Run: `python experiments/bench_cache.py` (or `make bench`).
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

import numpy as np
from absl import flags

from hieramas_jax.experiment import cli
from hieramas_jax.experiment.provenance import provenance, update_json_key
from hieramas_jax.experiment.writers import log_bench_run
from hieramas_jax.llm.cache import STORE_NAME, CachedResponse, ResponseCache, iter_jsonl_shard
from hieramas_jax.paths import RESULTS_DIR

FLAGS = flags.FLAGS
flags.DEFINE_list("sizes", ["10000", "100000", "1000000"], "Store sizes (entries).")
flags.DEFINE_integer("repeats", 3, "Fresh processes per open measurement (median reported).")
flags.DEFINE_integer("jsonl_repeats", 1, "Fresh processes per JSONL open (the slow baseline: seconds, not ms).")
flags.DEFINE_integer("lookups", 10_000, "Random stored keys (and as many absent ones) looked up per open.")
flags.DEFINE_integer("seed", 0, "Seeds the synthetic records and the lookup order.")
flags.DEFINE_string("workdir", None, "Scratch directory (default: a new temp dir, removed afterwards).")
flags.DEFINE_string("out", str(RESULTS_DIR / "bench.json"), "Results file (key `cache`).")

SHARD_RECORDS = 50_000
WORDS = ("the", "answer", "is", "step", "therefore", "we", "compute", "(B)", "x", "=", "so", "let", "\\boxed{3}",
         "first", "note", "that", "\u2013", "sum", "of", "roots")


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


def _median_of(runs: list[dict]) -> dict:
  return {k: round(statistics.median(r[k] for r in runs), 3) for k in runs[0]}


def bench_size(root: pathlib.Path, n: int) -> dict:
  directory = root / f"n{n}"
  directory.mkdir(parents=True)
  t = time.perf_counter()
  _write_jsonl(directory, n, FLAGS.seed)
  write_s = time.perf_counter() - t
  t = time.perf_counter()
  with ResponseCache(directory) as cache:
    assert cache.imported == n, (cache.imported, n)
  import_s = time.perf_counter() - t
  rng = np.random.default_rng([FLAGS.seed, n, 1])
  present = [_key(int(i)) for i in rng.integers(0, n, size=FLAGS.lookups)]
  absent = [_key(n + int(i)) for i in range(FLAGS.lookups)]
  out = {"entries": n, "jsonl_mb": round(sum(p.stat().st_size for p in directory.glob("*.jsonl")) / 2**20, 1),
         "store_mb": round((directory / STORE_NAME).stat().st_size / 2**20, 1),
         "jsonl_write_s": round(write_s, 2), "import_s": round(import_s, 2)}
  for kind, repeats in (("store", FLAGS.repeats), ("jsonl", FLAGS.jsonl_repeats)):
    out[kind] = _median_of([_in_fresh_process(kind, directory, present, absent) for _ in range(repeats)])
  shutil.rmtree(directory)
  return out


def main():
  load_before = os.getloadavg()
  sizes = [int(s) for s in FLAGS.sizes]
  root = pathlib.Path(FLAGS.workdir or tempfile.mkdtemp(prefix="bench-cache-"))
  try:
    results = {}
    for n in sizes:
      results[str(n)] = bench_size(root, n)
      print(json.dumps(results[str(n)]), flush=True)
  finally:
    if FLAGS.workdir is None:
      shutil.rmtree(root, ignore_errors=True)
  out: dict = {"by_entries": results}
  largest = results[str(max(sizes))]
  out.update({
      "entries_largest": max(sizes),
      "open_ms_1m": largest["store"]["open_ms"] if max(sizes) == 1_000_000 else None,
      "lookup_us_1m": largest["store"]["lookup_us_mean"] if max(sizes) == 1_000_000 else None,
      "jsonl_open_ms_1m": largest["jsonl"]["open_ms"] if max(sizes) == 1_000_000 else None,
      "goals": {"open_ms_1m": 50.0, "lookup_us_1m": 100.0},
  })
  out["met"] = bool(out["open_ms_1m"] is not None and out["open_ms_1m"] <= 50.0
                    and out["lookup_us_1m"] <= 100.0)
  out["store_rss_growth_mb"] = {n: r["store"]["rss_growth_mb"] for n, r in results.items()}
  out["jsonl_rss_growth_mb"] = {n: r["jsonl"]["rss_growth_mb"] for n, r in results.items()}
  out["machine"] = {"cpu_count": os.cpu_count(), "load_average_before": [round(x, 2) for x in load_before],
                    "load_average_after": [round(x, 2) for x in os.getloadavg()],
                    "note": "2 cores shared with other work; OS page cache warm (files just written)"}
  flag_names = ("sizes", "repeats", "jsonl_repeats", "lookups", "seed")
  out["provenance"] = provenance(seed=FLAGS.seed, flags={k: FLAGS[k].value for k in flag_names})
  update_json_key(FLAGS.out, "cache", out)
  log_bench_run(FLAGS.out, "cache", out)


if __name__ == "__main__":
  cli.run(main)
