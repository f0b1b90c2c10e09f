"""AgentPrune's spatial-temporal communication graph (Zhang et al. 2025, arXiv 2410.02506; public code
yanweiyue/AgentPrune), in JAX.

Over N agents, two sets of free edge logits, one per ordered pair (`Graph.__init__`, graph.py l. 71-79):

  spatial_logits  [N, N]   edge i -> j within a round (i's current output is an input of j)
  temporal_logits [N, N]   edge i -> j across rounds (i's previous-round output is an input of j)
  p = sigmoid(logit / temperature), initialised at p = 0.5 (logit 0; temperature 1)

and two fixed 0/1 masks, the one-shot pruning's state (`spatial_masks`, `temporal_masks`): the
`FullConnected` mode of the run scripts' `get_kwargs` starts with every off-diagonal spatial pair and
every temporal pair, self pairs included (`initial_masks`). Not query-conditioned: one graph for every query.

Sampling, per round (`construct_spatial_connection`, `construct_temporal_connection`, graph.py l. 169-218),
on the host in the reference's i-major order:
  spatial:  a masked pair is skipped; a pair whose edge would close a cycle is skipped; every other pair
            is drawn Bernoulli(p) and adds log p or log(1 - p) (`gdesigner.model.sample_dag` with `allowed`);
  temporal: round 0 has none; in later rounds every unmasked pair, i -> i included, is drawn Bernoulli(p)
            with no cycle check (optimised temporal edges skip it) and adds its log-probability.

Training (experiments/train_mmlu.py `train`, run_gsm8k.py, run_humaneval.py): REINFORCE on the 0/1 utility,
loss = -mean_b [u_b (log P_b^spatial + log P_b^temporal)], Adam lr 0.1 over both logit sets
(`train_step`). Every `imp_per_iterations` updates the masks are pruned once (`prune_mask`, a port of
`Graph.update_masks`, graph.py l. 317-339): the round(rate x unmasked) unmasked pairs with the lowest
logits lose their mask bit, and never come back.
"""

from __future__ import annotations

import functools
from typing import NamedTuple

import jax
import jax.numpy as jnp
import numpy as np
import optax

from hieramas_jax.methods.gdesigner.model import log_prob, sample_dag


class Draws(NamedTuple):
  """The host-side draws of one query, [T, N, N] bool each: the pairs drawn (considered) and kept (chosen)."""

  spatial_considered: np.ndarray
  spatial_chosen: np.ndarray
  temporal_considered: np.ndarray
  temporal_chosen: np.ndarray


def init_logit(probability: float) -> float:
  """log(p / (1 - p)): the reference's initial logit of an optimised edge set (p = 0.5 -> 0)."""
  if not 0.0 < probability < 1.0:
    raise ValueError(f"an initial edge probability must be in (0, 1), got {probability}")
  return float(np.log(probability / (1.0 - probability)))


def init_params(n: int, initial_spatial_probability: float = 0.5,
                initial_temporal_probability: float = 0.5) -> dict[str, jax.Array]:
  """{"spatial", "temporal"}: [N, N] logits, every pair at its initial probability's logit."""
  return {"spatial": jnp.full((n, n), init_logit(initial_spatial_probability), jnp.float32),
          "temporal": jnp.full((n, n), init_logit(initial_temporal_probability), jnp.float32)}


def initial_masks(n: int) -> dict[str, np.ndarray]:
  """The `FullConnected` mode's fixed masks (run_*.py `get_kwargs`): spatial every i != j, temporal every pair."""
  return {"spatial": ~np.eye(n, dtype=bool), "temporal": np.ones((n, n), bool)}


def edge_probs(logits: np.ndarray, temperature: float = 1.0) -> np.ndarray:
  return 1.0 / (1.0 + np.exp(-np.asarray(logits, np.float64) / temperature))


def sample_temporal(probs: np.ndarray, mask: np.ndarray, rng: np.random.Generator) -> tuple[np.ndarray, np.ndarray]:
  """One later round's temporal edges: (considered, chosen), [N, N] bool. Every unmasked pair in i-major
  order, self pairs included, Bernoulli(p), no cycle check (the optimised branch of
  `construct_temporal_connection`)."""
  n = probs.shape[0]
  considered = np.asarray(mask, bool).copy()
  chosen = np.zeros((n, n), bool)
  for i in range(n):
    for j in range(n):
      if considered[i, j]:
        chosen[i, j] = rng.random() < probs[i, j]
  return considered, chosen


