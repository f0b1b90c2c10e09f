"""The offline HTML report: one self-contained page (`results/report/index.html`) with the paper's figures.

Everything is read from `results/` (and, for curves older results files lack and the sample browser,
the run directories they name): no network, no script, figures embedded as base64 PNG (matplotlib, Agg). Sections:

1. cost against accuracy per benchmark and setting (Table 1 / Table 3 cells, 95% bootstrap intervals,
   the Pareto front marked);
2. Figure 3: the most chosen topologies per benchmark (density, count) and the pairwise Jaccard matrix
   of the top-5 edge sets;
3. Figure 4: LLM preferences per position (the policy's probabilities, proposer and synthesizer; one colour scale);
4. stage-1 and stage-2 training curves;
5. the simulator's calibration (fit and validation, `results/calibration.json`);
6. the sweep plots (`results/sweep_*.json`);
7. HieraMAS's cost-accuracy frontier over cost weights k (`results/hieramas_frontier.json`);
8. a link to the sample browser written beside the page (`samples/`, hieramas_jax/report/samples.py);
9. every table of `results/` (`*.md`) rendered.

A missing input makes its section say what is missing and how to make it; nothing crashes. Every figure
made on the simulated pool carries "simulated pool" in its title. Sections 2-4 live in `hieramas_figures.py`,
the page and its helpers in `page.py`.
"""

from __future__ import annotations

import html
import pathlib
from typing import Any, Callable, Sequence

import numpy as np

from hieramas_jax.benchmarks.data import BENCHMARK_TITLES
from hieramas_jax.report import paper
from hieramas_jax.report.hieramas_figures import curves_section, figure3_section, figure4_section
from hieramas_jax.report.page import Page, is_sim, load_json, missing, pyplot, sim_caption
from hieramas_jax.report.paper import POOL_TITLES
from hieramas_jax.report.plotting import log_cost_axis
from hieramas_jax.report.samples import table_files
from hieramas_jax.report.stats import error_bars, pareto_front, wilson_interval


# ---- 1. cost against accuracy ------------------------------------------------------------------------


