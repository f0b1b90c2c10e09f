"""MaAS's controller over the agentic supernet, in JAX (bingreeky/MaAS `maas/ext/maas/models/controller.py`,
`models/utils.py`).

The supernet is L = 4 layers, each offering the benchmark's K operators. Per query q (its all-MiniLM-L6-v2
embedding, 384-d) and layer l (`OperatorSelector`, hidden 32):

  u_l    = normalize(W_q^l q + b)                                  [H]
  v_l,k  = normalize(W_o^0 e_k + b)                 (layer 0)      [K, H]
  v_l,k  = normalize(W_o^l [e_k ; e_prev] + b)      (layer l > 0, e_prev = the embedding of the FIRST
                                                     operator selected in layer l - 1)
  p_l    = softmax_k(u_l . v_l,k)                   (cosine scores, no temperature)

Operators of a layer are drawn on the host (`sample_operators`): one at a time from p restricted to the
operators not yet drawn (torch.multinomial renormalises), until the drawn ones' probability mass reaches
the threshold 0.3 (`MultiLayerController.forward` passes 0.3; the function's default is 0.25). Layer 0
rules (`forward`): an EarlyStop among its draws replaces the layer by [Generate], adds a constant -1.5 to
the log-probability and ends the architecture; no operator whose name contains "generate" -> [Generate];
else the first such operator is moved to the front. In any later layer an EarlyStop ends the architecture
after that layer. A layer's log-probability is the SUM of log p over its drawn operators (not the
without-replacement sequence probability), as there.

Because layer l's distribution depends only on the previous layer's first operator, one jitted pass
computes layer 0's [K] and every later layer's [K_prev, K] log-probabilities for a batch of queries
(`all_log_probs`); the host walks them. The loss recomputes the same tables and gathers the drawn rows
(fixed shapes: batches padded to `batch_size` with weight 0).

Objective (`benchmark.py evaluate_all_problems`): utility u = score - 3 x cost (USD), loss = -mean_b
(log P_b x u_b), one Adam step (lr 0.01) per batch of 4 queries.
"""

from __future__ import annotations

import functools
import math
from typing import NamedTuple, Sequence

import flax.linen as nn
import jax
import jax.numpy as jnp
import numpy as np
import optax

NUM_LAYERS = 4            # MultiLayerController(num_layers=4)
HIDDEN = 32               # OperatorSelector(hidden_dim=32)
THRESHOLD = 0.3           # sample_operators(probs_1d, threshold=0.3) in MultiLayerController.forward
EARLY_STOP_PENALTY = -1.5  # added to layer 0's log-probability when it drew EarlyStop
COST_WEIGHT = 3.0         # utilities = scores - 3 * costs (benchmark.py)
LR = 0.01                 # optimize.py --lr default; torch.optim.Adam
GENERATE = "Generate"
EARLY_STOP = "EarlyStop"


def _torch_uniform(fan_in: int):
  """torch.nn.Linear's default init of weight and bias: U(-1/sqrt(fan_in), 1/sqrt(fan_in))."""
  bound = 1.0 / math.sqrt(fan_in)

  def init(key, shape, dtype=jnp.float32):
    return jax.random.uniform(key, shape, dtype, -bound, bound)
  return init


def _dense(features: int, fan_in: int, name: str) -> nn.Dense:
  return nn.Dense(features, kernel_init=_torch_uniform(fan_in), bias_init=_torch_uniform(fan_in), name=name)


def _normalize(x: jax.Array) -> jax.Array:
  """F.normalize(p=2): x / max(||x||, 1e-12)."""
  return x / jnp.maximum(jnp.linalg.norm(x, axis=-1, keepdims=True), 1e-12)


