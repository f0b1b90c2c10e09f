"""HieraMAS's cost-accuracy frontier against every Table 1 method (results/hieramas_frontier.{json,md,png}).

The paper claims "better cost-performance trade-offs". One trained HieraMAS is one point; training it
over cost weights k (0: cost ignored, ..., the reference's 300, above) under both rewards traces its
frontier. Per benchmark and backbone every point is (mean USD per test query, accuracy %) with the
accuracy's 95% percentile bootstrap interval over test queries (`stats.bootstrap_ci`, as in Table 1).

Where the frontier lies (`frontier_position`), against the Pareto front of the other methods' points
(higher accuracy and lower cost both better; a point is dominated when another is at least as good on
both and better on one):
- "above": some HieraMAS point dominates a point of the baselines' front;
- "below": every HieraMAS point is dominated by a baseline point;
- "on": otherwise (HieraMAS points are trade-offs the baselines do not dominate, and vice versa).
Point estimates decide; the intervals are printed so a reader can see when a position is within noise.
"""

from __future__ import annotations

import json
from typing import Any, Mapping, Sequence

from hieramas_jax.benchmarks.data import BENCHMARK_TITLES
from hieramas_jax.experiment.provenance import sim_title
from hieramas_jax.experiment.record import CellRecord
from hieramas_jax.report.markdown import provenance_lines
from hieramas_jax.report.paper import POOL_TITLES, method_title
from hieramas_jax.report.plotting import label_points, log_cost_axis
from hieramas_jax.report import learning, stats
from hieramas_jax.report.stats import bootstrap_ci, correct_vector, error_bars, key_seed

HIERAMAS_METHODS = ("hieramas", "hieramas_total_cost")
RECIPES = {"hieramas": "published (decision-cost reward)", "hieramas_total_cost": "total-cost reward"}


def point(cell: Mapping[str, Any], key: str, **extra: Any) -> dict[str, Any]:
  """One runner cell as a frontier point (accuracy %, its 95% interval, mean USD per test query)."""
  ci = bootstrap_ci(100.0 * correct_vector(cell), seed=key_seed(key))
  rec = CellRecord.from_json(cell)
  return {"label": rec.label, "method": rec.method, "accuracy": rec.accuracy, "ci95": list(ci),
          "mean_cost_usd": rec.mean_cost_usd, "n": rec.n, "run_dir": rec.run_dir,
          "test_ids_sha256": rec.outcomes["ids_sha256"], **extra}


def dominates(a: Mapping[str, Any], b: Mapping[str, Any]) -> bool:
  """a is at least as accurate and as cheap as b, and strictly better on one."""
  return (a["accuracy"] >= b["accuracy"] and a["mean_cost_usd"] <= b["mean_cost_usd"]
          and (a["accuracy"] > b["accuracy"] or a["mean_cost_usd"] < b["mean_cost_usd"]))


def pareto_front(points: Sequence[Mapping[str, Any]]) -> list[Mapping[str, Any]]:
  """The non-dominated points, by increasing cost (`stats.pareto_front`, the report's own rule)."""
  return [points[i] for i in stats.pareto_front([(p["mean_cost_usd"], p["accuracy"]) for p in points])]


def frontier_position(hieramas: Sequence[Mapping[str, Any]], baselines: Sequence[Mapping[str, Any]]) -> str | None:
  """"above", "on" or "below" (module docstring); None without points on either side."""
  if not hieramas or not baselines:
    return None
  front = pareto_front(baselines)
  if any(dominates(h, b) for h in hieramas for b in front):
    return "above"
  if all(any(dominates(b, h) for b in baselines) for h in hieramas):
    return "below"
  return "on"


