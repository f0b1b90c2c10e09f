"""Measures the simulated pool against its calibration table through the real Base pipeline.

For each model and benchmark: the Base prompt, that model, temperature 0.2, sent over HTTP through
the suite's client, graded by the real graders: exactly what the Base method of Table 1 does, with
the model fixed. Items: MATH-500 all 500; MMLU-Redux a seeded sample (500 by default, of 3,000);
HumanEval+ all 164, repeated with sample indices 0..k-1 (3 by default) to cut the noise of a small
benchmark (independent draws for the sim, so n = 164 x k graded answers).

A cell whose measured accuracy is more than `tolerance` points from its target is flagged.
"""

from __future__ import annotations

import asyncio
import hashlib
import json
import math
import pathlib
from typing import Any, Mapping, Sequence

import numpy as np

from hieramas_jax.benchmarks.data import load_items
from hieramas_jax.experiment.backend import Backend
from hieramas_jax.experiment.evaluate import evaluate, summarise
from hieramas_jax.experiment.provenance import atomic_write_json, atomic_write_text, provenance
from hieramas_jax.experiment.table1 import prepare_run_dir, safe_name
from hieramas_jax.llm.registry import MODELS, POOLS, get_model
from hieramas_jax.methods.api import RunContext
from hieramas_jax.methods.single import SingleCall
from hieramas_jax.report.table1 import BENCHMARK_TITLES

DEFAULT_TOLERANCE_PTS = 3.0


def calibration_items(benchmark: str, n_items: int, seed: int) -> list:
  """All items when the benchmark has at most `n_items`, else a seeded sample (sorted by file order)."""
  items = list(load_items(benchmark))
  if len(items) <= n_items:
    return items
  rng = np.random.default_rng([seed, 7919])  # its own stream: the sample never shifts with other draws
  idx = np.sort(rng.choice(len(items), size=n_items, replace=False))
  return [items[i] for i in idx]


async def run_calibration(backend: Backend, *, models: Sequence[str], benchmarks: Sequence[str],
                          n_items: int, code_samples: int, seed: int, out_dir: str | pathlib.Path,
                          run_root: str | pathlib.Path, flags: Mapping[str, Any],
                          tolerance: float = DEFAULT_TOLERANCE_PTS, max_queries: int = 64,
                          progress: bool = True, command: str | None = None) -> dict[str, Any]:
  """Measures every (model, benchmark) cell; writes calibration.json / .md into out_dir."""
  from hieramas_jax.sim import calibration_targets  # pylint: disable=import-outside-toplevel
  prov = provenance(seed=seed, benchmarks=benchmarks, flags=flags, backend=backend.label, command=command)
  root = pathlib.Path(run_root) / f"{safe_name(backend.endpoint.name)}_run-seed{seed}"
  bound = asyncio.Semaphore(max_queries)
  # The pool only matters for methods that pick their model from it; SingleCall's model is fixed.
  ctx = RunContext(backend.client, POOLS["gpt-5-mini"], seed)
  cells = []
  items_per_benchmark = {}
  for b in benchmarks:
    items = calibration_items(b, n_items, seed)
    items_per_benchmark[b] = len(items)
    repeats = code_samples if b == "humaneval_plus" else 1
    for m in models:
      results = []
      for k in range(repeats):
        method = SingleCall(cot=False, model=m, sample_index=k)
        run_dir = prepare_run_dir(root / m / b / f"sample{k}", {
            "model": m, "benchmark": b, "sample_index": k, "item_ids_sha": _ids_digest(items),
            "endpoint": backend.endpoint.name, "temperature": method.temperature,
            "max_tokens": method.max_tokens})
        results += await evaluate(method, items, ctx, run_dir=run_dir, bound=bound, progress=progress,
                                  desc=f"{m} {b} s{k}", save_traces=False)
      s = summarise(results)
      tgt = calibration_targets.target(m, b)
      measured = s["accuracy"]
      target_pct = 100.0 * tgt.accuracy
      p = measured / 100.0
      cells.append({"model": m, "benchmark": b, "target": round(target_pct, 2), "measured": round(measured, 2),
                    "diff": round(measured - target_pct, 2),
                    "stderr": round(100.0 * math.sqrt(max(p * (1 - p), 1e-12) / s["n"]), 2),
                    "n": s["n"], "n_items": len(items), "repeats": repeats,
                    "off": abs(measured - target_pct) > tolerance, "source": tgt.source, "note": tgt.note,
                    "cost_usd": s["cost_usd"]})
  record = {"tolerance_pts": tolerance, "n_items": n_items, "items_per_benchmark": items_per_benchmark,
            "code_samples": code_samples, "endpoint": backend.endpoint.name,
            "pipeline": "Base prompt, single call, temperature 0.2, max_tokens 2048, real graders",
            "cells": cells, "n_off": sum(c["off"] for c in cells),
            "max_abs_diff": max((abs(c["diff"]) for c in cells), default=0.0), "provenance": prov}
  out_dir = pathlib.Path(out_dir)
  atomic_write_json(out_dir / "calibration.json", record)
  atomic_write_text(out_dir / "calibration.md", calibration_markdown(record))
  return record


