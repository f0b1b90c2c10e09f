"""How a benchmark's record reaches results/bench.json: its key, the machine it ran on, its W&B run.

Every benchmark writes one top-level key of one shared file, and each must leave the others' keys (and,
where a run times only part of its benchmark, the other part's figures) as they were. That rule and the
machine description every record carries live here once, not in each benchmark.
"""

from __future__ import annotations

import json
import os
import pathlib
from typing import Any, Mapping, Sequence

from hieramas_jax.experiment.writers import log_result_run
from hieramas_jax.fileio import atomic_write_json
from hieramas_jax.paths import RESULTS_DIR

BENCH_FILE = RESULTS_DIR / "bench.json"


def existing_entry(path: str | os.PathLike, key: str) -> dict[str, Any]:
  """The file's entry under `key` as an earlier run left it ({} if the file or the key is missing)."""
  path = pathlib.Path(path)
  return (json.loads(path.read_text()) if path.exists() else {}).get(key) or {}


def update_json_key(path: str | os.PathLike, key: str, value: Any) -> None:
  """Set one top-level key of a shared JSON file (results/bench.json), keeping the others."""
  path = pathlib.Path(path)
  data = json.loads(path.read_text()) if path.exists() else {}
  data[key] = value
  atomic_write_json(path, data)


def publish(path: str | os.PathLike, key: str, record: Mapping[str, Any]) -> None:
  """Writes `record` as the file's `key` and logs it as the benchmark's W&B run (job_type `bench_<key>`,
  config = the flags of its provenance)."""
  update_json_key(path, key, record)
  flags = (record.get("provenance") or {}).get("flags") or {}
  log_result_run(path, {key: record}, job_type=f"bench_{key}", name=key, group="bench", config=flags)


def load_average() -> list[float]:
  """The 1, 5 and 15 minute load averages, rounded as the records show them."""
  return [round(x, 2) for x in os.getloadavg()]


def machine(load_before: Sequence[float], note: str | None = None) -> dict[str, Any]:
  """The `machine` entry of a record: cores and the load around the run (others' jobs share the cores,
  and a loaded machine slows every figure), with a note on what else shared it."""
  out: dict[str, Any] = {"cpu_count": os.cpu_count(), "load_average_before": [round(x, 2) for x in load_before],
                         "load_average_after": load_average()}
  if note is not None:
    out["note"] = note
  return out
