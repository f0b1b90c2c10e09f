"""Train and evaluate HieraMAS on one benchmark: the body of `experiments/train_hieramas.py`.

A run directory (`<run_root>/<run_name>/`) holds:
  config.json                 the HieraMAS config, endpoint, settings and split sizes (a rerun with another
                              config into the same directory is refused)
  metrics.jsonl               stage-1 steps and validations, stage-2 epochs, test progress (JSONL writer;
                              after a resume a step may appear twice: the last line wins)
  checkpoints/stage1/         orbax latest + best, best.json (step, metric, parameter hash)
  checkpoints/stage2/         classifier parameters, done.json (hash, epoch history)
  stage2_data.npz             the stage-2 rollouts (graphs, rewards, labels)
  items.jsonl, traces.jsonl   per test query: grade, cost, chosen graph and LLMs (trace summary), full trace
  chosen.jsonl                per test query: graph index, density, edges, LLM per position
  summary.json                the test summary (same numbers as the results file)
and `<out_dir>/hieramas_<benchmark>_<pool>[_<tag>].json` gets the results with provenance.
"""

from __future__ import annotations

import collections
import dataclasses
import hashlib
import json
import pathlib
from typing import Any, Mapping, Sequence

import numpy as np

from hieramas_jax.benchmarks.data import Item
from hieramas_jax.experiment.backend import Backend
from hieramas_jax.experiment.evaluate import ItemResult, evaluate, summarise
from hieramas_jax.experiment.provenance import atomic_write_json, atomic_write_text, provenance
from hieramas_jax.experiment.table1 import prepare_run_dir
from hieramas_jax.experiment.writers import MetricWriter, make_writers
from hieramas_jax.llm.registry import get_pool
from hieramas_jax.mas.runtime import RunSettings
from hieramas_jax.methods.api import RunContext
from hieramas_jax.methods.hieramas.config import HieraMASConfig
from hieramas_jax.methods.hieramas.method import HieraMAS, warm_up
from hieramas_jax.methods.hieramas.rollout import system_rewards

DENSITY_BANDS = ((0.0, 1 / 3), (1 / 3, 2 / 3), (2 / 3, 1.0 + 1e-9))


class PrefixedWriter:
  """Prefixes scalar names and offsets steps, so test progress follows training in one W&B history."""

  def __init__(self, writer: MetricWriter, prefix: str, offset: int):
    self.writer, self.prefix, self.offset = writer, prefix, offset

  def write_scalars(self, step: int, scalars: Mapping[str, float]) -> None:
    self.writer.write_scalars(self.offset + step, {f"{self.prefix}{k}": v for k, v in scalars.items()})

  def write_summary(self, summary: Mapping[str, Any]) -> None:
    self.writer.write_summary(summary)

  def close(self) -> None:
    pass


def results_name(cfg: HieraMASConfig, tag: str = "") -> str:
  """hieramas_<benchmark>_<pool>[_<tag>]; `tag` may name config fields, e.g. "k{k_pool}" -> "k50"."""
  tag = tag.format(**cfg.to_json()) if tag else ""
  return f"hieramas_{cfg.benchmark}_{cfg.pool}" + (f"_{tag}" if tag else "")


def _ids_sha(items: Sequence[Item]) -> str:
  return hashlib.sha256("\n".join(it.id for it in items).encode()).hexdigest()


def preferences(results: Sequence[ItemResult], roles: Sequence[str]) -> dict[str, Any]:
  """Per-position LLM preference counts over the test queries (paper Fig. 4 in counts)."""
  by_kind: dict[str, collections.Counter] = {"proposer": collections.Counter(), "synthesizer": collections.Counter()}
  by_role = {r: {"proposer": collections.Counter(), "synthesizer": collections.Counter()} for r in roles}
  by_position: dict[str, collections.Counter] = collections.defaultdict(collections.Counter)
  for res in results:
    for role, row in zip(roles, res.trace["choices"]):
      for p, name in enumerate(row):
        kind = "synthesizer" if p == len(row) - 1 else "proposer"
        by_kind[kind][name] += 1
        by_role[role][kind][name] += 1
        by_position["synthesizer" if kind == "synthesizer" else f"proposer:{p}"][name] += 1
  def plain(c):
    return dict(sorted(c.items(), key=lambda kv: (-kv[1], kv[0])))
  return {"proposer": plain(by_kind["proposer"]), "synthesizer": plain(by_kind["synthesizer"]),
          "by_position": {k: plain(v) for k, v in sorted(by_position.items())},
          "by_role": {r: {k: plain(v) for k, v in d.items()} for r, d in by_role.items()}}


