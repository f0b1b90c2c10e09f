"""Did the methods beyond the paper (AgentPrune, MaAS, ARG-Designer) move during their fit? One verdict per cell.

Read from each cell's fit summary (`record["cells"][key]["fit"]`): only what the fit recorded while it ran, no
LLM call and no refit. The verdict ("moved" / "did not move") is about the method's own training objective,
the quantity its update follows:

- AgentPrune: the training utility (batch accuracy, the 0/1 reward its REINFORCE weights) per update;
- MaAS: the training utility per batch, score - cost_weight x cost (USD), mean over the batch's queries;
- ARG-Designer: each stage's mean training loss per epoch (pretrain, finetune); the cell's verdict is that of
  the last stage that trained (its weights are the ones used).

Rule (`curve_change`): the mean of the last w points minus the mean of the first w (w = max(2, n // 4)), with
a 95% Welch t interval; "moved" iff the interval excludes 0, else "did not move"; fewer than 4 points: no
verdict. MaAS passes over the same training queries in the same order every repetition, so its rule is paired
instead (`paired_passes`): per batch, last repetition's utility minus the first's, 95% bootstrap interval of
the mean; one repetition falls back to the window rule. A flat curve has a zero-width interval at 0: "did not
move".

Beside the verdict, what the fit did in other units (descriptive, no verdict): AgentPrune's mask against its
initial graph (pruning follows a fixed schedule, whatever the utility) and how far its edge probabilities moved
from their start; MaAS's layer-0 operator entropy at its first and last step against ln K (uniform); ARG-
Designer's validation loss first and best.
"""

from __future__ import annotations

import math
from typing import Any, Mapping, Sequence

import numpy as np
from scipy import stats as sps

from hieramas_jax.report.stats import key_seed, paired_difference

MOVED, NOT_MOVED = "moved", "did not move"
NOT_RECORDED = "not recorded"
RULE = ("**moved** when the 95% interval of the change in the method's own training objective (AgentPrune, MaAS: "
        "the utility its update weights; ARG-Designer: the training loss of the stage whose weights are used) "
        "excludes 0, else **did not move**. Change = mean of the last w points - mean of the first w (w = max(2, "
        "n // 4)), Welch t interval; MaAS instead pairs each batch of its last pass over the training queries with "
        "the same batch of its first pass (bootstrap interval). Fewer than 4 points: no verdict. Training data, "
        "in-sample: moving says the fit changed its own objective, not that it beats chance on new queries.")


