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
  the ranking AUC. A classifier at chance picks graphs as well as a die.

The intervals and the "learned" / "did not learn" verdicts are computed from these arrays by
`report/learning.py` (with the report's bootstrap statistics), so every report can be rebuilt from a
results file without refitting.
"""

from __future__ import annotations

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
  # Average ranks (ties share theirs): O(n log n), so a bootstrap can call it thousands of times.
  _, inverse, counts = np.unique(scores, return_inverse=True, return_counts=True)
  ranks = (np.cumsum(counts) - (counts - 1) / 2.0)[inverse]
  return float((ranks[labels].sum() - num_pos * (num_pos + 1) / 2.0) / (num_pos * num_neg))