class OperatorSelector(nn.Module):
  """One layer's scorer (`OperatorSelector`): log-probabilities over the K operators.

  Layer 0 returns [B, K]; a later layer returns [B, K_prev, K], row p being the distribution when the
  previous layer's first operator is p.
  """

  first: bool
  hidden: int = HIDDEN

  @nn.compact
  def __call__(self, query_emb: jax.Array, op_emb: jax.Array) -> jax.Array:
    d = query_emb.shape[-1]
    u = _normalize(_dense(self.hidden, d, "query_encoder")(query_emb))                  # [B, H]
    if self.first:
      v = _normalize(_dense(self.hidden, d, "operator_encoder")(op_emb))               # [K, H]
      return jax.nn.log_softmax(u @ v.T, axis=-1)
    k = op_emb.shape[0]
    # torch.cat([operators_embed, prev_expanded], dim=1): the candidate first, the previous operator second.
    pairs = jnp.concatenate([jnp.broadcast_to(op_emb[None, :, :], (k, k, d)),
                             jnp.broadcast_to(op_emb[:, None, :], (k, k, d))], axis=-1)  # [K_prev, K, 2D]
    v = _normalize(_dense(self.hidden, 2 * d, "operator_encoder")(pairs))              # [K_prev, K, H]
    return jax.nn.log_softmax(jnp.einsum("bh,pkh->bpk", u, v), axis=-1)


class Controller(nn.Module):
  """`MultiLayerController`: one `OperatorSelector` per layer (`layers_0` ... `layers_{L-1}`)."""

  num_layers: int = NUM_LAYERS
  hidden: int = HIDDEN

  @nn.compact
  def __call__(self, query_emb: jax.Array, op_emb: jax.Array) -> tuple[jax.Array, jax.Array]:
    first = OperatorSelector(True, self.hidden, name="layers_0")(query_emb, op_emb)
    later = [OperatorSelector(False, self.hidden, name=f"layers_{l}")(query_emb, op_emb)
             for l in range(1, self.num_layers)]
    return first, jnp.stack(later, axis=1)  # [B, K], [B, L-1, K_prev, K]


@functools.partial(jax.jit, static_argnames=("net",))
def all_log_probs(params, query_emb, op_emb, *, net: Controller) -> tuple[jax.Array, jax.Array]:
  return net.apply({"params": params}, query_emb, op_emb)


def init_params(rng: jax.Array, net: Controller, op_emb: np.ndarray):
  return _jit_init(net, rng, jnp.zeros((1, op_emb.shape[1]), jnp.float32), jnp.asarray(op_emb, jnp.float32))["params"]


@functools.partial(jax.jit, static_argnums=0)
def _jit_init(net, rng, query_emb, op_emb):
  return net.init(rng, query_emb, op_emb)


# --- host-side sampling ----------------------------------------------------------------------------


def sample_operators(probs: np.ndarray, rng: np.random.Generator, threshold: float = THRESHOLD) -> list[int]:
  """`models/utils.sample_operators`: draw without replacement until the drawn mass reaches `threshold`."""
  probs = np.asarray(probs, np.float64)
  selected: list[int] = []
  cumulative = 0.0
  remaining = list(range(probs.shape[0]))
  while cumulative < threshold and remaining:
    weights = probs[remaining]
    j = int(rng.choice(len(remaining), p=weights / weights.sum()))
    idx = remaining.pop(j)
    selected.append(idx)
    cumulative += float(probs[idx])
  if not selected:  # only with no operators at all (the reference's argmax fallback)
    selected = [int(np.argmax(probs))]
  return selected


class Architecture(NamedTuple):
  """One sampled subnetwork: the operators of each executed layer, in execution order.

  Attributes:
    layers: operator indices per layer (layer 0 first); the architecture ends after the last.
    early_stop_at_0: layer 0 drew EarlyStop (replaced by Generate; the -1.5 penalty applies).
  """

  layers: tuple[tuple[int, ...], ...]
  early_stop_at_0: bool

  def names(self, operators: Sequence[str]) -> list[list[str]]:
    return [[operators[i] for i in layer] for layer in self.layers]


