"""Regret of HieraMAS against the best static configuration: three rows of one runner record.

Per benchmark, pool, setting and seed, on the same test queries:
  O = mean system reward of `static_search` (the oracle's best static configuration),
  L = mean system reward of `hieramas`,
  R = mean system reward of `random_config` (a uniformly random static configuration per query),
  regret = (O - L) / (O - R): the share of the oracle's gain over random that learning missed (0 is
  as good as the oracle, negative is better, undefined when the oracle does not beat random).
System reward per query is `learn.rewards.system_reward` (utility minus cost, the reference shape, k = 300).
The interval is a paired bootstrap over test queries: the three methods' outcomes on one query are
resampled together, so the items' shared difficulty cancels (resamples where O <= R are left out and
counted).

Single-call methods (`SINGLE_CALL`: Base and CoT, one call of the strong model) are listed beside the
three rows when the record holds them on the same test queries: a static one-call system is part of
what HieraMAS competes with, and the search's space (multi-role configurations) does not contain it.
"""

from __future__ import annotations

import json
import zlib
from typing import Any, Mapping

import numpy as np

from hieramas_jax.experiment.record import CellRecord
from hieramas_jax.learn.rewards import system_reward
from hieramas_jax.report.stats import N_BOOT

REGRET_GOAL = 0.05
ORACLE, LEARNED, RANDOM = "static_search", "hieramas", "random_config"
SINGLE_CALL = ("base", "cot")


def regret(oracle: float, learned: float | None, random: float) -> tuple[float | None, str | None]:
  """(oracle - learned) / (oracle - random), or (None, reason) when it is undefined."""
  if learned is None:
    return None, "no learned result"
  gap = oracle - random
  if not gap > 0:
    return None, f"oracle ({oracle:.4f}) does not beat random ({random:.4f}): regret undefined"
  return (oracle - learned) / gap, None


def rewards(cell: Mapping[str, Any]) -> np.ndarray:
  """Per-query system rewards of a runner cell (from its outcomes)."""
  correct = np.array([c == "1" for c in cell["outcomes"]["correct"]], bool)
  cost = np.asarray(cell["outcomes"]["cost_usd"], np.float64)
  return np.asarray(system_reward(correct, cost), np.float64)


def regret_interval(o: np.ndarray, l: np.ndarray, r: np.ndarray, *, seed: int, n_boot: int = N_BOOT,
                    level: float = 0.95) -> tuple[list[float] | None, int]:
  """Paired percentile bootstrap of the regret; returns (interval or None, resamples left out)."""
  rng = np.random.default_rng(seed)
  idx = rng.integers(0, o.size, size=(n_boot, o.size))
  mo, ml, mr = o[idx].mean(1), l[idx].mean(1), r[idx].mean(1)
  ok = (mo - mr) > 0
  if ok.sum() < n_boot // 2:
    return None, int((~ok).sum())
  values = (mo[ok] - ml[ok]) / (mo[ok] - mr[ok])
  lo, hi = np.quantile(values, [(1 - level) / 2, 1 - (1 - level) / 2], method="inverted_cdf")
  return [float(lo), float(hi)], int((~ok).sum())


