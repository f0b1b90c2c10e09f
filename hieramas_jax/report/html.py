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
made on the simulated pool carries "simulated pool" in its title.
"""

from __future__ import annotations

import base64
import html
import io
import json
import pathlib
from typing import Any, Callable, Mapping, Sequence

import numpy as np

from hieramas_jax.benchmarks.data import BENCHMARK_TITLES
from hieramas_jax.experiment.provenance import sim_title
from hieramas_jax.report import paper
from hieramas_jax.report.paper import POOL_TITLES


CSS = """
body { font-family: system-ui, -apple-system, Segoe UI, sans-serif; margin: 2em auto; max-width: 1150px;
       color: #222; line-height: 1.4; padding: 0 1em; }
h1 { font-size: 1.6em; } h2 { border-bottom: 1px solid #ccc; padding-bottom: .2em; margin-top: 2em; }
figure { margin: 1em 0; } figure img { max-width: 100%; border: 1px solid #eee; }
figcaption { font-size: .9em; color: #555; }
.missing { background: #fff4e5; border-left: 4px solid #f0a020; padding: .5em 1em; }
.banner { background: #fdecea; border-left: 4px solid #d33; padding: .5em 1em; font-weight: 600; }
table { border-collapse: collapse; font-size: .82em; margin: .5em 0; }
td, th { border: 1px solid #ddd; padding: 2px 6px; vertical-align: top; }
th { background: #f4f4f4; } pre { background: #f7f7f7; padding: .5em; overflow-x: auto; font-size: .8em; }
details { margin: .6em 0; } summary { cursor: pointer; font-weight: 600; }
nav a { margin-right: 1em; }
"""


def _plt():
  import matplotlib  # pylint: disable=import-outside-toplevel
  matplotlib.use("Agg")
  import matplotlib.pyplot as plt  # pylint: disable=import-outside-toplevel
  return plt


def _load(path: pathlib.Path) -> Any | None:
  try:
    return json.loads(path.read_text())
  except (OSError, json.JSONDecodeError):
    return None


def _is_sim(record: Any) -> bool:
  if not isinstance(record, Mapping):
    return False
  prov = record.get("provenance") or {}
  return prov.get("backend") == "sim" or record.get("backend") == "sim"


def _title(text: str, record: Any) -> str:
  """`text`, with "(simulated pool (profile X))" when `record` was made on the sim."""
  return f"{text} ({sim_title(record)})" if _is_sim(record) else text


class Page:
  """Sections of HTML and the figures they embed (counted, so a test can check that none is missing)."""

  def __init__(self):
    self.sections: list[tuple[str, str, str]] = []  # (anchor, title, body)
    self.figures: list[str] = []

  def figure(self, fig, name: str, caption: str) -> str:
    plt = _plt()
    buf = io.BytesIO()
    fig.savefig(buf, format="png", dpi=100)
    plt.close(fig)
    self.figures.append(name)
    data = base64.b64encode(buf.getvalue()).decode()
    return (f'<figure data-figure="{html.escape(name)}"><img alt="{html.escape(name)}" '
            f'src="data:image/png;base64,{data}"><figcaption>{html.escape(caption)}</figcaption></figure>')

  def add(self, anchor: str, title: str, body: str) -> None:
    self.sections.append((anchor, title, body))

  def render(self, title: str, banner: str | None, intro: str) -> str:
    nav = " ".join(f'<a href="#{a}">{html.escape(t)}</a>' for a, t, _ in self.sections)
    parts = ["<!DOCTYPE html>", '<html lang="en"><head><meta charset="utf-8">',
             f"<title>{html.escape(title)}</title><style>{CSS}</style></head><body>",
             f"<h1>{html.escape(title)}</h1>"]
    if banner:
      parts.append(f'<p class="banner">{html.escape(banner)}</p>')
    parts += [intro, f"<nav>{nav}</nav>"]
    for anchor, t, body in self.sections:
      parts.append(f'<section id="{anchor}" data-section="{anchor}"><h2>{html.escape(t)}</h2>{body}</section>')
    parts.append("</body></html>")
    return "\n".join(parts)


def missing(text: str) -> str:
  return f'<p class="missing">{html.escape(text)}</p>'


# ---- 1. cost against accuracy ------------------------------------------------------------------------


def pareto_front(points: Sequence[tuple[float, float]]) -> list[int]:
  """Indices of the (cost, accuracy) points no other point beats on both (cheaper or equal and more
  accurate or equal, strictly better on one), sorted by cost."""
  front = []
  for i, (c, a) in enumerate(points):
    dominated = any((c2 <= c and a2 >= a) and (c2 < c or a2 > a) for j, (c2, a2) in enumerate(points) if j != i)
    if not dominated:
      front.append(i)
  return sorted(front, key=lambda i: points[i][0])


def wilson_interval(k: int, n: int, z: float = 1.959964) -> tuple[float, float]:
  """95% Wilson score interval of a binomial proportion, in percent."""
  if n == 0:
    return float("nan"), float("nan")
  p = k / n
  centre = (p + z * z / (2 * n)) / (1 + z * z / n)
  half = z * np.sqrt(p * (1 - p) / n + z * z / (4 * n * n)) / (1 + z * z / n)
  return 100.0 * (centre - half), 100.0 * (centre + half)


def cost_accuracy_section(page: Page, results: pathlib.Path) -> str:
  from hieramas_jax.report.table1 import derive  # pylint: disable=import-outside-toplevel
  body = []
  for name in ("table1", "table3"):
    record = _load(results / f"{name}.json")
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
    plt = _plt()
    from matplotlib.ticker import FuncFormatter, LogLocator, NullFormatter  # pylint: disable=C0415
    labels = sorted({c["label"] for cs in groups.values() for c in cs}, key=paper.order_key)
    styles = _method_styles(labels)
    frontier = (_load(results / "hieramas_frontier.json") or {}).get("settings") or {} if name == "table1" else {}
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
        ax.errorbar([x], [y], yerr=[[y - lo], [hi - y]], fmt=st["marker"], ms=st["ms"], capsize=2,
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
      ax.set_xscale("log")
      ax.xaxis.set_major_locator(LogLocator(base=10, subs=(1.0, 2.0, 5.0)))
      ax.xaxis.set_major_formatter(FuncFormatter(lambda v, _: f"{v:g}"))
      ax.xaxis.set_minor_formatter(NullFormatter())
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
    fig.suptitle(_title(f"Cost against accuracy ({name})", record))
    fig.tight_layout(rect=(0, (0.2 + 0.17 * -(-len(handles) // 6)) / height, 1, 1))
    body.append(page.figure(fig, f"cost_accuracy_{name}", f"Every method of results/{name}.json: mean cost per test "
                            "query against accuracy with its 95% interval (bootstrap over queries; Wilson where "
                            "the file holds no per-query outcomes); one colour and marker per method (legend "
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


# ---- HieraMAS results files ---------------------------------------------------------------------------


def hieramas_main_files(results: pathlib.Path) -> list[tuple[str, str, dict]]:
  """(benchmark, pool, record) of every untagged HieraMAS results file, in the paper's order."""
  out = []
  for b in BENCHMARK_TITLES:
    for p in POOL_TITLES:
      r = _load(results / f"hieramas_{b}_{p}.json")
      if r:
        out.append((b, p, r))
  return out


def jaccard_matrix(edge_sets: Sequence[Sequence[Sequence[int]]]) -> np.ndarray:
  """Pairwise Jaccard similarity of edge sets (two empty sets: 1)."""
  sets = [{tuple(e) for e in edges} for edges in edge_sets]
  n = len(sets)
  out = np.ones((n, n))
  for i in range(n):
    for j in range(n):
      union = sets[i] | sets[j]
      out[i, j] = len(sets[i] & sets[j]) / len(union) if union else 1.0
  return out


def _draw_graph(ax, roles: Sequence[str], edges: Sequence[Sequence[int]], title: str,
                active: set[int] | None = None) -> None:
  """The graph on a circle, nodes named by role; roles outside `active` (and their edges) greyed."""
  num_nodes = len(roles)
  angles = np.linspace(0, 2 * np.pi, num_nodes, endpoint=False) + np.pi / 2
  xy = np.stack([np.cos(angles), np.sin(angles)], axis=1)
  on = (lambda k: True) if active is None else (lambda k: k in active)
  for i, j in edges:
    live = on(i) and on(j)
    ax.annotate("", xy=xy[j], xytext=xy[i], arrowprops={"arrowstyle": "->", "lw": 0.8 if live else 0.5,
                                                         "color": "#555" if live else "#ccc", "shrinkA": 6,
                                                         "shrinkB": 6, "ls": "-" if live else ":"})
  ax.scatter(xy[:, 0], xy[:, 1], s=60, color=["C0" if on(k) else "#d0d0d0" for k in range(num_nodes)], zorder=3)
  for k, (x, y) in enumerate(xy):
    ax.text(1.32 * x, 1.3 * y, _wrap(roles[k]), ha="center", va="center", fontsize=5.5, zorder=4,
            color="#222" if on(k) else "#aaa")
  ax.set_xlim(-1.7, 1.7)
  ax.set_ylim(-1.6, 1.6)
  ax.set_aspect("equal")
  ax.axis("off")
  ax.set_title(title, fontsize=7)


def _wrap(text: str, width: int = 12) -> str:
  words, lines = text.split(), [""]
  for w in words:
    lines[-1:] = [lines[-1] + " " + w] if len(lines[-1]) + len(w) < width or not lines[-1] else [lines[-1], w]
  return "\n".join(line.strip() for line in lines)


def _query_graphs(r: Mapping[str, Any]) -> list[dict[str, Any]] | None:
  """Per test query (edges, active roles) from the run directory's items.jsonl; None when it is absent."""
  from hieramas_jax.experiment.rundir import from_repo  # pylint: disable=import-outside-toplevel
  path = from_repo(r["run_dir"]) / "items.jsonl" if r.get("run_dir") else None
  if path is None or not path.exists():
    return None
  out = []
  for line in path.read_text().splitlines():
    t = (json.loads(line).get("trace") or {}) if line.strip() else {}
    if "graph_edges" in t:
      out.append({"edges": frozenset(map(tuple, t["graph_edges"])), "active": t.get("active_roles")})
  return out


def top_edge_sets(r: Mapping[str, Any]) -> tuple[list[dict[str, Any]], int | None, bool]:
  """The five most chosen distinct edge sets (graphs of the pool with the same edges counted once), the
  number of distinct edge sets over the test queries (None without the run directory: the results file
  then lists only its top graphs), and whether each set's active roles come from the per-query records."""
  queries = _query_graphs(r)
  if queries:
    counts: dict[frozenset, int] = {}
    active: dict[frozenset, dict[tuple, int]] = {}
    for q in queries:
      counts[q["edges"]] = counts.get(q["edges"], 0) + 1
      if q["active"] is not None:
        a = active.setdefault(q["edges"], {})
        a[tuple(q["active"])] = a.get(tuple(q["active"]), 0) + 1
    top = sorted(counts.items(), key=lambda kv: (-kv[1], sorted(kv[0])))[:5]
    n_nodes = int(r.get("num_roles") or 0)
    out = [{"edges": sorted(e), "count": c, "density": len(e) / max(1, n_nodes * (n_nodes - 1) / 2),
            "active": set(max(active[e].items(), key=lambda kv: kv[1])[0]) if e in active else None}
           for e, c in top]
    return out, len(counts), True
  merged: dict[frozenset, dict[str, Any]] = {}
  for t in (r.get("graph_density") or {}).get("top_graphs") or []:
    key = frozenset(map(tuple, t["edges"]))
    if key in merged:
      merged[key]["count"] += t["count"]
    else:
      merged[key] = {"edges": sorted(key), "count": t["count"], "density": t["density"], "active": None}
  return sorted(merged.values(), key=lambda t: -t["count"])[:5], None, False


def figure3_section(page: Page, results: pathlib.Path) -> str:
  from hieramas_jax.mas.roles import roles_for  # pylint: disable=import-outside-toplevel
  files = hieramas_main_files(results)
  if not files:
    return missing("No HieraMAS results file (results/hieramas_<benchmark>_<pool>.json): run "
                   "`python experiments/train_hieramas.py --benchmark=...` (or `make reproduce-table1`, then it).")
  plt = _plt()
  body = []
  for b, p, r in files:
    top, distinct, from_items = top_edge_sets(r)
    if not top:
      body.append(missing(f"{r.get('benchmark')}/{r.get('pool')}: the results file lists no chosen graphs."))
      continue
    roles = list(roles_for(b))
    fig, axes = plt.subplots(1, len(top) + 1, figsize=(2.4 * (len(top) + 1) + 1.5, 3.0),
                             gridspec_kw={"width_ratios": [1] * len(top) + [1.5]})
    total = r.get("n") or sum(t["count"] for t in top)
    names = [f"G{k + 1}" for k in range(len(top))]
    for ax, name, t in zip(axes, names, top):
      n_active = "" if t["active"] is None else f", {len(t['active'])}/{len(roles)} roles active"
      _draw_graph(ax, roles, t["edges"], f"{name}: {t['count']}/{total} queries\n{len(t['edges'])} edges"
                  f"{n_active}", t["active"])
    jac = jaccard_matrix([t["edges"] for t in top])
    im = axes[-1].imshow(jac, vmin=0, vmax=1, cmap="viridis")
    axes[-1].set_xticks(range(len(top)), names, fontsize=6)
    axes[-1].set_yticks(range(len(top)), names, fontsize=6)
    for i in range(len(top)):
      for j in range(len(top)):
        axes[-1].text(j, i, f"{jac[i, j]:.2f}", ha="center", va="center", fontsize=5,
                      color="white" if jac[i, j] < 0.6 else "black")
    axes[-1].set_title("pairwise Jaccard (edge sets)", fontsize=7)
    fig.colorbar(im, ax=axes[-1], fraction=0.046).set_label("Jaccard similarity", fontsize=6)
    fig.suptitle(_title(f"Figure 3: most chosen topologies, {BENCHMARK_TITLES.get(b, b)} {POOL_TITLES.get(p, p)}",
                        r), fontsize=9)
    fig.tight_layout()
    dens = r.get("graph_density") or {}
    stage2 = (r.get("fit") or {}).get("stage2")
    mode = (r.get("config") or {}).get("graph_mode", "classifier")
    untrained = mode == "classifier" and (not stage2 or stage2.get("skipped"))
    caption = (f"The five most chosen distinct edge sets G* on the test split (graphs of the pool with the same "
               f"edges counted once; nodes named by role; mean density {dens.get('mean', float('nan')):.2f}; "
               + (f"{distinct} distinct edge sets over {total} queries" if distinct is not None else
                  f"{dens.get('distinct_graphs')} distinct graph indices (the run directory is not here to count "
                  "distinct edge sets)")
               + "), and the Jaccard similarity of their edge sets. "
               + ("Grey: roles inactive on the queries that chose the graph (their edges never ran). " if from_items
                  else "Active roles per graph are not in the results file (run directory absent): none greyed. ")
               + (f"The graph classifier did not train ({stage2.get('skipped') if stage2 else 'no stage-2 record'}):"
                  " these graphs were not chosen by a trained classifier." if untrained else ""))
    body.append(page.figure(fig, f"figure3_{b}_{p}", caption))
  return "".join(body)


def figure4_section(page: Page, results: pathlib.Path) -> str:
  files = hieramas_main_files(results)
  if not files:
    return missing("No HieraMAS results file yet (see Figure 3).")
  plt = _plt()
  body, panels = [], []
  for b, p, r in files:
    probs = r.get("policy_probabilities")
    if probs:
      models, rows = probs["models"], [probs["proposer"], probs["synthesizer"]]
      what = ("the policy's probabilities (softmax of its logits, temperature 1) per LLM, averaged over the test "
              "queries")
      bar = "probability (mean over test queries)"
    else:
      prefs = r.get("llm_preferences") or {}
      models = sorted({m for k in ("proposer", "synthesizer") for m in (prefs.get(k) or {})})
      if not models:
        body.append(missing(f"{b}/{p}: the results file has neither policy probabilities nor preference counts."))
        continue
      rows = []
      for k in ("proposer", "synthesizer"):
        counts = np.array([(prefs.get(k) or {}).get(m, 0) for m in models], float)
        rows.append((counts / counts.sum()).tolist() if counts.sum() else counts.tolist())
      what = ("share of the greedy choices per position (this results file predates saved policy probabilities: "
              "rerun train_hieramas.py for them)")
      bar = "share of greedy choices"
    panels.append((b, p, r, models, np.array(rows), what, bar))
  # One colour scale for every panel, 0 to the largest value of any panel (rounded up to 0.05): panels
  # compare, and ten-odd LLMs' probabilities near 0.1 stay distinguishable (on 0-1 they look alike).
  vmax = max([0.05] + [float(np.ceil(mat.max() * 20) / 20) for _, _, _, _, mat, _, _ in panels])
  for b, p, r, models, mat, what, bar in panels:
    fig, ax = plt.subplots(figsize=(2.0 + 0.75 * len(models), 2.8))
    im = ax.imshow(mat, vmin=0, vmax=vmax, cmap="magma_r", aspect="auto")
    ax.set_xticks(range(len(models)), models, rotation=35, ha="right", fontsize=7)
    ax.set_yticks([0, 1], ["proposer", "synthesizer"], fontsize=8)
    ax.set_xlabel("LLM of the pool", fontsize=8)
    ax.set_ylabel("position", fontsize=8)
    for i in range(mat.shape[0]):
      for j in range(mat.shape[1]):
        ax.text(j, i, f"{mat[i, j]:.2f}", ha="center", va="center", fontsize=6,
                color="white" if mat[i, j] > 0.6 * vmax else "black")
    fig.colorbar(im, ax=ax, fraction=0.03).set_label(bar, fontsize=7)
    ax.set_title(_title(f"Figure 4: LLM preferences, {BENCHMARK_TITLES.get(b, b)} {POOL_TITLES.get(p, p)}",
                        r), fontsize=9)
    fig.tight_layout()
    body.append(page.figure(fig, f"figure4_{b}_{p}", f"Per position (proposers pooled, synthesizer): {what}. "
                            f"Every panel on the same colour scale, 0 to {vmax:.2f} (the largest value of any "
                            "panel)."))
  return "".join(body)


def _curves_of(record: Mapping[str, Any]) -> dict[str, list]:
  if record.get("curves"):
    return record["curves"]
  from hieramas_jax.experiment.rundir import from_repo  # pylint: disable=import-outside-toplevel
  from hieramas_jax.report.hieramas import training_curves  # pylint: disable=import-outside-toplevel
  run_dir = record.get("run_dir")
  return training_curves(from_repo(run_dir)) if run_dir else {}


def curves_section(page: Page, results: pathlib.Path) -> str:
  files = hieramas_main_files(results)
  if not files:
    return missing("No HieraMAS results file yet (see Figure 3).")
  plt = _plt()
  body = []
  for b, p, r in files:
    curves = _curves_of(r)
    if not curves:
      body.append(missing(f"{b}/{p}: no training curves (the results file predates saved curves and its run "
                          f"directory {r.get('run_dir')} is not on this machine: rerun train_hieramas.py)."))
      continue
    panels = [("stage 1: loss", ["stage1/loss"]),
              ("stage 1: system reward", ["stage1/batch_mean_system_reward", "stage1/val_mean_reward"]),
              ("stage 1: accuracy", ["stage1/batch_accuracy", "stage1/val_accuracy"]),
              ("stage 2: classifier loss", ["stage2/train_loss", "stage2/val_loss"])]
    fit = r.get("fit") or {}
    best1 = (fit.get("stage1_best") or {}).get("step")
    best2 = (fit.get("stage2") or {}).get("best_val_loss")
    s2 = [pt for k in ("stage2/train_loss", "stage2/val_loss") for pt in curves.get(k) or []]
    # Stage 2 is logged at steps continuing stage 1's (offset + epoch): shown by its own epoch, from 1.
    offset = min(step for step, _ in s2) - 1 if s2 else 0
    fig, axes = plt.subplots(1, 4, figsize=(14, 2.9))
    for ax, (title, keys) in zip(axes, panels):
      stage2 = title.startswith("stage 2")
      drawn = False
      for k in keys:
        pts = curves.get(k)
        if pts:
          xs = [step - offset if stage2 else step for step, _ in pts]
          ax.plot(xs, [v for _, v in pts], "o-" if len(pts) < 15 else "-", ms=3, label=k.split("/")[1])
          drawn = True
      if not stage2 and best1 is not None and drawn:
        ax.axvline(best1, color="C3", ls=":", lw=1, label=f"chosen checkpoint (step {best1})")
      val = curves.get("stage2/val_loss") or []
      if stage2 and best2 is not None and val:
        step, v = min(val, key=lambda sv: abs(sv[1] - best2))
        ax.plot([step - offset], [v], "*", color="C3", ms=10, label=f"lowest val loss (epoch {step - offset})")
      if drawn:
        ax.legend(fontsize=6)
      else:
        ax.text(0.5, 0.5, "not logged\n(stage skipped)", ha="center", va="center", transform=ax.transAxes,
                fontsize=8)
      ax.set_title(title, fontsize=8)
      ax.set_xlabel("epoch" if stage2 else "REINFORCE update (step)", fontsize=7)
    fig.suptitle(_title(f"Training curves, {BENCHMARK_TITLES.get(b, b)} {POOL_TITLES.get(p, p)}", r),
                 fontsize=9)
    fig.tight_layout()
    body.append(page.figure(fig, f"curves_{b}_{p}", "Stage 1 per update (batch) and per validation, the dotted red "
                            "line at the checkpoint kept (best validation); stage 2 per epoch on its own axis, the "
                            "star at its lowest validation loss."))
  return "".join(body)


def calibration_section(page: Page, results: pathlib.Path) -> str:
  record = _load(results / "calibration.json")
  if not record:
    return missing("results/calibration.json is missing: run `make calibrate`.")
  # Only the rows the sim was fitted on (LLM-Debate is measured beside them but never fitted).
  fit = [c for c in (record.get("fit") or {}).get("cells") or [] if c.get("fitted", True)]
  val = ((record.get("validation") or {}).get("full_graph") or {})
  if not fit and not val:
    return missing("results/calibration.json has neither a fit nor a validation section.")
  plt = _plt()
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
    ax_val.set_ylim(max(0, min(c["accuracy"] for c in cells) - 15), 100)
    ax_val.set(ylabel="Full-Graph accuracy %", title="validation: Full-Graph (never fitted)")
    ax_val.legend(fontsize=7)
  else:
    ax_val.text(0.5, 0.5, "no validation section", ha="center", transform=ax_val.transAxes)
  fig.suptitle(_title("Calibration of the simulator", record))
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
    record = _load(f)
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
  record = _load(results / "hieramas_frontier.json")
  if not record or "settings" not in record:
    return missing("results/hieramas_frontier.json is missing: run `make frontier` (after `make reproduce-table1`).")
  positions = "; ".join(f"{BENCHMARK_TITLES.get(s['benchmark'], s['benchmark'])} "
                        f"{POOL_TITLES.get(s['pool'], s['pool'])}: {s['position']}"
                        for s in record["settings"].values())
  fig = frontier_figure(record)
  fig.suptitle(_title("HieraMAS cost-accuracy frontier", _is_sim(record)))
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
  sims = [_is_sim(_load(f)) for f in results.glob("*.json") if f.name != "bench.json"]
  banner = ("Simulated pool (hieramas_jax.sim): not real LLM results. Every figure made on it says so."
            if any(sims) else None)
  intro = ("<p>Built by <code>make report</code> (<code>python experiments/make_report.py</code>) from "
           "<code>results/</code>; each table below carries the command that made it.</p>")
  return page.render("hieramas-jax: the paper's experiments as this suite reproduces them", banner, intro), page


def samples_section(n_cells: int | None) -> str:
  if n_cells is None:
    return missing("The sample browser is written by write_report (make report), beside this page.")
  if not n_cells:
    return missing("No cell with a run directory in results/table1.json or table3.json: nothing to browse.")
  return (f'<p><a href="samples/index.html" data-samples>Browse every test query of {n_cells} cells</a>: '
          "each call's prompt and response, the extracted and gold answers, the grade, cost and tokens, the "
          "chosen configuration and graph; filters by method, benchmark and correctness; two methods side by "
          "side. Offline: samples/ beside this page.</p>")


def write_report(results: str | pathlib.Path, out_dir: str | pathlib.Path, *,
                 samples: bool = True) -> tuple[pathlib.Path, Page]:
  """index.html in `out_dir`, and (with `samples`) the sample browser in `out_dir`/samples."""
  from hieramas_jax.fileio import atomic_write_text  # pylint: disable=import-outside-toplevel
  from hieramas_jax.report.samples import write_samples  # pylint: disable=import-outside-toplevel
  n_cells = write_samples(results, pathlib.Path(out_dir) / "samples")[1] if samples else None
  text, page = build_report(results, n_cells)
  path = pathlib.Path(out_dir) / "index.html"
  atomic_write_text(path, text)
  return path, page
