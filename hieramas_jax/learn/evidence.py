"""What a fit learned, measured: the raw evidence a verdict is made from (no verdicts here).

A learned method must prove it learned (the suite's standard). Two stages, two kinds of evidence:

- Stage 1 (the LLM-selection policy): how far the policy moved from its initialisation, per step, on
  fixed queries: its mean entropy per position and its mean KL(pi_t || pi_0), both at temperature 1
  (the distribution the hard Gumbel draws sample from). A policy that stays at maximal entropy with
  KL ~ 0 chose nothing; only a moved policy can do better than its start. Whether the move helped is a
  separate, paired measurement on the validation queries (the caller runs the untrained and the trained
  policy on the same queries and graphs and keeps both per-query outcomes).
- Stage 2 (the graph classifier): on its held-out validation queries, per query, whether its top-scored
  graph is a positive (top-1 hit), what a uniform pick would hit (chance: positives / graphs), and the
  same for a fresh initialisation of the classifier; per (query, graph) pair its score and label, for
  the ranking AUC.
- Stage-2 labels (`label_sources`): whether the contrast between a query's graphs is solved vs unsolved
  or cost only, i.e. whether the labels can see topology at all. A classifier at chance picks graphs as well as a die.

The intervals and the "learned" / "did not learn" verdicts are computed from these arrays by
`report/learning.py` (with the report's bootstrap statistics), so every report can be rebuilt from a
results file without refitting.
"""

from __future__ import annotations

from typing import Any

import jax
import jax.numpy as jnp
import numpy as np


@jax.jit
def policy_drift(probs: jax.Array, init_probs: jax.Array, slot_mask: jax.Array) -> tuple[jax.Array, jax.Array]:
  """(mean entropy, mean KL(probs || init_probs)) over queries and existing positions, in nats.

  Args:
    probs, init_probs: [B, R, P, C] categorical distributions (C = M + 1 choices, skip last).
    slot_mask: [R, P] bool, False for padding positions.
  """
  tiny = jnp.finfo(probs.dtype).tiny
  logp = jnp.log(jnp.maximum(probs, tiny))
  entropy = -jnp.sum(probs * logp, axis=-1)  # [B, R, P]
  kl = jnp.sum(probs * (logp - jnp.log(jnp.maximum(init_probs, tiny))), axis=-1)
  weight = jnp.broadcast_to(slot_mask[None], entropy.shape).astype(probs.dtype)
  total = jnp.maximum(weight.sum(), 1.0)
  return jnp.sum(entropy * weight) / total, jnp.sum(kl * weight) / total


def top1_hits(scores, labels, label_mask) -> dict[str, np.ndarray]:
  """Per query with at least one positive: did the top-scored graph hit a positive, and chance.

  Args:
    scores: [Q, G] classifier logits.
    labels: [Q, G] 0/1.
    label_mask: [Q, G] bool (real pairs).

  Returns:
    {"hit": [Q'] 0/1, "chance": [Q'] positives / real graphs, "query": [Q'] row indices kept}; Q' are the
    queries with a positive (a query without one cannot be hit by any pick). Ties among the top scores
    go to the first graph (argmax), as inference does.
  """
  scores = np.asarray(scores, np.float64)
  labels = np.asarray(labels, np.float64)
  mask = np.asarray(label_mask, bool)
  positives = (labels * mask).sum(axis=1)
  keep = np.flatnonzero(positives > 0)
  best = np.argmax(np.where(mask, scores, -np.inf), axis=1)
  hit = labels[np.arange(len(labels)), best] > 0
  chance = positives / np.maximum(mask.sum(axis=1), 1)
  return {"hit": hit[keep].astype(np.float64), "chance": chance[keep], "query": keep}


def auc(scores, labels) -> float | None:
  """Ranking AUC (Mann-Whitney: P(score of a positive > score of a negative), ties count 1/2).

  None without both a positive and a negative.
  """
  scores = np.asarray(scores, np.float64).ravel()
  labels = np.asarray(labels, bool).ravel()
  num_pos = int(labels.sum())
  num_neg = labels.size - num_pos
  if num_pos == 0 or num_neg == 0:
    return None
  ranks = average_ranks(scores)
  return float((ranks[labels].sum() - num_pos * (num_pos + 1) / 2.0) / (num_pos * num_neg))


def average_ranks(x) -> np.ndarray:
  """1-based ranks, ties sharing their average: O(n log n), so a bootstrap can call it thousands of times."""
  _, inverse, counts = np.unique(np.asarray(x, np.float64).ravel(), return_inverse=True, return_counts=True)
  return (np.cumsum(counts) - (counts - 1) / 2.0)[inverse]


def spearman(x, y) -> float | None:
  """Spearman's rank correlation (Pearson's on average ranks); None when either side is constant."""
  rx, ry = average_ranks(x), average_ranks(y)
  rx, ry = rx - rx.mean(), ry - ry.mean()
  denom = np.sqrt((rx * rx).sum() * (ry * ry).sum())
  return None if denom == 0 else float((rx * ry).sum() / denom)


def label_sources(solved, reward, adjacency, decision_cost) -> dict[str, Any]:
  """What stage 2's contrastive labels can see: for the queries whose G graphs got different rewards
  (the ones the classifier learns from), does the difference come from solving (some graphs solved the
  query, others not) or from cost alone (all solved or all failed, only the charged cost differs)?

  Args:
    solved: [Q, G] bool, the system answer per graph (the frozen policy's choices on each graph).
    reward: [Q, G] the system rewards the labels rank.
    adjacency: [Q, G, N, N] the graphs.
    decision_cost: [Q, G] USD of the decision call (what the reference's system reward charges).

  Returns counts and shares, and two Spearman correlations over all (query, graph) pairs after removing
  each query's mean (within-query: does a denser graph solve more, or cost more?).
  """
  solved = np.asarray(solved, bool)
  reward = np.asarray(reward, np.float64)
  adjacency = np.asarray(adjacency, bool)
  q, g, n, _ = adjacency.shape
  contrastive = reward.max(axis=1) > reward.min(axis=1)
  solve_differs = solved.any(axis=1) & ~solved.all(axis=1)
  density = adjacency.reshape(q, g, -1).sum(-1) / max(n * (n - 1) / 2, 1)
  centred = lambda a: (a - a.mean(axis=1, keepdims=True)).ravel()
  n_contrastive = int(contrastive.sum())
  return {"queries": int(q), "graphs_per_query": int(g), "contrastive": n_contrastive,
          "solved_vs_unsolved": int((contrastive & solve_differs).sum()),
          "cost_only": int((contrastive & ~solve_differs).sum()),
          "share_solved_vs_unsolved": (float((contrastive & solve_differs).sum()) / n_contrastive
                                       if n_contrastive else None),
          "graph_solve_rate": float(solved.mean()),
          "spearman_density_solved": spearman(centred(density), centred(solved.astype(np.float64))),
          "spearman_density_decision_cost": spearman(centred(density),
                                                     centred(np.asarray(decision_cost, np.float64)))}