def sample_rounds(params, masks, rounds: int, rng: np.random.Generator,
                  temperature: float = 1.0) -> tuple[list[np.ndarray], list[np.ndarray], Draws]:
  """`rounds` rounds of edges (the reference's `arun`: each round's spatial draws, then its temporal ones).

  Returns (spatial adjacency per round, temporal adjacency per round, the draws for the loss).
  """
  sp = edge_probs(params["spatial"], temperature)
  tp = edge_probs(params["temporal"], temperature)
  n = sp.shape[0]
  spatial, temporal, sc, sh, tc, th = [], [], [], [], [], []
  for r in range(rounds):
    adj, considered, chosen = sample_dag(sp, rng, allowed=np.asarray(masks["spatial"], bool))
    if r == 0:
      t_cons, t_chosen = np.zeros((n, n), bool), np.zeros((n, n), bool)
    else:
      t_cons, t_chosen = sample_temporal(tp, masks["temporal"], rng)
    spatial.append(adj)
    temporal.append(t_chosen)
    sc.append(considered)
    sh.append(chosen)
    tc.append(t_cons)
    th.append(t_chosen)
  return spatial, temporal, Draws(*(np.stack(x) for x in (sc, sh, tc, th)))


def stack_draws(draws: list[Draws]) -> Draws:
  """[B, T, N, N] arrays from a batch's draws."""
  return Draws(*(jnp.asarray(np.stack([getattr(d, f) for d in draws])) for f in Draws._fields))


def query_log_prob(params, draws: Draws, temperature: float = 1.0) -> jax.Array:
  """[B] log-probability of each query's spatial and temporal draws (the sum `arun` returns)."""
  batch = draws.spatial_considered.shape[0]
  out = 0.0
  for name, considered, chosen in (("spatial", draws.spatial_considered, draws.spatial_chosen),
                                   ("temporal", draws.temporal_considered, draws.temporal_chosen)):
    probs = jax.nn.sigmoid(params[name] / temperature)
    out = out + log_prob(jnp.broadcast_to(probs, (batch,) + probs.shape), considered, chosen)
  return out


def loss_fn(params, draws: Draws, utility: jax.Array, temperature: float = 1.0) -> jax.Array:
  """-mean_b u_b log P_b (train_mmlu.py: `single_loss = - log_prob * utility`, `torch.mean`)."""
  return -jnp.mean(utility * query_log_prob(params, draws, temperature))


@functools.partial(jax.jit, static_argnames=("lr", "temperature"))
def train_step(state, draws: Draws, utility: jax.Array, *, lr: float, temperature: float = 1.0):
  """One Adam update (torch's defaults: betas 0.9/0.999, eps 1e-8, as optax's) of both logit sets;
  returns ({"params", "opt_state", "step"}, loss)."""
  loss, grads = jax.value_and_grad(loss_fn)(state["params"], draws, utility, temperature)
  updates, opt_state = optax.adam(lr).update(grads, state["opt_state"], state["params"])
  return {"params": optax.apply_updates(state["params"], updates), "opt_state": opt_state,
          "step": state["step"] + 1}, loss


def prune_count(unmasked: int, rate: float) -> int:
  """How many unmasked edges one pruning removes: torch.round(unmasked * rate) (half to even, in float32),
  at least 1."""
  k = int(np.round(np.float32(unmasked) * np.float32(rate)))
  return k if k > 0 else 1


def prune_mask(logits: np.ndarray, mask: np.ndarray, rate: float) -> np.ndarray:
  """`Graph.update_masks` for one edge set: the new [N, N] bool mask.

  The masked pairs' logits are set below every logit (min - 1), the N^2 logits sorted ascending, and the
  first (masked + prune_count) pairs masked: exactly the `prune_count` unmasked pairs of lowest logit go.
  Ties go in flat index order (i-major): a stable sort (torch's default `argsort` does not promise one).
  """
  logits = np.asarray(logits, np.float32).ravel()
  flat = np.asarray(mask, bool).ravel()
  k = prune_count(int(flat.sum()), rate)
  scored = logits.copy()
  scored[~flat] = logits.min() - 1.0
  order = np.argsort(scored, kind="stable")
  out = flat.copy()
  out[order[:k + int((~flat).sum())]] = False
  return out.reshape(np.shape(mask))
