"""Did HieraMAS learn? One verdict per stage, decided by intervals, from the evidence a fit recorded.

The fit records raw per-query evidence (`learn/evidence.py`, `methods/hieramas/training.py`) in its
summary, which every HieraMAS results file carries (`fit.evidence`); this module turns it into
intervals and verdicts, so any report can be rebuilt without refitting.

- Stage 1 ("learned" / "did not learn"): the paired difference, on the same validation queries and
  graphs, between the trained policy at its LAST step and the untrained policy (its initialisation), in
  the metric the run selects its checkpoint by (accuracy points, or mean system reward). Learned iff the
  95% paired-bootstrap interval lies above 0. The last step, not the best checkpoint: the best was
  chosen on these very queries (the max over a few noisy validations), so its difference is biased
  upward; it is reported beside, marked as selected. The drift (entropy against its maximum ln(M + 1),
  KL from the initialisation) says whether the policy moved at all.
- Stage 2: on the classifier's own held-out validation queries, the paired difference of its top-1 hit
  (its argmax graph is a positive) against chance (positives / graphs of that query) and against a
  fresh initialisation of the classifier. Learned iff both intervals lie above 0 (top-1 is what
  inference uses: G* = argmax). The ranking AUC against 0.5 and against the fresh initialisation is
  reported with query-bootstrap intervals. A classifier that was never fit (no contrastive queries)
  did not learn.

Rows and seeds: `compare_rows` marks a table row whose paired difference from its comparison row (same
test queries) holds 0 in its 95% interval ("inside noise"); `across_seeds` / `seed_comparison` /
`seed_groups` summarise several seeds (each an independent simulated world): mean +- sd and the per-seed
paired differences tested across seeds with a t interval. `stage2_labels_*` report what the stage-2
labels can see (`evidence.label_sources`).
"""

from __future__ import annotations

import json
import math
from typing import Any, Mapping, Sequence

import numpy as np

from hieramas_jax.learn.evidence import auc
from hieramas_jax.report.stats import (LEVEL, N_BOOT, _percentiles, correct_vector, key_seed, mean_sd,
                                       paired_difference)

LEARNED, NOT_LEARNED = "learned", "did not learn"
NOT_RECORDED = "not recorded (fit before the learning evidence existed; refit)"


def learned(ci: Sequence[float]) -> bool:
  """An interval of (trained - comparison) says "learned" only if it lies wholly above 0."""
  return ci[0] > 0


UNTRAINED_RULE = ("**learned** when the 95% paired bootstrap interval of (trained - untrained) accuracy on the same "
                  "test queries lies wholly above 0, else **did not learn** (and **worse** when it lies wholly below 0). "
                  "Untrained: the method answering from the state its fit starts from (its seeded initialisation; "
                  "AFlow's starting workflow), run by the runner's untrained check; nothing is selected on these "
                  "queries.")


def untrained_check(cell: Mapping[str, Any], key: str) -> dict[str, Any] | None:
  """A learned cell against its untrained self on the same test queries (the runner's untrained check, the
  record's `untrained`): the paired accuracy difference in points and the verdict of `UNTRAINED_RULE`; None for
  a cell without the check."""
  u = cell.get("untrained")
  if not u:
    return None
  if u["outcomes"]["ids_sha256"] != cell["outcomes"]["ids_sha256"]:
    return {"verdict": None, "reason": "the untrained check answered other queries"}
  d = paired_difference(correct_vector(cell), correct_vector(u), scale=100.0, seed=key_seed(key + "|untrained"))
  return {**d, "trained": cell["accuracy"], "untrained": u["accuracy"], "untrained_cost_usd": u["cost_usd"],
          "untrained_calls": u["n_calls"], "verdict": LEARNED if learned(d["ci"]) else NOT_LEARNED,
          "worse": d["ci"][1] < 0}


def untrained_text(v: Mapping[str, Any] | None) -> str:
  """One table cell: the verdict, the paired difference and the untrained accuracy."""
  if v is None:
    return "-"
  if v.get("verdict") is None:
    return f"no verdict: {v.get('reason')}"
  word = "worse" if v["worse"] else v["verdict"]
  return (f"**{word}**: {v['delta']:+.2f} [{v['ci'][0]:+.1f}, {v['ci'][1]:+.1f}] "
          f"({v['untrained']:.2f} untrained)")


