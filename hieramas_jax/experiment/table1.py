"""Table 1 for the methods that exist: every method x benchmark x pool on one split, one backend.

Each cell is one `evaluate` run with its own run directory (`<run_root>/<backend>-seed<s>-<split>/
<pool>/<benchmark>/<method>/`: config.json, items.jsonl, traces.jsonl, metrics.jsonl, summary.json),
so an interrupted reproduction resumes cell by cell and item by item. The table files are written
once, atomically, at the very end: a failed run leaves no half-written table.
"""

from __future__ import annotations

import asyncio
import dataclasses
import json
import logging
import pathlib
from typing import Any, Mapping, Sequence

from hieramas_jax.benchmarks.data import check_benchmark
from hieramas_jax.experiment.backend import Backend
from hieramas_jax.experiment.evaluate import evaluate, summarise
from hieramas_jax.experiment.provenance import atomic_write_json, atomic_write_text, provenance
from hieramas_jax.experiment.writers import MetricWriter, make_writers
from hieramas_jax.llm.registry import get_pool
from hieramas_jax.mas.runtime import RunSettings
from hieramas_jax.methods.api import RunContext, check_method_names, make_method
from hieramas_jax.report.table1 import cell_key, table1_markdown

log = logging.getLogger(__name__)

SPLITS = ("train", "val", "test")


class InvalidRunError(ValueError):
  """Flags that describe no valid run (empty or duplicate lists, unknown split, bad limit)."""


class RunConfigMismatchError(ValueError):
  """A run directory holds results of a different configuration: refuse to mix them."""


@dataclasses.dataclass(frozen=True)
class Table1Spec:
  """What to run. Validated on construction, before anything starts."""

  methods: tuple[str, ...]
  benchmarks: tuple[str, ...]
  pools: tuple[str, ...]
  split: str = "test"
  seed: int = 0
  limit: int | None = None

  def __post_init__(self):
    for name, values in (("methods", self.methods), ("benchmarks", self.benchmarks), ("pools", self.pools)):
      if not values:
        raise InvalidRunError(f"--{name} is empty")
      if len(set(values)) != len(values):
        raise InvalidRunError(f"--{name} lists a name twice: {','.join(values)}")
    check_method_names(self.methods)
    for b in self.benchmarks:
      check_benchmark(b)
    for p in self.pools:
      get_pool(p)
    if self.split not in SPLITS:
      raise InvalidRunError(f"unknown split {self.split!r}; known: {', '.join(SPLITS)}")
    if self.limit is not None and self.limit < 1:
      raise InvalidRunError(f"--limit must be >= 1, got {self.limit}")


def prepare_run_dir(run_dir: pathlib.Path, config: Mapping[str, Any]) -> pathlib.Path:
  """Creates a run directory with config.json, or checks that an existing one ran the same config."""
  path = run_dir / "config.json"
  if path.exists():
    old = json.loads(path.read_text())
    if old != json.loads(json.dumps(config)):
      raise RunConfigMismatchError(f"{run_dir} holds a run with another configuration ({path}); "
                                   "use another --run_root or delete it")
  else:
    atomic_write_json(path, config)
  return run_dir


async def run_table1(spec: Table1Spec, backend: Backend, *, out_dir: str | pathlib.Path,
                     run_root: str | pathlib.Path, flags: Mapping[str, Any], command: str | None = None,
                     max_queries: int = 32, writers: Sequence[MetricWriter] = (),
                     progress: bool = True) -> dict[str, Any]:
  """Runs every cell, writes `<out_dir>/table1.json` and `.md` (`table1_limit<N>.*` with a limit).

  Args:
    spec: methods, benchmarks, pools, split, seed, limit.
    backend: the open client and its endpoint.
    out_dir: where table1.json / table1.md go (the repo's results/ for the real thing).
    run_root: parent of the per-cell run directories.
    flags: the run's flags, for provenance and config.json (secrets redacted there).
    command: the exact command (default: this process's argv).
    max_queries: the one global bound on queries in flight.
    writers: receive each cell's summary (console, W&B).
    progress: tqdm bars.
  """
  from hieramas_jax.benchmarks.splits import load_split  # pylint: disable=import-outside-toplevel
  prov = provenance(seed=spec.seed, benchmarks=spec.benchmarks, flags=flags, backend=backend.label,
                    command=command)
  root = pathlib.Path(run_root) / f"{safe_name(backend.endpoint.name)}_run-seed{spec.seed}_{spec.split}"
  items = {}
  for b in spec.benchmarks:
    split_items = list(load_split(b, spec.split))
    items[b] = split_items[:spec.limit] if spec.limit else split_items
  bound = asyncio.Semaphore(max_queries)
  settings = RunSettings()
  cells: dict[str, Any] = {}
  step = 0
  for pool_name in spec.pools:
    ctx = RunContext(backend.client, get_pool(pool_name), spec.seed, settings)
    for b in spec.benchmarks:
      for m in spec.methods:
        method = make_method(m)
        run_dir = prepare_run_dir(root / pool_name / b / m, {
            "method": m, "benchmark": b, "pool": pool_name, "split": spec.split, "seed": spec.seed,
            "endpoint": backend.endpoint.name, "settings": dataclasses.asdict(settings),
            "method_config": _method_config(method)})
        cell_writers = make_writers(run_dir, flags, use_wandb=False, name=f"{pool_name}/{b}/{m}")
        try:
          results = await evaluate(method, items[b], ctx, run_dir=run_dir, bound=bound,
                                   writers=[cell_writers], progress=progress, desc=f"{pool_name} {b} {m}")
          summary = summarise(results)
          cell_writers.write_summary(summary)
        finally:
          cell_writers.close()
        cells[cell_key(m, b, pool_name)] = {"method": m, "benchmark": b, "pool": pool_name,
                                            "run_dir": str(run_dir), **summary}
        step += 1
        for w in writers:
          w.write_scalars(step, {f"{pool_name}/{b}/{m}/accuracy": summary["accuracy"],
                                 f"{pool_name}/{b}/{m}/cost_usd": summary["cost_usd"]})
          w.write_summary({f"{pool_name}/{b}/{m}": f"acc={summary['accuracy']:.2f}% "
                                                   f"cost=${summary['cost_usd']:.4f} n={summary['n']}"})
  record = {"methods": list(spec.methods), "benchmarks": list(spec.benchmarks), "pools": list(spec.pools),
            "split": spec.split, "limit": spec.limit, "endpoint": backend.endpoint.name, "cells": cells,
            "averages": {m: sum(cells[cell_key(m, b, p)]["accuracy"] for b in spec.benchmarks
                                for p in spec.pools) / (len(spec.benchmarks) * len(spec.pools))
                         for m in spec.methods},
            "provenance": prov}
  out_dir = pathlib.Path(out_dir)
  stem = table1_stem(spec)
  atomic_write_json(out_dir / f"{stem}.json", record)
  atomic_write_text(out_dir / f"{stem}.md", table1_markdown(record))
  return record


def table1_stem(spec: Table1Spec) -> str:
  """"table1", or "table1_limit<N>" for a quick run, so a quick run never overwrites the full table."""
  return "table1" if spec.limit is None else f"table1_limit{spec.limit}"


def safe_name(name: str) -> str:
  """An endpoint name as a directory name ("sim:seed0:ab12" -> "sim-seed0-ab12")."""
  return "".join(c if c.isalnum() or c in "-_." else "-" for c in name)


def _method_config(method: Any) -> dict[str, Any]:
  if dataclasses.is_dataclass(method):
    return dataclasses.asdict(method)
  return {"name": method.name}