def graph_statistics(results: Sequence[ItemResult]) -> dict[str, Any]:
  """Densities and identities of the chosen graphs (paper Fig. 3: most frequent graphs, density range)."""
  dens = np.array([r.trace["graph_density"] for r in results], np.float64)
  counts = collections.Counter(r.trace["graph_index"] for r in results)
  kinds = collections.Counter(r.trace["graph_kind"] for r in results)
  edges = {r.trace["graph_index"]: r.trace["graph_edges"] for r in results}
  density_of = {r.trace["graph_index"]: r.trace["graph_density"] for r in results}
  return {"mean": float(dens.mean()), "min": float(dens.min()), "max": float(dens.max()),
          "bands": {f"{lo:.2f}-{min(hi, 1.0):.2f}": int(((dens >= lo) & (dens < hi)).sum()) for lo, hi in DENSITY_BANDS},
          "kinds": dict(kinds), "distinct_graphs": len(counts),
          "top_graphs": [{"index": int(g), "count": int(c), "density": density_of[g], "edges": edges[g]}
                         for g, c in counts.most_common(5)]}


def test_summary(results: Sequence[ItemResult], cfg: HieraMASConfig, roles: Sequence[str]) -> dict[str, Any]:
  base = summarise(results)
  correct = np.array([r.correct for r in results], bool)
  cost = np.array([r.cost_usd for r in results])
  reward = system_rewards(correct, cost, k=cfg.reward_k)
  active = np.array([len(r.trace["active_roles"]) for r in results])
  return {"accuracy": base["accuracy"], "n": base["n"], "n_correct": base["n_correct"],
          "cost_usd": base["cost_usd"], "mean_cost_usd": float(cost.mean()),
          "mean_system_reward": float(reward.mean()), "n_calls": base["n_calls"],
          "mean_active_roles": float(active.mean()), "num_roles": len(roles),
          "graph_density": graph_statistics(results), "llm_preferences": preferences(results, roles)}


async def train_and_evaluate(cfg: HieraMASConfig, backend: Backend, *, train: Sequence[Item], val: Sequence[Item],
                             test: Sequence[Item], run_dir: str | pathlib.Path, out_dir: str | pathlib.Path,
                             flags: Mapping[str, Any], tag: str = "", command: str | None = None,
                             use_wandb: bool = False, run_name: str | None = None, progress: bool = True,
                             load_run: str | pathlib.Path | None = None) -> dict[str, Any]:
  """Stage 1, stage 2, inference on `test`; writes the run directory and the results file; returns the record.

  `load_run`: take the trained policy and classifier from that finished run directory instead of
  training (inference-only ablations and the K sweep; the training settings must match).
  """
  if not test:
    raise ValueError("no test queries to evaluate")
  run_dir = pathlib.Path(run_dir)
  settings = RunSettings()
  prepare_run_dir(run_dir, {
      "hieramas": cfg.to_json(), "load_run": None if load_run is None else str(load_run),
      "endpoint": backend.endpoint.name, "settings": dataclasses.asdict(settings),
      "splits": {name: {"n": len(items), "ids_sha256": _ids_sha(items)}
                 for name, items in (("train", train), ("val", val), ("test", test))}})
  writers = make_writers(run_dir, flags, use_wandb=use_wandb, name=run_name or run_dir.name, group="hieramas")
  try:
    ctx = RunContext(backend.client, get_pool(cfg.pool), cfg.seed, settings)
    method = HieraMAS(cfg, run_dir, writer=writers, progress=progress)
    if load_run is not None:
      method.load(load_run)
      fit_summary = method.fit_summary
    else:
      fit_summary = await method.fit(train, val, ctx=ctx)
    # Embed the whole test split in batches now; solve() then reads each query's texts from the cache.
    method.embeddings.query_role(test)
    method.embeddings.queries(test)
    warm_up(method, test[0])
    offset = cfg.stage1_steps + cfg.stage2_epochs
    results = await evaluate(method, test, ctx, run_dir=run_dir, bound=cfg.max_queries,
                             writers=[PrefixedWriter(writers, "test/", offset)], progress=progress,
                             desc=f"hieramas {cfg.benchmark} test")
    summary = test_summary(results, cfg, method.setup.roles)
    chosen = [{"item_id": r.item_id, "correct": r.correct, "cost_usd": r.cost_usd,
               **{k: r.trace[k] for k in ("graph_index", "graph_density", "graph_kind", "graph_edges", "choices",
                                          "active_roles")}} for r in results]
    atomic_write_text(run_dir / "chosen.jsonl", "".join(json.dumps(c) + "\n" for c in chosen))
    writers.write_summary({f"test/{k}": v for k, v in summary.items() if isinstance(v, (int, float))})
    record = {"method": "hieramas", "benchmark": cfg.benchmark, "pool": cfg.pool, "split": "test",
              **summary, "fit": fit_summary, "config": cfg.to_json(), "num_candidates": cfg.num_candidates,
              "run_dir": str(run_dir), "endpoint": backend.endpoint.name,
              "sizes": {"train": len(train), "val": len(val), "test": len(test)},
              "provenance": provenance(seed=cfg.seed, benchmarks=[cfg.benchmark], flags=flags, backend=backend.label,
                                       command=command)}
    atomic_write_json(pathlib.Path(out_dir) / f"{results_name(cfg, tag)}.json", record)
    return record
  finally:
    writers.close()