def regret_record(table: Mapping[str, Any]) -> dict[str, Any]:
  """results/regret.json from a runner record holding static_search, hieramas and random_config cells."""
  cells = table["cells"]
  entries = {}
  for key, c in cells.items():
    if c["label"] != ORACLE:
      continue
    rec = CellRecord.from_json(c)
    rest = key.partition("|")[2]  # the cell key without its label: the bootstrap's seed
    learned, rand = cells.get(rec.sibling_key(LEARNED)), cells.get(rec.sibling_key(RANDOM))
    if rand is None:
      continue
    o, r = rewards(c), rewards(rand)
    l = rewards(learned) if learned is not None and learned["outcomes"]["ids_sha256"] == c["outcomes"]["ids_sha256"] \
        else None
    value, why = regret(float(o.mean()), None if l is None else float(l.mean()), float(r.mean()))
    interval, dropped = (regret_interval(o, l, r, seed=zlib.crc32(rest.encode())) if value is not None
                         else (None, 0))
    fit = c.get("fit") or {}
    single = {}
    for m in SINGLE_CALL:
      sc = cells.get(rec.sibling_key(m))
      if sc is not None and sc["outcomes"]["ids_sha256"] == c["outcomes"]["ids_sha256"]:
        single[m] = {"reward": float(rewards(sc).mean()), "accuracy": sc["accuracy"],
                     "mean_cost_usd": sc["mean_cost_usd"]}
    best_single = max(single, key=lambda m: single[m]["reward"], default=None)
    entries[f"{c['benchmark']}/{c['pool']}/{c['setting']}/seed{c['seed']}"] = {
        "benchmark": c["benchmark"], "pool": c["pool"], "setting": c["setting"], "seed": c["seed"],
        "test_items": c["n"], "oracle_reward": float(o.mean()),
        "learned_reward": None if l is None else float(l.mean()),
        "random_reward": float(r.mean()), "regret": value, "regret_reason": why, "regret_ci95": interval,
        "bootstrap_resamples_left_out": dropped, "regret_goal": REGRET_GOAL,
        "meets_goal": None if value is None else bool(value <= REGRET_GOAL),
        "oracle_accuracy": c["accuracy"], "oracle_mean_cost_usd": c["mean_cost_usd"],
        "learned_accuracy": None if learned is None else learned["accuracy"],
        "learned_mean_cost_usd": None if learned is None else learned["mean_cost_usd"],
        "random_accuracy": rand["accuracy"], "single_call": single, "best_single_call": best_single,
        "learned_beats_best_single_call": (None if l is None or best_single is None
                                           else bool(float(l.mean()) > single[best_single]["reward"])),
        "oracle_configuration": fit.get("configuration"), "configurations_searched": fit.get("configurations_searched"),
        "search_training_usd": (c.get("training") or {}).get("cost_usd"),
        "run_dirs": {ORACLE: c["run_dir"], RANDOM: rand["run_dir"],
                     LEARNED: None if learned is None else learned["run_dir"]}}
  return {"label": table["provenance"].get("label", table["provenance"].get("backend")),
          "what": ("regret = (oracle - learned) / (oracle - random) of mean system reward "
                   "(learn/rewards.system_reward: utility minus cost) on the same test queries; oracle = "
                   "`static_search` (best static configuration found by successive halving on train+val), "
                   "random = `random_config`, learned = `hieramas`; 95% paired bootstrap interval over queries. "
                   "See docs/regret.md."),
          "goal": f"regret <= {REGRET_GOAL} on every benchmark", "entries": entries, "provenance": table["provenance"]}


def _fmt(x: float | None, spec: str = ".3f") -> str:
  return "n/a" if x is None else format(x, spec)


def short_configuration(configuration: Mapping[str, Any] | None) -> str:
  """'Role: [p1, p2] -> synth; ...; graph kind' with skipped roles left out."""
  if not configuration:
    return "n/a"
  parts = []
  for role, choice in configuration["roles"].items():
    if choice == "skipped":
      continue
    props = ", ".join(choice["proposers"])
    parts.append(f"{role}: [{props}] -> {choice['synthesizer']}" if props else f"{role}: {choice['synthesizer']}")
  return "; ".join(parts) + (f" ({configuration['graph_kind']} graph)" if len(parts) > 1 else "")


def regret_markdown(record: Mapping[str, Any]) -> str:
  """results/regret.md from the regret record."""
  lines = [f"# Oracle and regret ({record['label']})", "", record["what"], "", f"Goal: {record['goal']}.", "",
           "| benchmark | pool | seed | learned | oracle | random | best single call | regret [95% CI] | "
           "oracle accuracy / $ per query | learned accuracy / $ per query | configurations searched |",
           "|---|---|---|---|---|---|---|---|---|---|---|"]
  for e in record["entries"].values():
    cell = _fmt(e["regret"], ".2f")
    if e["regret_ci95"]:
      cell += f" [{e['regret_ci95'][0]:.2f}, {e['regret_ci95'][1]:.2f}]"
    if e["regret"] is None:
      cell += f" ({e['regret_reason']})"
    learned = (f"{e['learned_accuracy']:.1f}% / ${e['learned_mean_cost_usd']:.5f}" if e["learned_accuracy"] is not None
               else "n/a")
    best = e.get("best_single_call")
    single = f"{best} {_fmt(e['single_call'][best]['reward'])}" if best else "n/a"
    lines.append(f"| {e['benchmark']} | {e['pool']} | {e['seed']} | {_fmt(e['learned_reward'])} | "
                 f"{_fmt(e['oracle_reward'])} | {_fmt(e['random_reward'])} | {single} | {cell} | "
                 f"{e['oracle_accuracy']:.1f}% / ${e['oracle_mean_cost_usd']:.5f} | {learned} | "
                 f"{e['configurations_searched']} |")
  lines += ["", "Oracle configurations (the same for every query):", ""]
  for key, e in record["entries"].items():
    lines.append(f"- {key}: {short_configuration(e['oracle_configuration'])}.")
  lines += ["", "Command:", "", "```", record["provenance"]["command"], "```", "",
            "```json", json.dumps({k: v for k, v in record["provenance"].items() if k != "command"}, indent=2),
            "```", ""]
  return "\n".join(lines)
