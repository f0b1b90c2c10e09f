"""HieraMAS's own results file (`results/hieramas_<benchmark>_<pool>[_<tag>].json`) from its cell's run dir.

Beyond the Table 1 figures: mean system reward, active roles, the chosen graphs' densities and
identities (paper Fig. 3) and the LLM preference counts per position (paper Fig. 4), all computed
from the per-query records in the cell's items.jsonl (their trace summaries carry `choices`,
`graph_index`, `graph_density`, `graph_kind`, `graph_edges`, `active_roles`).
"""

from __future__ import annotations

import collections
import json
import pathlib
from typing import Any, Mapping, Sequence

import numpy as np

from hieramas_jax.experiment.rundir import from_repo
from hieramas_jax.learn.rewards import system_reward

DENSITY_BANDS = ((0.0, 1 / 3), (1 / 3, 2 / 3), (2 / 3, 1.0 + 1e-9))


def results_name(benchmark: str, pool: str, tag: str = "", seed: int = 0) -> str:
  """hieramas_<benchmark>_<pool>[_<tag>][_seed<n>]: seed 0 keeps the plain name; every other seed of the same
  cell gets its own file, which Tables 2/6/7 pair with the same seed's main run (report/ablations.py)."""
  return f"hieramas_{benchmark}_{pool}" + (f"_{tag}" if tag else "") + (f"_seed{seed}" if seed else "")


def read_items(run_dir: str | pathlib.Path) -> list[dict[str, Any]]:
  """The cell's per-query records (items.jsonl), one dict per test query, in the order they finished."""
  path = pathlib.Path(run_dir) / "items.jsonl"
  return [json.loads(line) for line in path.read_text().splitlines() if line.strip()]


def by_item(records: Sequence[Mapping[str, Any]]) -> list[Mapping[str, Any]]:
  """Records in item-id order: the one order the summaries here are computed in (`test_summary`,
  `chosen`). items.jsonl holds queries in the order they finished, which varies from run to run; in
  this order a rerun writes the same bytes (ties among the most frequent graphs, key order, float sums)."""
  return sorted(records, key=lambda r: r["item_id"])


def preferences(records: Sequence[Mapping[str, Any]], roles: Sequence[str]) -> dict[str, Any]:
  """Per-position LLM preference counts over the test queries (paper Fig. 4 in counts)."""
  by_kind: dict[str, collections.Counter] = {"proposer": collections.Counter(), "synthesizer": collections.Counter()}
  by_role = {r: {"proposer": collections.Counter(), "synthesizer": collections.Counter()} for r in roles}
  by_position: dict[str, collections.Counter] = collections.defaultdict(collections.Counter)
  for rec in records:
    for role, row in zip(roles, rec["trace"]["choices"]):
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


def policy_probabilities(records: Sequence[Mapping[str, Any]], roles: Sequence[str]) -> dict[str, Any] | None:
  """Mean policy probabilities (softmax of its logits) over the test queries (paper Fig. 4): per role and position, and pooled
  over roles for the proposer positions and the synthesizer. None when the traces carry none (older runs)."""
  with_probs = [r["trace"] for r in records if "policy_probs" in r["trace"]]
  if not with_probs:
    return None
  probs = np.array([t["policy_probs"] for t in with_probs], np.float64)  # [Q, R, P, M + 1]
  mean = probs.mean(axis=0)
  return {"models": list(with_probs[0]["policy_models"]), "n": len(with_probs),
          "proposer": mean[:, :-1, :].mean(axis=(0, 1)).round(4).tolist(),
          "synthesizer": mean[:, -1, :].mean(axis=0).round(4).tolist(),
          "by_role": {role: {"proposer": mean[i, :-1, :].mean(axis=0).round(4).tolist(),
                             "synthesizer": mean[i, -1, :].round(4).tolist()} for i, role in enumerate(roles)}}


# Curves kept in the results file (paper-style training plots without the run directory).
CURVE_KEYS = ("stage1/loss", "stage1/batch_mean_system_reward", "stage1/batch_accuracy", "stage1/entropy",
              "stage1/val_mean_reward", "stage1/val_accuracy", "stage1/val_policy_entropy", "stage1/val_kl_from_init",
              "stage2/train_loss", "stage2/val_loss")


