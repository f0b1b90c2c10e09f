"""The report's figures from HieraMAS's results files: Figure 3 (chosen topologies), Figure 4 (LLM
preferences per position) and the stage-1 / stage-2 training curves (sections 2-4 of `html.py`)."""

from __future__ import annotations

import json
import pathlib
from typing import Any, Mapping, Sequence

import numpy as np

from hieramas_jax.benchmarks.data import BENCHMARK_TITLES
from hieramas_jax.report.page import Page, load_json, missing, pyplot, sim_caption
from hieramas_jax.report.paper import POOL_TITLES


def hieramas_main_files(results: pathlib.Path) -> list[tuple[str, str, dict]]:
  """(benchmark, pool, record) of every untagged HieraMAS results file, in the paper's order."""
  out = []
  for b in BENCHMARK_TITLES:
    for p in POOL_TITLES:
      r = load_json(results / f"hieramas_{b}_{p}.json")
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
  plt = pyplot()
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
    fig.suptitle(sim_caption(f"Figure 3: most chosen topologies, {BENCHMARK_TITLES.get(b, b)} {POOL_TITLES.get(p, p)}",
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
  plt = pyplot()
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
    ax.set_title(sim_caption(f"Figure 4: LLM preferences, {BENCHMARK_TITLES.get(b, b)} {POOL_TITLES.get(p, p)}",
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
  plt = pyplot()
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
              ("stage 1: policy drift (val)", ["stage1/val_policy_entropy", "stage1/val_kl_from_init"]),
              ("stage 2: classifier loss", ["stage2/train_loss", "stage2/val_loss"])]
    fit = r.get("fit") or {}
    best1 = (fit.get("stage1_best") or {}).get("step")
    best2 = (fit.get("stage2") or {}).get("best_val_loss")
    s2 = [pt for k in ("stage2/train_loss", "stage2/val_loss") for pt in curves.get(k) or []]
    # Stage 2 is logged at steps continuing stage 1's (offset + epoch): shown by its own epoch, from 1.
    offset = min(step for step, _ in s2) - 1 if s2 else 0
    fig, axes = plt.subplots(1, len(panels), figsize=(3.5 * len(panels), 2.9))
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
      # A cross-entropy from zero and an accuracy over its whole range: 0.835-0.839 drawn full height read
      # as a steep curve. (Stage 1's REINFORCE loss and reward may be negative: their own range.)
      if drawn and stage2:
        ax.set_ylim(0, 1.25 * max(v for _, v in s2))  # room above the curves for the legend
      elif drawn and title.endswith("accuracy"):
        ax.set_ylim(0, 1.02)
    fig.suptitle(sim_caption(f"Training curves, {BENCHMARK_TITLES.get(b, b)} {POOL_TITLES.get(p, p)}", r),
                 fontsize=9)
    fig.tight_layout()
    body.append(page.figure(fig, f"curves_{b}_{p}", "Stage 1 per update (batch) and per validation, the dotted red "
                            "line at the checkpoint kept (best validation); the policy's mean entropy and KL from "
                            "its initialisation on the validation queries (flat entropy, KL ~ 0: it chose nothing); "
                            "stage 2 per epoch on its own axis, the "
                            "star at its lowest validation loss."))
  return "".join(body)