def _ids_digest(items) -> str:
  return hashlib.sha256("\n".join(it.id for it in items).encode()).hexdigest()[:16]


def _items_sentence(record: Mapping[str, Any]) -> str:
  parts = []
  for b, n in record["items_per_benchmark"].items():
    total = len(load_items(b))
    what = f"all {total}" if n == total else f"a seeded sample of {n} of {total}"
    if b == "humaneval_plus" and record["code_samples"] > 1:
      what += (f" x {record['code_samples']} sample indices (independent draws, to cut the noise of a "
               "small benchmark)")
    parts.append(f"{BENCHMARK_TITLES.get(b, b)} {what}")
  return "; ".join(parts)


def calibration_markdown(record: Mapping[str, Any]) -> str:
  prov = record["provenance"]
  sim = prov.get("backend") == "sim"
  lines = ["# Calibration of the " + ("simulated pool" if sim else f"{prov.get('backend')} endpoint")
           + ": target vs measured Base accuracy", ""]
  if sim:
    lines += [f"**{prov['label']}.**", ""]
  lines += [f"Pipeline: {record['pipeline']}. Items: {_items_sentence(record)}. Cells more than "
            f"{record['tolerance_pts']:g} points off their target are flagged **OFF**; ±SE is the binomial "
            "standard error of the measured accuracy. "
            "Targets and their sources: `hieramas_jax/sim/calibration_targets.py` "
            "(paper_base = HieraMAS Table 1 Base row; public->base = public figure moved to the Base "
            "prompt; assumption = no published figure, rule in the note).", "",
            f"Cells off: {record['n_off']} of {len(record['cells'])}; largest |diff|: "
            f"{record['max_abs_diff']:.2f} points.", "",
            "| Model | Benchmark | Target % | Measured % | Diff | ±SE | n | Source | Flag |",
            "|---|---|---|---|---|---|---|---|---|"]
  for c in record["cells"]:
    lines.append(f"| {c['model']} | {BENCHMARK_TITLES.get(c['benchmark'], c['benchmark'])} | {c['target']:.2f} | "
                 f"{c['measured']:.2f} | {c['diff']:+.2f} | {c['stderr']:.2f} | {c['n']} | {c['source']} | "
                 f"{'**OFF**' if c['off'] else 'ok'} |")
  lines += ["", "Notes per cell:", ""]
  lines += [f"- {c['model']} / {c['benchmark']}: {c['note']}" for c in record["cells"]]
  lines += ["", "## Provenance", "", "Command:", "", "```", prov["command"], "```", ""]
  lines += ["```json", json.dumps({k: v for k, v in prov.items() if k != "command"}, indent=2), "```", ""]
  return "\n".join(lines)


def check_models(models: Sequence[str]) -> list[str]:
  for m in models:
    get_model(m)
  return list(models)