def _metric_values(outcomes: Mapping[str, Any], select_by: str) -> np.ndarray:
  if select_by == "reward":
    return np.asarray(outcomes["reward"], np.float64)
  return np.array([c == "1" for c in outcomes["solved"]], np.float64)


def stage1_verdict(ev: Mapping[str, Any] | None, key: str = "stage1") -> dict[str, Any]:
  """Stage 1's verdict and its evidence (see the module docstring); `key` seeds the bootstrap."""
  if not ev or not ev.get("untrained") or not ev.get("final"):
    return {"verdict": None, "reason": NOT_RECORDED}
  select_by = ev.get("select_by", "accuracy")
  scale = 1.0 if select_by == "reward" else 100.0
  base = _metric_values(ev["untrained"], select_by)
  diff = paired_difference(_metric_values(ev["final"], select_by), base, scale=scale, seed=key_seed(key))
  best = None
  if ev.get("best"):
    best = paired_difference(_metric_values(ev["best"], select_by), base, scale=scale, seed=key_seed(key + "|best"))
  curve = ev.get("curve") or []
  out = {"metric": "accuracy points" if scale == 100.0 else "mean system reward", "final_step": ev.get("final_step"),
         "final_vs_untrained": diff, "best_step": ev.get("best_step"), "best_vs_untrained": best,
         "max_entropy": ev.get("max_entropy"),
         "entropy_start": curve[0][1] if curve else None, "entropy_end": curve[-1][1] if curve else None,
         "kl_end": curve[-1][2] if curve else None}
  out["verdict"] = LEARNED if learned(diff["ci"]) else NOT_LEARNED
  return out