def training_curves(run_dir: str | pathlib.Path, keys: Sequence[str] = CURVE_KEYS) -> dict[str, list[list[float]]]:
  """[[step, value], ...] per key from the cell's metrics.jsonl (after a resume a repeated step: last line wins)."""
  path = pathlib.Path(run_dir) / "metrics.jsonl"
  if not path.exists():
    return {}
  by_key: dict[str, dict[int, float]] = {}
  for line in path.read_text().splitlines():
    try:
      row = json.loads(line)
    except json.JSONDecodeError:
      continue  # a line torn by a kill
    for k in keys:
      if row.get(k) is not None:
        by_key.setdefault(k, {})[int(row["step"])] = float(row[k])
  return {k: [[s, v] for s, v in sorted(d.items())] for k, d in by_key.items()}


def graph_statistics(records: Sequence[Mapping[str, Any]]) -> dict[str, Any]:
  """Densities and identities of the chosen graphs (paper Fig. 3: most frequent graphs, density range);
  `records` in item-id order (`test_summary` passes them so)."""
  traces = [r["trace"] for r in records]
  dens = np.array([t["graph_density"] for t in traces], np.float64)
  # Graphs are identified by their edges: with per-query candidates (the default) `graph_index` is an index
  # into that query's own K, so equal indices of two queries are different graphs.
  def ident(t):
    return tuple(map(tuple, t["graph_edges"]))
  counts = collections.Counter(ident(t) for t in traces)
  kinds = collections.Counter(t["graph_kind"] for t in traces)
  first = {}
  for t in traces:
    first.setdefault(ident(t), t)
  return {"mean": float(dens.mean()), "min": float(dens.min()), "max": float(dens.max()),
          "bands": {f"{lo:.2f}-{min(hi, 1.0):.2f}": int(((dens >= lo) & (dens < hi)).sum())
                    for lo, hi in DENSITY_BANDS},
          "kinds": dict(kinds), "distinct_graphs": len(counts),
          "top_graphs": [{"count": int(c), "density": first[g]["graph_density"], "edges": first[g]["graph_edges"]}
                         for g, c in sorted(counts.items(), key=lambda gc: (-gc[1], gc[0]))[:5]]}


def chosen(records: Sequence[Mapping[str, Any]]) -> list[dict[str, Any]]:
  """Per test query: the chosen graph (index, density, kind, edges) and LLM per position."""
  keys = ("graph_index", "graph_density", "graph_kind", "graph_edges", "choices", "active_roles")
  return [{"item_id": r["item_id"], "correct": r["correct"], "cost_usd": r["cost_usd"],
           **{k: r["trace"][k] for k in keys}} for r in by_item(records)]


def test_summary(records: Sequence[Mapping[str, Any]], roles: Sequence[str], reward_k: float) -> dict[str, Any]:
  """Mean system reward, active roles, graph statistics and LLM preferences over the test queries."""
  records = by_item(records)
  correct = np.array([r["correct"] for r in records], bool)
  cost = np.array([r["cost_usd"] for r in records], np.float64)
  reward = np.asarray(system_reward(correct, cost, k=reward_k), np.float64)
  active = np.array([len(r["trace"]["active_roles"]) for r in records])
  return {"mean_cost_usd": float(cost.mean()), "mean_system_reward": float(reward.mean()),
          "mean_active_roles": float(active.mean()), "num_roles": len(roles),
          "graph_density": graph_statistics(records), "llm_preferences": preferences(records, roles),
          "policy_probabilities": policy_probabilities(records, roles)}


def results_record(cell: Mapping[str, Any], records: Sequence[Mapping[str, Any]], config: Mapping[str, Any],
                   roles: Sequence[str], sizes: Mapping[str, int], prov: Mapping[str, Any]) -> dict[str, Any]:
  """The results file's content: the cell's Table 1 record plus the HieraMAS-specific summaries."""
  return {"method": "hieramas", "benchmark": cell["benchmark"], "pool": cell["pool"], "setting": cell["setting"],
          "split": "test", "tag": cell.get("tag", ""),
          **{k: cell[k] for k in ("accuracy", "n", "n_correct", "cost_usd", "n_calls", "prompt_tokens",
                                  "completion_tokens")},
          **test_summary(records, roles, float(config["reward_k"])),
          "training": cell.get("training"), "fit": cell.get("fit"), "loaded_from": cell.get("loaded_from"),
          # Per-query outcomes (test order): the paired "inside noise" marks of Tables 2/6/7 and the sweeps.
          "outcomes": cell.get("outcomes"),
          "config": dict(config), "run_dir": cell["run_dir"], "sizes": dict(sizes),
          "curves": training_curves(from_repo(cell["run_dir"])) if not cell.get("loaded_from") else {},
          "provenance": dict(prov)}