def cost_accuracy_section(page: Page, results: pathlib.Path) -> str:
  from hieramas_jax.report.table1 import derive  # pylint: disable=import-outside-toplevel
  body = []
  for name in ("table1", "table3"):
    # The full table, else a limited run's (a quick look's results directory holds table1_limit3*.json); for
    # Table 1 its extension when there is one (every Table 1 cell plus the methods beyond the paper).
    extended = results / f"{name}_extended.json"
    found = [extended] if extended.exists() else table_files(results, (name,))
    record = load_json(found[0]) if found else None
    if not record or "cells" not in record:
      body.append(missing(f"results/{name}.json is missing: run `make reproduce-table1`"
                          + (" and `make reproduce-table3`" if name == "table3" else "") + "."))
      continue
    cells_in = list(record["cells"].values())
    with_outcomes = all("outcomes" in c for c in cells_in)
    if with_outcomes and any("ci95" not in c for c in cells_in):
      cells_in = list(derive(record)["cells"].values())
    groups: dict[tuple[str, str, str], list[dict]] = {}
    for c in cells_in:
      c = {"label": c.get("method"), "setting": "main", **c}
      if "ci95" not in c:  # an older record without per-query outcomes: the binomial (Wilson) interval
        c["ci95"] = list(wilson_interval(c["n_correct"], c["n"]))
      groups.setdefault((c["benchmark"], c["pool"], c["setting"]), []).append(c)
    keys = sorted(groups)
    plt = pyplot()
    labels = sorted({c["label"] for cs in groups.values() for c in cs}, key=paper.order_key)
    styles = _method_styles(labels)
    frontier = (load_json(results / "hieramas_frontier.json") or {}).get("settings") or {} if name == "table1" else {}
    cols = min(3, len(keys))
    rows = -(-len(keys) // cols)
    height = 3.9 * rows + 0.9
    fig, axes = plt.subplots(rows, cols, figsize=(4.8 * cols, height), squeeze=False)
    for ax, key in zip(axes.flat, keys):
      cells = sorted(groups[key], key=lambda c: paper.order_key(c["label"]))
      pts = [(c["cost_usd"] / max(c["n"], 1), c["accuracy"]) for c in cells]
      front = pareto_front(pts)
      for c, (x, y) in zip(cells, pts):
        lo, hi = c.get("ci95", [y, y])
        st = styles[c["label"]]
        ax.errorbar([x], [y], yerr=error_bars([y], [(lo, hi)]), fmt=st["marker"], ms=st["ms"], capsize=2,
                    color=st["color"], mec="k" if st["hieramas"] else st["color"], alpha=0.95,
                    zorder=4 if st["hieramas"] else 3, label=paper.method_title(c["label"]))
        if c["label"] == "hieramas":
          ax.annotate("HieraMAS", (x, y), fontsize=7, fontweight="bold", color=st["color"], xytext=(6, -10),
                      textcoords="offset points", zorder=5)
      ax.plot([pts[i][0] for i in front], [pts[i][1] for i in front], "--", color="0.45", lw=1, zorder=2,
              label="Pareto front (all methods)")
      b, p, s = key
      setting = frontier.get(f"{b}|{p}") if s == "main" else None
      if setting and setting.get("hieramas"):
        hp = sorted((h["mean_cost_usd"], h["accuracy"]) for h in setting["hieramas"])
        ax.plot([x for x, _ in hp], [y for _, y in hp], "*:", color=styles.get("hieramas", {}).get("color", "C3"),
                ms=6, lw=1, zorder=3, label="HieraMAS over cost weights k")
      log_cost_axis(ax)
      ax.tick_params(labelsize=7)
      ax.set(xlabel="USD per query (log)", ylabel="accuracy % (95% CI)")
      ax.set_title(f"{BENCHMARK_TITLES.get(b, b)} {POOL_TITLES.get(p, p)}"
                   + (" [generalization]" if s != "main" else ""), fontsize=9)
    for ax in list(axes.flat)[len(keys):]:
      ax.axis("off")
    handles = {}
    for ax in axes.flat:
      for h, lab in zip(*ax.get_legend_handles_labels()):
        handles.setdefault(lab, h)
    fig.legend(list(handles.values()), list(handles), loc="lower center", ncol=min(6, len(handles)), fontsize=7,
               frameon=False)
    fig.suptitle(sim_caption(f"Cost against accuracy ({name})", record))
    fig.tight_layout(rect=(0, (0.2 + 0.17 * -(-len(handles) // 6)) / height, 1, 1))
    body.append(page.figure(fig, f"cost_accuracy_{name}", f"Every method of results/{found[0].name}: mean cost "
                            "per test query against accuracy with its 95% interval (bootstrap over queries; Wilson "
                            "where the file holds no per-query outcomes); one colour and marker per method (legend "
                            "below), HieraMAS a large red star; dashed grey: the Pareto front (no method both cheaper "
                            "and more accurate)"
                            + ("; dotted red stars: HieraMAS trained over cost weights k "
                               "(results/hieramas_frontier.json)." if frontier else ".")))
  return "".join(body)


def _method_styles(labels: Sequence[str]) -> dict[str, dict[str, Any]]:
  """One colour and marker per method, the same in every panel; HieraMAS a large red star (its
  total-cost variant an orange one), the others from a palette without red."""
  palette = ["#1f77b4", "#2ca02c", "#9467bd", "#8c564b", "#e377c2", "#7f7f7f", "#bcbd22", "#17becf",
             "#393b79", "#637939", "#8c6d31", "#7b4173", "#3182bd", "#31a354"]
  markers = "osD^vP<>hXp8"
  out, k = {}, 0
  for label in labels:
    method = label.partition("-")[0]
    if method.startswith("hieramas"):
      out[label] = {"color": "#d62728" if method == "hieramas" else "#ff7f0e", "marker": "*", "ms": 13,
                    "hieramas": True}
    else:
      out[label] = {"color": palette[k % len(palette)], "marker": markers[k % len(markers)], "ms": 5,
                    "hieramas": False}
      k += 1
  return out


def calibration_section(page: Page, results: pathlib.Path) -> str:
  record = load_json(results / "calibration.json")
  if not record:
    return missing("results/calibration.json is missing: run `make calibrate`.")
  # Only the rows the sim was fitted on (LLM-Debate is measured beside them but never fitted).
  fit = [c for c in (record.get("fit") or {}).get("cells") or [] if c.get("fitted", True)]
  val = ((record.get("validation") or {}).get("full_graph") or {})
  if not fit and not val:
    return missing("results/calibration.json has neither a fit nor a validation section.")
  plt = pyplot()
  fig, (ax_fit, ax_val) = plt.subplots(1, 2, figsize=(11, 4))
  if fit:
    x = np.array([c["target"] for c in fit])
    y = np.array([c["measured"] for c in fit])
    se = np.array([c.get("stderr", 0.0) for c in fit])
    ax_fit.errorbar(x, y, yerr=se, fmt="o", ms=4, capsize=2)
    lo, hi = float(min(x.min(), y.min())) - 2, float(max(x.max(), y.max())) + 2
    tol = record.get("tolerance_pts", 3.0)
    ax_fit.plot([lo, hi], [lo, hi], "k-", lw=0.8)
    ax_fit.fill_between([lo, hi], [lo - tol, hi - tol], [lo + tol, hi + tol], color="C2", alpha=0.15,
                        label=f"±{tol:g} points")
    ax_fit.set(xlabel="paper accuracy %", ylabel="sim accuracy % (±SE)", title="fit: rows the sim was fitted on")
    ax_fit.legend(fontsize=7)
  else:
    ax_fit.text(0.5, 0.5, "no fit section", ha="center", transform=ax_fit.transAxes)
  cells = val.get("cells") or []
  if cells:
    labels = [f"{BENCHMARK_TITLES.get(c['benchmark'], c['benchmark'])}\n{c['setting']}" for c in cells]
    ax_val.bar(range(len(cells)), [c["accuracy"] for c in cells], yerr=[c.get("stderr", 0) for c in cells],
               color="C1", capsize=2)
    ax_val.set_xticks(range(len(cells)), labels, fontsize=7)
    if val.get("average") is not None:
      ax_val.axhline(val["average"], color="C1", ls="--", lw=1, label=f"sim average {val['average']:.2f}")
    if val.get("target") is not None:
      ax_val.axhline(val["target"], color="k", ls=":", lw=1, label=f"paper average {val['target']:.2f}")
    ax_val.set_ylim(0, 100)  # bars from zero: a cut axis makes small differences look large
    ax_val.set(ylabel="Full-Graph accuracy %", title="validation: Full-Graph (never fitted)")
    ax_val.legend(fontsize=7)
  else:
    ax_val.text(0.5, 0.5, "no validation section", ha="center", transform=ax_val.transAxes)
  fig.suptitle(sim_caption("Calibration of the simulator", record))
  fig.tight_layout()
  return page.figure(fig, "calibration", "Left: the paper's Table 1 rows the sim was fitted on, sim against paper. "
                     "Right: Full-Graph, which the sim never saw, against the paper's average. "
                     "Details: results/calibration.md (rendered below).")


def sweeps_section(page: Page, results: pathlib.Path) -> str:
  from hieramas_jax.report.sweeps import sweep_figure  # pylint: disable=import-outside-toplevel
  files = sorted(results.glob("sweep_*.json"))
  if not files:
    return missing("No sweep results (results/sweep_*.json): run `make sweep-k` and `make sweep-proposers`.")
  body = []
  for f in files:
    record = load_json(f)
    if not record or "rows" not in record:
      body.append(missing(f"{f.name} is not a sweep record."))
      continue
    body.append(page.figure(sweep_figure(record), f"sweep_{record['name']}",
                            f"{record.get('description', '')} ({sum(r['done'] for r in record['rows'])} of "
                            f"{len(record['rows'])} points finished). Accuracy with its 95% Wilson interval over the "
                            "test queries; hollow squares: the paper's published values (real LLMs) where it reports "
                            "the sweep."))
  return "".join(body)


def frontier_section(page: Page, results: pathlib.Path) -> str:
  from hieramas_jax.report.frontier import frontier_figure, recipes_phrase  # pylint: disable=import-outside-toplevel
  record = load_json(results / "hieramas_frontier.json")
  if not record or "settings" not in record:
    return missing("results/hieramas_frontier.json is missing: run `make frontier` (after `make reproduce-table1`).")
  positions = "; ".join(f"{BENCHMARK_TITLES.get(s['benchmark'], s['benchmark'])} "
                        f"{POOL_TITLES.get(s['pool'], s['pool'])}: {s['position']}"
                        for s in record["settings"].values())
  fig = frontier_figure(record)
  fig.suptitle(sim_caption("HieraMAS cost-accuracy frontier", is_sim(record)))
  return (f"<p>Where HieraMAS's frontier lies against the other methods' Pareto front: {html.escape(positions)}.</p>"
          + page.figure(fig, "hieramas_frontier", "HieraMAS trained over cost weights k ("
                        + html.escape(recipes_phrase(record.get("recipes") or sorted(
                            {p["recipe"] for s in record["settings"].values() for p in s["hieramas"]})))
                        + ", joined by k) "
                        "against every Table 1 method (grey; dashed: their Pareto front); accuracy with its 95% "
                        "bootstrap interval, mean USD per test query (log)."))


def tables_section(results: pathlib.Path) -> str:
  from markdown_it import MarkdownIt  # pylint: disable=import-outside-toplevel
  md = MarkdownIt("commonmark", {"html": False}).enable("table")
  files = sorted(results.glob("*.md"))
  if not files:
    return missing("No tables in results/ yet.")
  return "".join(f"<details><summary>results/{html.escape(f.name)}</summary>{_fold_provenance(md, f.read_text())}"
                 "</details>" for f in files)


def _fold_provenance(md, text: str) -> str:
  """The table's markdown as HTML, its "## Provenance" part (commands, commits, hashes) folded away."""
  head, sep, prov = text.partition("\n## Provenance")
  out = md.render(head)
  if sep:
    out += f'<details class="provenance"><summary>Provenance</summary>{md.render(prov)}</details>'
  return out


SECTIONS: tuple[tuple[str, str, Callable], ...] = (
    ("cost-accuracy", "Cost against accuracy (Tables 1 and 3)", cost_accuracy_section),
    ("figure3", "Figure 3: chosen topologies", figure3_section),
    ("figure4", "Figure 4: LLM preferences per position", figure4_section),
    ("curves", "Training curves (stage 1 and stage 2)", curves_section),
    ("calibration", "Calibration of the simulated pool", calibration_section),
    ("sweeps", "Sweeps (K, W)", sweeps_section),
    ("frontier", "HieraMAS cost-accuracy frontier", frontier_section),
)


def build_report(results: str | pathlib.Path, n_sample_cells: int | None = None) -> tuple[str, Page]:
  """The page's HTML and what it holds (sections, figure names); `n_sample_cells`: how many cells the
  sample browser beside it lists (None: none written)."""
  results = pathlib.Path(results)
  page = Page()
  for anchor, title, fn in SECTIONS:
    try:
      body = fn(page, results)
    except (KeyError, TypeError, ValueError, IndexError) as e:  # a malformed results file: say so, go on
      body = missing(f"could not draw this section from results/: {type(e).__name__}: {e}")
    page.add(anchor, title, body)
  page.add("samples", "Sample browser: every query", samples_section(n_sample_cells))
  page.add("tables", "Every table in results/", tables_section(results))
  sims = [is_sim(load_json(f)) for f in results.glob("*.json") if f.name != "bench.json"]
  banner = ("Simulated pool (hieramas_jax.sim): not real LLM results. Every figure made on it says so."
            if any(sims) else None)
  intro = ("<p>Built by <code>make report</code> (<code>python experiments/make_report.py</code>) from "
           "<code>results/</code>; each table below carries the command that made it.</p>")
  return page.render("hieramas-jax: the paper's experiments as this suite reproduces them", banner, intro), page


def samples_section(n_cells: int | None) -> str:
  if n_cells is None:
    return missing("The sample browser is written by write_report (make report), beside this page.")
  if not n_cells:
    return missing("No cell with a run directory on this machine in results/table1*.json, table3*.json or "
                   "hieramas_*.json (or --run_root): nothing to browse.")
  return (f'<p><a href="samples/index.html" data-samples>Browse every test query of {n_cells} cells</a>: '
          "each call's prompt and response, the extracted and gold answers, the grade, cost and tokens, the "
          "chosen configuration and graph; filters by method, benchmark and correctness; two methods side by "
          "side. Offline: samples/ beside this page.</p>")


def write_report(results: str | pathlib.Path, out_dir: str | pathlib.Path, *, samples: bool = True,
                 run_root: str | pathlib.Path | None = None) -> tuple[pathlib.Path, Page]:
  """index.html in `out_dir`, and (with `samples`) the sample browser in `out_dir`/samples (the cells of
  `results`, and every cell directory under `run_root` when given)."""
  from hieramas_jax.fileio import atomic_write_text  # pylint: disable=import-outside-toplevel
  from hieramas_jax.report.samples import write_samples  # pylint: disable=import-outside-toplevel
  n_cells = write_samples(results, pathlib.Path(out_dir) / "samples", run_root)[1] if samples else None
  text, page = build_report(results, n_cells)
  path = pathlib.Path(out_dir) / "index.html"
  atomic_write_text(path, text)
  return path, page