def _cluster_auc_ci(scores: np.ndarray, labels: np.ndarray, query: np.ndarray, seed: int,
                    n_boot: int = N_BOOT // 5) -> tuple[float, float] | None:
  """Percentile bootstrap interval of an AUC (or, with `scores` [2, n], of AUC(a) - AUC(b)), resampling
  whole queries (a query's graphs share its difficulty)."""
  scores = np.atleast_2d(scores)
  ids = np.unique(query)
  rows = {q: np.flatnonzero(query == q) for q in ids}
  rng = np.random.default_rng(seed)
  samples = []
  for _ in range(n_boot):
    idx = np.concatenate([rows[q] for q in rng.choice(ids, size=ids.size)])
    vals = [auc(s[idx], labels[idx]) for s in scores]
    if any(v is None for v in vals):
      continue
    samples.append(vals[0] - (vals[1] if len(vals) > 1 else 0.0))
  if not samples:
    return None
  return _percentiles(np.asarray(samples), LEVEL)


def stage2_verdict(ev: Mapping[str, Any] | None, key: str = "stage2") -> dict[str, Any]:
  """Stage 2's verdict and its evidence (see the module docstring)."""
  if not ev:
    return {"verdict": None, "reason": NOT_RECORDED}
  if ev.get("skipped"):
    return {"verdict": NOT_LEARNED, "reason": f"never fit: {ev['skipped']}"}
  hit = np.asarray(ev["trained"]["hit"], np.float64)
  if hit.size == 0:
    return {"verdict": NOT_LEARNED, "reason": "no validation query with a positive graph"}
  chance = np.asarray(ev["chance"], np.float64)
  fresh = np.asarray(ev["fresh"]["hit"], np.float64)
  vs_chance = paired_difference(hit, chance, scale=100.0, seed=key_seed(key + "|chance"))
  vs_fresh = paired_difference(hit, fresh, scale=100.0, seed=key_seed(key + "|fresh"))
  labels = np.asarray(ev["label"], bool)
  query = np.asarray(ev["pair_query"])
  trained_s, fresh_s = np.asarray(ev["trained"]["score"]), np.asarray(ev["fresh"]["score"])
  out = {"queries": ev.get("queries"), "n": int(hit.size),
         "top1_hit": 100.0 * hit.mean(), "top1_chance": 100.0 * chance.mean(), "top1_fresh": 100.0 * fresh.mean(),
         "hit_vs_chance": vs_chance, "hit_vs_fresh": vs_fresh,
         "auc": auc(trained_s, labels), "auc_fresh": auc(fresh_s, labels),
         "auc_ci": _cluster_auc_ci(trained_s, labels, query, key_seed(key + "|auc")),
         "auc_vs_fresh_ci": _cluster_auc_ci(np.stack([trained_s, fresh_s]), labels, query,
                                            key_seed(key + "|auc_fresh"))}
  out["verdict"] = LEARNED if learned(vs_chance["ci"]) and learned(vs_fresh["ci"]) else NOT_LEARNED
  return out


def cell_verdicts(fit: Mapping[str, Any] | None, key: str) -> dict[str, Any]:
  """Both stages' verdicts of one HieraMAS results file's `fit` (key: the file's name, seeds the bootstraps)."""
  ev = (fit or {}).get("evidence") or {}
  stage2 = ev.get("stage2")
  skipped = ((fit or {}).get("stage2") or {}).get("skipped")
  if stage2 is None and skipped:  # a fit from before the evidence whose classifier was never fit
    stage2 = {"skipped": skipped}
  return {"stage1": stage1_verdict(ev.get("stage1"), key + "|stage1"),
          "stage2": stage2_verdict(stage2, key + "|stage2")}


def _ci(d: Mapping[str, Any] | None, spec: str = "+.1f") -> str:
  if not d:
    return "-"
  return f"{format(d['delta'], spec)} [{format(d['ci'][0], spec)}, {format(d['ci'][1], spec)}]"


def stage1_text(v: Mapping[str, Any]) -> str:
  """One table cell: the verdict, then the evidence it rests on."""
  if v["verdict"] is None:
    return v["reason"]
  spec = "+.1f" if v["metric"] == "accuracy points" else "+.3f"
  text = (f"**{v['verdict']}**: last step vs untrained {_ci(v['final_vs_untrained'], spec)} {v['metric']}")
  if v.get("best_vs_untrained") and v.get("best_step") != v.get("final_step"):
    text += f" (best step {v['best_step']}, selected on these queries: {_ci(v['best_vs_untrained'], spec)})"
  if v.get("entropy_end") is not None:
    text += (f"; entropy {v['entropy_start']:.3f} -> {v['entropy_end']:.3f} of max {v['max_entropy']:.3f}, "
             f"KL from init {v['kl_end']:.4f}")
  return text


def stage2_text(v: Mapping[str, Any]) -> str:
  if v["verdict"] is None:
    return v["reason"]
  if "hit_vs_chance" not in v:
    return f"**{v['verdict']}**: {v['reason']}"
  auc_ci = v.get("auc_ci")
  auc_text = "-" if v["auc"] is None else f"{v['auc']:.3f}" + (
      f" [{auc_ci[0]:.3f}, {auc_ci[1]:.3f}]" if auc_ci else "")
  fresh_auc = "-" if v["auc_fresh"] is None else f"{v['auc_fresh']:.3f}"
  return (f"**{v['verdict']}**: top-1 hit {v['top1_hit']:.1f}% vs chance {v['top1_chance']:.1f}% "
          f"({_ci(v['hit_vs_chance'])}) vs fresh init {v['top1_fresh']:.1f}% ({_ci(v['hit_vs_fresh'])}), "
          f"n = {v['n']}; AUC {auc_text} (fresh {fresh_auc})")


def classifier_state(v: Mapping[str, Any], skipped: bool) -> str:
  """What the classifier is, in words that never call a classifier at chance "trained"."""
  if skipped or (v.get("reason") or "").startswith("never fit"):
    return "not fit (left at initialisation)"
  if v["verdict"] is None:
    return "fit; learning not measured"
  return "fit; learned" if v["verdict"] == LEARNED else "fit; at chance (did not learn)"


def compare_rows(outcomes: Mapping[str, Any] | None, reference: Mapping[str, Any] | None,
                 key: str) -> dict[str, Any] | None:
  """A row's paired difference in accuracy points from its comparison row on the same test queries, and
  whether 0 is inside its 95% interval ("inside noise"). None when either lacks per-query outcomes or
  they are not the same queries."""
  if not outcomes or not reference or outcomes.get("ids_sha256") != reference.get("ids_sha256"):
    return None
  a = np.array([c == "1" for c in outcomes["correct"]], np.float64)
  b = np.array([c == "1" for c in reference["correct"]], np.float64)
  d = paired_difference(a, b, scale=100.0, seed=key_seed(key + "|paired"))
  return {**d, "inside_noise": bool(d["ci"][0] <= 0.0 <= d["ci"][1])}


def noise_text(c: Mapping[str, Any] | None) -> str:
  if c is None:
    return ""
  return f" (vs comparison {_ci(c)}{', inside noise' if c['inside_noise'] else ''})"


def short_verdicts(v: Mapping[str, Any]) -> str:
  """Both verdicts in a few words, for a table column."""
  def one(x):
    return x["verdict"] or "not recorded"
  return f"stage 1 {one(v['stage1'])} · stage 2 {one(v['stage2'])}"


def mark_against_first(rows: list[dict[str, Any]], outcomes: Sequence[Mapping[str, Any] | None], key: str,
                       groups: Sequence[Any] | None = None) -> None:
  """Sets each row's "vs_first": its paired difference from the first row with outcomes in its group (sweeps:
  the first grid point of the same seed; the frontier: the lowest cost weight), with the inside-noise mark;
  None for that row itself. Why groups: rows of two seeds answer the same query ids in two simulated worlds,
  so a paired difference between them pairs nothing."""
  groups = [None] * len(rows) if groups is None else list(groups)
  refs: dict[Any, int] = {}
  for i, o in enumerate(outcomes):
    if o and groups[i] not in refs:
      refs[groups[i]] = i
  for i, (row, o) in enumerate(zip(rows, outcomes)):
    ref = refs.get(groups[i])
    row["vs_first"] = None if ref is None or i == ref else compare_rows(o, outcomes[ref], f"{key}|{i}")


def label_sources_text(ls: Mapping[str, Any] | None) -> str:
  """One cell: of the contrastive queries, how many differ in solving and how many in cost only."""
  if not ls:
    return "-"
  share = ls.get("share_solved_vs_unsolved")
  return (f"{ls['solved_vs_unsolved']} solved-vs-unsolved / {ls['cost_only']} cost-only of {ls['contrastive']}"
          + (f" ({100 * share:.0f}% see solving)" if share is not None else ""))


def stage2_labels_record(cells: Sequence[Mapping[str, Any]], prov: Mapping[str, Any]) -> dict[str, Any]:
  """The stage-2 label measurement over cells ({"run_dir", "label_sources"} each, `evidence.label_sources`)."""
  return {"what": "Stage 2's contrastive queries (graphs of one query with different rewards): how many differ in "
                  "whether the query was solved, how many only in the charged (decision) cost; within-query Spearman "
                  "of graph density against solved and against the decision call's cost (learn/evidence.py "
                  "label_sources)", "cells": [dict(c) for c in cells], "provenance": dict(prov)}


def stage2_labels_markdown(record: Mapping[str, Any]) -> str:
  lines = ["# What stage 2's labels can see", "", record["what"] + ".", "",
           "| Run | Queries | Contrastive | Solved vs unsolved | Cost only | rho(density, solved) | "
           "rho(density, decision $) | Graph solve rate |", "|---|---|---|---|---|---|---|---|"]
  fmt = lambda v, spec: "-" if v is None else format(v, spec)
  for c in record["cells"]:
    ls = c["label_sources"]
    lines.append(f"| `{c['run_dir']}` | {ls['queries']} | {ls['contrastive']} | {ls['solved_vs_unsolved']} | "
                 f"{ls['cost_only']} | {fmt(ls['spearman_density_solved'], '+.3f')} | "
                 f"{fmt(ls['spearman_density_decision_cost'], '+.3f')} | {100 * ls['graph_solve_rate']:.1f}% |")
  prov = record["provenance"]
  lines += ["", "## Provenance", "", "```", prov.get("command", ""), "```", "", "```json",
            json.dumps({k: v for k, v in prov.items() if k != "command"}, indent=2, sort_keys=True), "```", ""]
  return "\n".join(lines)


# Two-sided 95% Student-t quantiles by degrees of freedom: conclusions across a handful of seeds.
_T95 = {1: 12.706, 2: 4.303, 3: 3.182, 4: 2.776, 5: 2.571, 6: 2.447, 7: 2.365, 8: 2.306, 9: 2.262, 10: 2.228}


def across_seeds(values: Sequence[float]) -> dict[str, Any]:
  """Mean +- sample sd over seeds (each an independent simulated world) and the mean's 95% t interval
  (None with one seed; beyond 10 seeds the normal 1.96)."""
  mean, sd = mean_sd(values)
  n = len(values)
  ci = None if sd is None else [mean - _T95.get(n - 1, 1.96) * sd / math.sqrt(n),
                                mean + _T95.get(n - 1, 1.96) * sd / math.sqrt(n)]
  return {"n": n, "mean": mean, "sd": sd, "ci": ci}


def seed_comparison(deltas: Sequence[float]) -> dict[str, Any] | None:
  """A row against its comparison across seeds: the per-seed paired differences (same seed, same test
  queries), their mean +- sd and t interval (a paired t-test across seeds), inside noise when it holds 0."""
  if len(deltas) < 2:
    return None
  out = across_seeds(deltas)
  return {**out, "deltas": list(deltas), "inside_noise": bool(out["ci"][0] <= 0.0 <= out["ci"][1])}


def seeds_text(acc: Mapping[str, Any] | None, vs: Mapping[str, Any] | None) -> str:
  """" · seeds: mean +- sd (n) · vs comparison mean [ci]" for a table cell; empty with one seed."""
  if not acc or acc["n"] < 2:
    return ""
  text = f" · {acc['n']} seeds: {acc['mean']:.2f} ± {acc['sd']:.2f}"
  if vs:
    text += (f", vs comparison {vs['mean']:+.1f} [{vs['ci'][0]:+.1f}, {vs['ci'][1]:+.1f}]"
             + (", inside noise" if vs["inside_noise"] else ""))
  return text


def seed_groups(rows: Sequence[Mapping[str, Any]], outcomes: Sequence[Mapping[str, Any] | None],
                axis: str = "seed") -> list[dict[str, Any]]:
  """A sweep whose grid includes `axis` (the seed), summarised per value of the other flags: accuracy mean
  +- sd over seeds and, against the first group, the per-seed paired difference tested across seeds.
  Empty when the grid has no seed axis."""
  if not any(axis in r["values"] for r in rows):
    return []
  groups: dict[str, dict[str, Any]] = {}
  for r, o in zip(rows, outcomes):
    if not r.get("done"):
      continue
    rest = {k: v for k, v in r["values"].items() if k != axis}
    g = groups.setdefault(json.dumps(rest, sort_keys=True), {"values": rest, "accuracy": {}, "outcomes": {}})
    g["accuracy"][r["values"][axis]] = r["accuracy"]
    g["outcomes"][r["values"][axis]] = o
  out, first = [], None
  for g in groups.values():
    summary = {"values": g["values"], "across_seeds": across_seeds(list(g["accuracy"].values()))}
    if first is not None:
      deltas = [100.0 * (np.mean([c == "1" for c in g["outcomes"][s]["correct"]])
                         - np.mean([c == "1" for c in first["outcomes"][s]["correct"]]))
                for s in g["outcomes"] if g["outcomes"][s] and (first["outcomes"].get(s) or {}).get("ids_sha256")
                == g["outcomes"][s].get("ids_sha256")]
      summary["vs_first_across_seeds"] = seed_comparison(deltas)
    first = first or g
    out.append(summary)
  return out


def seed_group_lines(groups: Sequence[Mapping[str, Any]]) -> list[str]:
  """Markdown lines for `seed_groups` (none without a seed axis)."""
  if not groups:
    return []
  lines = ["", "Over seeds (each an independent simulated world): accuracy mean ± sd, and the per-seed paired "
           "difference from the first point, mean with its 95% t interval across seeds.", "",
           "| Point | Accuracy over seeds |", "|---|---|"]
  for g in groups:
    lines.append(f"| {json.dumps(g['values'], sort_keys=True)} | "
                 + seeds_text(g["across_seeds"], g.get("vs_first_across_seeds")).lstrip(" ·") + " |")
  return lines