def frontier_record(frontier_cells: Mapping[str, Mapping[str, Any]], table1_cells: Mapping[str, Mapping[str, Any]],
                    ks: Mapping[str, float], prov: Mapping[str, Any]) -> dict[str, Any]:
  """The frontier per (benchmark, pool), seed 0's main setting.

  Args:
    frontier_cells: runner cells of the HieraMAS runs (key -> cell), any tag.
    table1_cells: Table 1's cells (the baselines' points; HieraMAS cells here are ignored).
    ks: cell label -> the cost weight k its HieraMAS was trained with.
    prov: provenance of the frontier run.
  """
  settings: dict[str, dict[str, Any]] = {}
  for source, cells in (("frontier", frontier_cells), ("table1", table1_cells)):
    for key, c in cells.items():
      if c.get("setting", "main") != "main" or c.get("seed", 0) != 0:
        continue
      is_hieramas = c["method"] in HIERAMAS_METHODS
      if is_hieramas != (source == "frontier"):
        continue
      s = settings.setdefault(f"{c['benchmark']}|{c['pool']}", {"benchmark": c["benchmark"], "pool": c["pool"],
                                                                  "hieramas": [], "baselines": []})
      if is_hieramas:
        s["hieramas"].append(point(c, key, k=ks.get(c["label"]), recipe=RECIPES[c["method"]],
                                   verdicts=learning.cell_verdicts(c.get("fit"), key)))
        s.setdefault("outcomes", {})[c["label"]] = c.get("outcomes")
      else:
        s["baselines"].append(point(c, key))
  settings = {key: s for key, s in settings.items() if s["hieramas"]}  # only where HieraMAS was run
  for s in settings.values():
    # Points are comparable only on the same test queries (a --limit run against a full Table 1 is not).
    ids = s["hieramas"][0]["test_ids_sha256"]
    s["left_out"] = [p["label"] for p in s["hieramas"] + s["baselines"] if p["test_ids_sha256"] != ids]
    s["hieramas"] = [p for p in s["hieramas"] if p["test_ids_sha256"] == ids]
    s["baselines"] = [p for p in s["baselines"] if p["test_ids_sha256"] == ids]
    s["hieramas"].sort(key=lambda p: (p["recipe"], p["k"] if p["k"] is not None else -1))
    outcomes = s.pop("outcomes", {})
    for r in {p["recipe"] for p in s["hieramas"]}:  # each recipe's points against its lowest k
      mine = [p for p in s["hieramas"] if p["recipe"] == r]
      learning.mark_against_first(mine, [outcomes.get(p["label"]) for p in mine], f"{r}|{s['benchmark']}|{s['pool']}")
    s["baseline_front"] = [p["label"] for p in pareto_front(s["baselines"])]
    s["hieramas_front"] = [f"{p['label']}" for p in pareto_front(s["hieramas"])]
    s["position"] = frontier_position(s["hieramas"], s["baselines"])
    s["position_by_recipe"] = {r: frontier_position([p for p in s["hieramas"] if p["recipe"] == r], s["baselines"])
                               for r in sorted({p["recipe"] for p in s["hieramas"]})}
  recipes = sorted({p["recipe"] for s in settings.values() for p in s["hieramas"]})
  return {"what": f"HieraMAS trained over cost weights k ({recipes_phrase(recipes)}) against every Table 1 method: "
                  "accuracy % (95% bootstrap interval over test queries) and mean USD per test query; Pareto fronts "
                  "and where HieraMAS's frontier lies (report/frontier.py)",
          "recipes": recipes, "settings": dict(sorted(settings.items())), "provenance": dict(prov)}


def recipes_phrase(recipes: Sequence[str]) -> str:
  """"both rewards" when the record holds both recipes, else the one it holds ("the published recipe only"):
  a frontier run with --recipes must not be captioned as both."""
  if len(recipes) > 1:
    return "both rewards"
  return f"the {recipes[0].replace('_', '-')} recipe only" if recipes else "no recipe"


def _pt(p: Mapping[str, Any]) -> str:
  return f"{p['accuracy']:.2f} [{p['ci95'][0]:.1f}, {p['ci95'][1]:.1f}] · ${p['mean_cost_usd']:.5f}"


def frontier_markdown(record: Mapping[str, Any]) -> str:
  prov = record["provenance"]
  sim = prov.get("backend") == "sim"
  lines = ["# HieraMAS cost-accuracy frontier" + (f" - {sim_title(prov)}" if sim else f" - {prov.get('backend')}"), ""]
  if sim:
    lines += [f"**{sim_title(prov)} (hieramas_jax.sim): not real LLM results.**", ""]
  lines += [record["what"] + ".", "", "Cell: accuracy % [95% CI] · USD per test query. **Bold**: on its side's "
            "Pareto front.", ""]
  for s in record["settings"].values():
    title = f"{BENCHMARK_TITLES.get(s['benchmark'], s['benchmark'])} {POOL_TITLES.get(s['pool'], s['pool'])}"
    lines += [f"## {title}", "", f"HieraMAS's frontier lies **{s['position'] or 'n/a'}** the baselines' Pareto front"
              + (" (" + ", ".join(f"{r}: {v}" for r, v in s["position_by_recipe"].items()) + ")"
                 if s["position_by_recipe"] else "") + ".", "", "| Point | k | accuracy · $ / query |",
              "|---|---|---|"]
    for p in s["hieramas"]:
      bold = "**" if p["label"] in s["hieramas_front"] else ""
      lines.append(f"| HieraMAS, {p['recipe']} | {p['k'] if p['k'] is not None else '-'} | {bold}{_pt(p)}{bold}"
                   f"{learning.noise_text(p.get('vs_first'))}"
                   + (f"; {learning.short_verdicts(p['verdicts'])}" if p.get("verdicts") else "") + " |")
    for p in sorted(s["baselines"], key=lambda p: p["mean_cost_usd"]):
      bold = "**" if p["label"] in s["baseline_front"] else ""
      lines.append(f"| {method_title(p['label'])} | - | {bold}{_pt(p)}{bold} |")
    if s["left_out"]:
      lines += ["", "Left out (other test queries than the first HieraMAS point's): "
                + ", ".join(method_title(l) for l in s["left_out"]) + "."]
    lines.append("")
  if not record["settings"]:
    lines += ["No finished cells yet: run `make frontier`.", ""]
  lines += provenance_lines(prov)
  return "\n".join(lines)