def curve_change(values: Sequence[float | None], window: int | None = None) -> dict[str, Any]:
  """First window against last window of a per-step curve, with the verdict of the module's rule."""
  x = np.asarray([v for v in values if v is not None and math.isfinite(v)], np.float64)
  n = int(x.size)
  if n < 4:
    return {"n": n, "verdict": None, "reason": f"{n} points, too few to judge (4 needed)"}
  w = window or max(2, n // 4)
  first, last = x[:w], x[-w:]
  delta = float(last.mean() - first.mean())
  v1, v2 = first.var(ddof=1) / w, last.var(ddof=1) / w
  se = math.sqrt(v1 + v2)
  if se == 0.0:
    ci = [delta, delta]
  else:
    df = (v1 + v2) ** 2 / ((v1 ** 2 + v2 ** 2) / (w - 1))  # Welch-Satterthwaite
    half = float(sps.t.ppf(0.975, df)) * se
    ci = [delta - half, delta + half]
  return {"n": n, "window": w, "first": float(first.mean()), "last": float(last.mean()), "delta": delta, "ci": ci,
          "verdict": MOVED if ci[0] > 0 or ci[1] < 0 else NOT_MOVED}


def paired_passes(history: Sequence[Mapping[str, Any]], utility: Sequence[float], key: str) -> dict[str, Any] | None:
  """MaAS: per batch index, the last repetition's utility minus the first's (same queries, same order); None
  with one repetition."""
  reps = [h.get("repetition", 0) for h in history]
  if not reps or max(reps) == min(reps):
    return None
  lo, hi = min(reps), max(reps)
  first = [u for h, u in zip(history, utility) if h.get("repetition", 0) == lo]
  last = [u for h, u in zip(history, utility) if h.get("repetition", 0) == hi]
  m = min(len(first), len(last))
  d = paired_difference(last[:m], first[:m], seed=key_seed(key))
  return {"n": m, "first": float(np.mean(first[:m])), "last": float(np.mean(last[:m])), "delta": d["delta"],
          "ci": d["ci"], "verdict": MOVED if d["ci"][0] > 0 or d["ci"][1] < 0 else NOT_MOVED}


def _maas_utility(fit: Mapping[str, Any]) -> list[float]:
  """Mean utility per batch: accuracy - cost_weight x (batch cost / batch size); the last batch of a pass may be
  short. Fits before `batch_size` / `cost_weight` were recorded ran the reference's 4 and 3 (MaASConfig)."""
  bs, w, n = int(fit.get("batch_size", 4)), float(fit.get("cost_weight", 3.0)), int(fit.get("train_queries", 0))
  per_rep = -(-n // bs) if n else 0
  out = []
  for i, h in enumerate(fit["history"]):
    b = i % per_rep if per_rep else 0
    size = min(bs, n - b * bs) if n else bs
    out.append(h["maas/batch_accuracy"] - w * h["maas/batch_cost_usd"] / max(size, 1))
  return out


def agentprune_evidence(fit: Mapping[str, Any], key: str) -> dict[str, Any]:
  del key
  history = fit.get("history") or []
  out = curve_change([h["agentprune/batch_accuracy"] for h in history])
  out["objective"] = "training utility (batch accuracy)"
  spatial, temporal = np.asarray(fit.get("spatial_mask", [])), np.asarray(fit.get("temporal_mask", []))
  n = spatial.shape[0] if spatial.ndim == 2 else 0
  out["edges"] = {"spatial": [n * (n - 1), int(spatial.sum())], "temporal": [n * n, int(temporal.sum())]}
  out["pruning_steps"] = [h["step"] for h in history if h.get("pruned")]
  losses = [h["agentprune/loss"] for h in history]
  out["loss"] = [losses[0], losses[-1]] if losses else None
  probs, init = fit.get("edge_probability"), fit.get("initial_probability")
  if probs and init:  # on the edges still unmasked: how far from the initial probability
    moved = [abs(p - init[k]) for k in ("spatial", "temporal")
             for p, m in zip(np.ravel(probs[k]), np.ravel(fit[f"{k}_mask"])) if m]
    out["probability_shift"] = {"max": float(max(moved)) if moved else 0.0,
                                "mean": float(np.mean(moved)) if moved else 0.0}
  return out


def maas_evidence(fit: Mapping[str, Any], key: str) -> dict[str, Any]:
  history = fit.get("history") or []
  util = _maas_utility(fit) if history else []
  out = paired_passes(history, util, key + "|maas") or curve_change(util)
  out["objective"] = "training utility (score - 3 x cost)"
  out["paired"] = "window" not in out and out.get("verdict") is not None
  layers = [h["maas/mean_layers"] for h in history]
  out["mean_layers"] = [layers[0], layers[-1]] if layers else None
  ent = [h.get("maas/layer0_entropy") for h in history]
  if ent and ent[0] is not None and ent[-1] is not None:
    out["layer0_entropy"] = [ent[0], ent[-1], fit.get("max_layer0_entropy")]
  return out


def arg_designer_evidence(fit: Mapping[str, Any], key: str) -> dict[str, Any]:
  del key
  stages = {}
  for stage in ("pretrain", "finetune"):
    info = fit.get(stage) or {}
    if info.get("skipped"):
      stages[stage] = {"verdict": None, "reason": f"skipped: {info['skipped']}"}
    elif not info.get("curve"):
      stages[stage] = {"verdict": None, "reason": f"{NOT_RECORDED} (fit before the per-epoch curve was kept; "
                       "refit)", "last_train_loss": info.get("last_train_loss"),
                       "best_val_loss": info.get("best_val_loss")}
    else:
      c = curve_change(info["curve"]["train_loss"])
      val = [v for v in info["curve"]["val_loss"] if v is not None]
      c.update({"graphs": info.get("graphs"), "val_first": val[0] if val else None,
                "val_best": min(val) if val else None})
      stages[stage] = c
  used = "pretrain" if (fit.get("finetune") or {}).get("skipped") else "finetune"
  return {"objective": "training loss per epoch", "stages": stages, "used": used,
          "verdict": stages[used].get("verdict"), "reason": stages[used].get("reason")}


EVIDENCE = {"agentprune": agentprune_evidence, "maas": maas_evidence, "arg_designer": arg_designer_evidence}


def cell_evidence(cell: Mapping[str, Any]) -> dict[str, Any] | None:
  """The learning evidence of one beyond-the-paper cell (None for other methods); a cell without its own fit
  (loaded from another) says so."""
  fn = EVIDENCE.get(cell["method"])
  if fn is None:
    return None
  key = f"{cell['label']}|{cell['benchmark']}|{cell['pool']}|{cell['setting']}|seed{cell['seed']}"
  if not cell.get("fit"):
    reason = f"loaded from {cell['loaded_from']}" if cell.get("loaded_from") else "no fit recorded"
    return {"verdict": None, "reason": reason}
  return fn(cell["fit"], key)


def _ci(v: Mapping[str, Any], spec: str) -> str:
  return f"{format(v['delta'], spec)} [{format(v['ci'][0], spec)}, {format(v['ci'][1], spec)}]"


def _verdict(v: Mapping[str, Any], what: str, spec: str) -> str:
  if v.get("verdict") is None:
    return f"no verdict: {v.get('reason')}"
  how = (f"last pass vs first over {v['n']} batches" if "window" not in v else
         f"last {v['window']} vs first {v['window']} of {v['n']}")
  return (f"**{v['verdict']}**: {what} {format(v['first'], spec.lstrip('+'))} -> "
          f"{format(v['last'], spec.lstrip('+'))}, {how}: {_ci(v, spec)}")


def evidence_text(method: str, v: Mapping[str, Any] | None) -> str:
  """One table cell: the verdict, then what else the fit did."""
  if v is None:
    return "-"
  if method == "agentprune":
    text = _verdict(v, "utility", "+.3f")
    e = v.get("edges") or {}
    if e:
      text += (f"; mask: spatial {e['spatial'][1]} of {e['spatial'][0]} edges, temporal {e['temporal'][1]} of "
               f"{e['temporal'][0]} (pruned on schedule after steps {', '.join(map(str, v['pruning_steps']))})")
    if v.get("probability_shift"):
      text += (f"; unmasked edge probabilities moved from their start by {v['probability_shift']['mean']:.3f} mean, "
               f"{v['probability_shift']['max']:.3f} max")
    return text
  if method == "maas":
    text = _verdict(v, "utility", "+.3f")
    if v.get("mean_layers"):
      text += f"; mean layers {v['mean_layers'][0]:.2f} -> {v['mean_layers'][1]:.2f} (first -> last batch)"
    if v.get("layer0_entropy"):
      a, b, top = v["layer0_entropy"]
      text += f"; layer-0 entropy {a:.3f} -> {b:.3f}" + (f" of max ln K = {top:.3f}" if top else "")
    else:
      text += "; layer-0 entropy not recorded (fit before it was logged)"
    return text
  parts = []
  for stage in ("pretrain", "finetune"):
    s = v["stages"].get(stage, {})
    if s.get("verdict") is None:
      extra = "" if s.get("last_train_loss") is None else f"; last train loss {s['last_train_loss']:.3f}"
      extra += "" if s.get("best_val_loss") is None else f", best validation loss {s['best_val_loss']:.3f}"
      parts.append(f"{stage}: {s.get('reason')}{extra}")
    else:
      val = "" if s.get("val_best") is None else f"; validation loss {s['val_first']:.3f} -> best {s['val_best']:.3f}"
      parts.append(f"{stage}: " + _verdict(s, "train loss", "+.3f") + val)
  return "; ".join(parts)


def short_verdict(v: Mapping[str, Any] | None) -> str:
  if v is None:
    return "-"
  return v.get("verdict") or "no verdict"