def sample_architecture(first: np.ndarray, later: np.ndarray, operators: Sequence[str], rng: np.random.Generator,
                        threshold: float = THRESHOLD) -> Architecture:
  """`MultiLayerController.forward` for one query: `first` [K] and `later` [L-1, K, K] are probabilities."""
  generate = operators.index(GENERATE) if GENERATE in operators else 0
  layers: list[tuple[int, ...]] = []
  prev = None
  for l in range(1 + later.shape[0]):
    probs = first if l == 0 else later[l - 1, prev]
    sel = sample_operators(probs, rng, threshold)
    names = [operators[i] for i in sel]
    penalty = False
    if l == 0:
      if any(n.lower() == EARLY_STOP.lower() for n in names):
        penalty, sel = True, [generate]
      elif not any("generate" in n.lower() for n in names):
        sel = [generate]
      elif "generate" not in names[0].lower():
        at = next(i for i, n in enumerate(names) if "generate" in n.lower())
        sel = [sel[at]] + sel[:at] + sel[at + 1:]
    layers.append(tuple(sel))
    prev = sel[0]
    if penalty:
      return Architecture(tuple(layers), True)
    if any(operators[i].lower() == EARLY_STOP.lower() for i in sel):
      break
  return Architecture(tuple(layers), False)


def encode(archs: Sequence[Architecture], num_layers: int, k: int, pad_to: int) -> dict[str, np.ndarray]:
  """Fixed-shape arrays of a batch's draws, padded to `pad_to` rows of weight 0.

  prev [B, L] int (the previous layer's first operator; row 0 unused), mask [B, L, K] (drawn operators of
  executed layers), penalty [B] (-1.5 where layer 0 drew EarlyStop), weight [B] (1 real, 0 padding).
  """
  prev = np.zeros((pad_to, num_layers), np.int32)
  mask = np.zeros((pad_to, num_layers, k), np.float32)
  penalty = np.zeros((pad_to,), np.float32)
  weight = np.zeros((pad_to,), np.float32)
  for b, arch in enumerate(archs):
    weight[b] = 1.0
    penalty[b] = EARLY_STOP_PENALTY if arch.early_stop_at_0 else 0.0
    for l, layer in enumerate(arch.layers):
      mask[b, l, list(layer)] = 1.0
      if l > 0:
        prev[b, l] = arch.layers[l - 1][0]
  return {"prev": prev, "mask": mask, "penalty": penalty, "weight": weight}


def architecture_log_prob(first: jax.Array, later: jax.Array, prev: jax.Array, mask: jax.Array,
                          penalty: jax.Array) -> jax.Array:
  """[B] log P of each query's draws: sum over executed layers of the drawn operators' log p, + penalty."""
  rows = jnp.take_along_axis(later, prev[:, 1:, None, None], axis=2)[:, :, 0, :]  # [B, L-1, K]
  table = jnp.concatenate([first[:, None, :], rows], axis=1)                        # [B, L, K]
  return jnp.sum(table * mask, axis=(1, 2)) + penalty


def utility(score: jax.Array, cost_usd: jax.Array, cost_weight: float = COST_WEIGHT) -> jax.Array:
  """The reference's utility: score - 3 x cost (USD)."""
  return score - cost_weight * cost_usd


def reinforce_loss(first, later, batch: dict[str, jax.Array], util: jax.Array) -> jax.Array:
  """-mean over the real rows of log P x utility (`loss = -(logprobs * utilities).mean()`)."""
  lp = architecture_log_prob(first, later, batch["prev"], batch["mask"], batch["penalty"])
  w = batch["weight"]
  return -jnp.sum(w * lp * util) / jnp.maximum(jnp.sum(w), 1.0)


def loss_fn(params, query_emb, op_emb, batch, util, *, net: Controller):
  first, later = net.apply({"params": params}, query_emb, op_emb)
  return reinforce_loss(first, later, batch, util)


def make_optimizer(lr: float = LR) -> optax.GradientTransformation:
  return optax.adam(lr)  # torch.optim.Adam defaults: betas (0.9, 0.999), eps 1e-8


@functools.partial(jax.jit, static_argnames=("net", "lr"))
def train_step(state, query_emb, op_emb, batch, util, *, net: Controller, lr: float = LR):
  """One Adam update of {"params", "opt_state", "step"}; returns (state, loss)."""
  loss, grads = jax.value_and_grad(loss_fn)(state["params"], query_emb, op_emb, batch, util, net=net)
  updates, opt_state = make_optimizer(lr).update(grads, state["opt_state"], state["params"])
  return {"params": optax.apply_updates(state["params"], updates), "opt_state": opt_state,
          "step": state["step"] + 1}, loss