def frontier_figure(record: Mapping[str, Any]):
  """One panel per (benchmark, pool): baselines (grey, front joined), HieraMAS per recipe (joined by k)."""
  import matplotlib  # pylint: disable=import-outside-toplevel
  matplotlib.use("Agg")
  import matplotlib.pyplot as plt  # pylint: disable=import-outside-toplevel
  settings = list(record["settings"].values()) or [None]
  cols = min(2, len(settings))
  rows = (len(settings) + cols - 1) // cols
  fig, axes = plt.subplots(rows, cols, figsize=(5.2 * cols, 3.8 * rows), squeeze=False)
  labels: list[tuple[Any, list]] = []  # per panel its points' labels, placed once the layout is final
  for ax, s in zip(axes.flat, settings):
    if s is None:
      ax.text(0.5, 0.5, "no finished cell yet", ha="center", va="center", transform=ax.transAxes)
      continue
    points: list = []
    labels.append((ax, points))

    def draw(points, fmt, label, color=None):
      xs = [p["mean_cost_usd"] for p in points]
      ys = [p["accuracy"] for p in points]
      ax.errorbar(xs, ys, yerr=error_bars(ys, [p["ci95"] for p in points]), fmt=fmt, capsize=2, label=label,
                  color=color, markersize=4, linewidth=1)

    for p in s["baselines"]:
      draw([p], "s", None, "0.55")
      points.append((p["mean_cost_usd"], p["accuracy"], method_title(p["label"]), "0.35"))
    front = [p for p in s["baselines"] if p["label"] in s["baseline_front"]]
    front.sort(key=lambda p: p["mean_cost_usd"])
    ax.plot([p["mean_cost_usd"] for p in front], [p["accuracy"] for p in front], "--", color="0.55", linewidth=1,
            label="baselines' Pareto front")
    for i, recipe in enumerate(sorted({p["recipe"] for p in s["hieramas"]})):
      pts = sorted((p for p in s["hieramas"] if p["recipe"] == recipe), key=lambda p: p["mean_cost_usd"])
      colour = f"C{i}"
      draw(pts, "o-", f"HieraMAS, {recipe}", colour)
      points += [(p["mean_cost_usd"], p["accuracy"], f"k={p['k']:g}", colour) for p in pts if p["k"] is not None]
    log_cost_axis(ax)
    ax.set_xlabel("USD per test query (log)", fontsize=8)
    ax.set_ylabel("accuracy % (95% interval)", fontsize=8)
    ax.set_title(f"{BENCHMARK_TITLES.get(s['benchmark'])} {POOL_TITLES.get(s['pool'])}: HieraMAS's frontier "
                 f"{s['position']} the baselines' front", fontsize=8)
    ax.legend(fontsize=6, loc="lower right")
  prov = record.get("provenance") or {}
  if prov.get("backend") == "sim":  # every figure made on the sim says so, with its profile
    fig.suptitle(f"{sim_title(prov)}: not real LLM results", fontsize=9)
  fig.tight_layout()
  for ax, points in labels:
    legend = ax.get_legend()
    label_points(ax, points, avoid=[legend.get_window_extent()] if legend else [])
  return fig


def write_frontier(record: Mapping[str, Any], out_dir, *, suffix: str = "") -> list:
  """<out_dir>/hieramas_frontier<suffix>.{json,md,png} (`suffix`: a limited run's, `TableSpec.results_suffix`)."""
  import pathlib  # pylint: disable=import-outside-toplevel
  from hieramas_jax.fileio import atomic_write_json, atomic_write_text  # pylint: disable=import-outside-toplevel
  from hieramas_jax.report.sweeps import write_figure  # pylint: disable=import-outside-toplevel
  stem = pathlib.Path(out_dir) / f"hieramas_frontier{suffix}"
  atomic_write_json(stem.with_suffix(".json"), json.loads(json.dumps(record)))
  atomic_write_text(stem.with_suffix(".md"), frontier_markdown(record))
  write_figure(frontier_figure(record), stem.with_suffix(".png"))
  return [stem.with_suffix(s) for s in (".json", ".md", ".png")]
