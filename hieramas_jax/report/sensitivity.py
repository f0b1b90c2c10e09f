"""results/sim_sensitivity.{md,json}: the same Table 1 rows under the sim's low, fitted and high profiles.

The simulated pool's aggregation parameters are known only to a confidence region
(`experiment/aggregation_fit.py`); this table says which orderings of the multi-agent rows and
HieraMAS survive across the region's ends and which flip. For two methods, the sign of their
accuracy difference under each profile decides: the ordering *holds* when it is the same and not
zero under every profile, *flips* when it is positive under one profile and negative under
another, is *unsettled* when it is zero under some profiles and of one sign under the others, and
is a *tie* when it is zero under every profile.
"""

from __future__ import annotations

import itertools
from typing import Any, Mapping

import numpy as np

from hieramas_jax.benchmarks.data import BENCHMARK_TITLES
from hieramas_jax.experiment.record import CellRecord
from hieramas_jax.report.markdown import provenance_lines
from hieramas_jax.report.paper import POOL_TITLES

PROFILE_ORDER = ("low", "fitted", "high")


def cell_accuracies(record: Mapping[str, Any]) -> dict[tuple[str, str, str], float]:
  """(method, benchmark, pool) -> accuracy (%), the mean over seeds, of a run_table record."""
  acc: dict[tuple[str, str, str], list[float]] = {}
  for c in map(CellRecord.from_json, record["cells"].values()):
    acc.setdefault((c.method, c.benchmark, c.pool), []).append(float(c.accuracy))
  return {k: float(np.mean(v)) for k, v in acc.items()}


def sensitivity_record(records: Mapping[str, Mapping[str, Any]], prov: Mapping[str, Any]) -> dict[str, Any]:
  """Accuracy per profile and the pairwise orderings over the cells and their average.

  Args:
    records: profile -> the run_table record made on that profile (same spec).
    prov: provenance of this table.
  """
  profiles = [p for p in PROFILE_ORDER if p in records] + sorted(set(records) - set(PROFILE_ORDER))
  acc = {p: cell_accuracies(records[p]) for p in profiles}
  keys = sorted(set.intersection(*(set(a) for a in acc.values())))
  order = list(records[profiles[0]].get("spec", {}).get("methods", ()))
  methods = sorted({m for m, _, _ in keys}, key=lambda m: (order.index(m) if m in order else len(order), m))
  columns = sorted({(b, pool) for _, b, pool in keys})
  rows = []
  for m in methods:
    cells = {f"{b}/{pool}": {p: round(acc[p][(m, b, pool)], 2) for p in profiles} for b, pool in columns
             if (m, b, pool) in acc[profiles[0]]}
    average = {p: round(float(np.mean([v[p] for v in cells.values()])), 2) for p in profiles}
    rows.append({"method": m, "cells": cells, "average": average})
  by_method = {r["method"]: r for r in rows}
  orderings = []
  for a, b in itertools.combinations(methods, 2):
    for where in ["average"] + [f"{bb}/{pool}" for bb, pool in columns]:
      va = by_method[a]["average"] if where == "average" else by_method[a]["cells"].get(where)
      vb = by_method[b]["average"] if where == "average" else by_method[b]["cells"].get(where)
      if va is None or vb is None:
        continue
      signs = {p: int(np.sign(round(va[p] - vb[p], 6))) for p in profiles}
      nonzero = set(signs.values()) - {0}
      status = ("tie" if not nonzero else "flips" if len(nonzero) == 2 else
                "unsettled" if 0 in signs.values() else "holds")
      orderings.append({"a": a, "b": b, "where": where, "diff": {p: round(va[p] - vb[p], 2) for p in profiles},
                        "status": status})
  count = lambda s: sum(o["status"] == s for o in orderings)  # noqa: E731
  return {"profiles": profiles, "columns": [f"{b}/{pool}" for b, pool in columns], "rows": rows,
          "orderings": orderings, "n_hold": count("holds"), "n_flip": count("flips"),
          "n_unsettled": count("unsettled"), "n_tie": count("tie"), "provenance": dict(prov)}


def sensitivity_markdown(record: Mapping[str, Any]) -> str:
  profiles = record["profiles"]
  def title(col: str) -> str:
    b, pool = col.split("/")
    return f"{BENCHMARK_TITLES.get(b, b)} {POOL_TITLES.get(pool, pool)}"
  lines = [f"# Sensitivity of Table 1 to the sim's aggregation profile - simulated pool (profiles "
           f"{', '.join(profiles)})", "",
           "Each profile is one point of the aggregation fit's confidence region (`results/calibration.md`); "
           "only the aggregation parameters differ. Cell: accuracy % under " + " / ".join(profiles) + ".", "",
           "| Method | " + " | ".join(title(c) for c in record["columns"]) + " | Average |",
           "|---" * (len(record["columns"]) + 2) + "|"]
  for r in record["rows"]:
    cells = [" / ".join(f"{r['cells'][c][p]:.1f}" for p in profiles) if c in r["cells"] else "-"
             for c in record["columns"]]
    lines.append(f"| {r['method']} | " + " | ".join(cells) + " | "
                 + " / ".join(f"{r['average'][p]:.2f}" for p in profiles) + " |")
  avg = [o for o in record["orderings"] if o["where"] == "average"]
  lines += ["", f"## Orderings (simulated pool): {record['n_hold']} hold under every profile, "
            f"{record['n_flip']} flip, {record['n_unsettled']} tie under some profiles only, {record['n_tie']} tie "
            "everywhere (over the average and every cell)", "",
            "Average over the cells; difference A - B in points under " + " / ".join(profiles) + ".", "",
            "| A | B | A - B | Holds across all profiles |", "|---|---|---|---|"]
  for o in avg:
    lines.append(f"| {o['a']} | {o['b']} | " + " / ".join(f"{o['diff'][p]:+.2f}" for p in profiles)
                 + f" | {dict(holds='yes', tie='tie', flips='**flips**', unsettled='unsettled')[o['status']]} |")
  flips = [o for o in record["orderings"] if o["where"] != "average" and o["status"] == "flips"]
  if flips:
    lines += ["", "Cells where an ordering flips: " + "; ".join(
        f"{o['a']} vs {o['b']} on {title(o['where'])} (" + " / ".join(f"{o['diff'][p]:+.1f}" for p in profiles) + ")"
        for o in flips) + "."]
  lines += provenance_lines(record["provenance"])
  return "\n".join(lines)


__all__ = ["sensitivity_record", "sensitivity_markdown", "cell_accuracies", "PROFILE_ORDER"]
