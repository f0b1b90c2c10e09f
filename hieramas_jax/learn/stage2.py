"""Stage 2: train the GCN graph classifier from contrastive labels (paper Sec. 3.4, Alg. 1).

Data: for each training query, G candidate graphs (reference: 5, density 0.3-1.0) were run with the
FROZEN stage-1 policy and each got a system reward (rewards.system_reward).

Labels (`contrastive_labels`): within a query, a graph is positive if its reward is > 0 and it ranks
in the top k (reference: k = 2 of 5), where graphs tied with the k-th best are positive too. The
reference breaks ties by order; with the saturating reward shape ties are common (every solved query
above ~0.2 cents scores exactly 0.5), and an arbitrary tie-break would call equally good graphs
negative. A query where nothing has reward > 0 gives only negatives. A query whose graphs all tie
(`informative_queries`) carries no contrast and is left out of the loss (the reference keeps it).

Loss: weighted BCE with pos_weight = #negatives / #positives over the training set (reference),
mean over real (query, graph) pairs. AdamW + global-norm clip, dropout in the scorer (0.5), early
stopping on validation loss with patience; the best-by-validation parameters are returned.
"""

from __future__ import annotations

import dataclasses
import functools
from typing import Any, NamedTuple

import flax.struct
import jax
import jax.numpy as jnp
import numpy as np
import optax
from flax.training import train_state

from hieramas_jax.errors import UserError
from hieramas_jax.learn import gcn as gcn_lib


class Stage2Error(UserError, ValueError):
  """Bad stage-2 data (shapes, no positives...)."""


@dataclasses.dataclass(frozen=True)
class Stage2Config:
  """What one classifier fit is told; its caller gives every mapped field.

  Like `stage1.Stage1Config`, no defaults for what HieraMAS configures: the values (reference and
  per-benchmark) have one home, `HieraMASConfig`'s `stage2_*` fields, mapped by
  `methods/hieramas/training.stage2_config`. Only `clip_norm`, which HieraMASConfig does not expose,
  keeps its one default here. The fit is given its labels (`Stage2Batch.labels`, made by the caller
  with `contrastive_labels(top_k=...)`), so positives per query (stage2_top_k) are no field here.

  Attributes:
    learning_rate, weight_decay: AdamW (stage2_lr, stage2_weight_decay).
    epochs: most epochs (stage2_epochs).
    batch_size: queries per update (stage2_batch).
    patience: epochs without a better validation loss before stopping (stage2_patience).
    val_fraction: share of queries held out for validation (stage2_val_fraction).
    clip_norm: global gradient-norm clip (fixed at 1.0 in every HieraMAS run).
  """

  learning_rate: float
  weight_decay: float
  epochs: int
  batch_size: int
  patience: int
  val_fraction: float
  clip_norm: float = 1.0


class Stage2Batch(NamedTuple):
  """B queries, each with its own G graphs (padded; label_mask marks real pairs).

  Attributes:
    query_emb: [B, D].
    role_emb: [N, D] (the benchmark's roles; shared).
    adjacency: [B, G, N, N] bool.
    node_mask: [B, G, N] bool.
    labels: [B, G] float 0/1.
    label_mask: [B, G] bool, False on padding (graphs or whole padded queries).
    pos_weight: scalar, negatives / positives of the training set.
  """

  query_emb: jax.Array
  role_emb: jax.Array
  adjacency: jax.Array
  node_mask: jax.Array
  labels: jax.Array
  label_mask: jax.Array
  pos_weight: jax.Array


class Stage2State(train_state.TrainState):
  net: gcn_lib.GCNScorer = flax.struct.field(pytree_node=False)


def contrastive_labels(rewards, *, top_k: int = 2, valid=None) -> np.ndarray:
  """[Q, G] system rewards -> [Q, G] 0/1 labels (top-k with ties, and reward > 0).

  Args:
    rewards: [Q, G] rewards of each query's candidate graphs.
    top_k: positives per query (before ties).
    valid: optional [Q, G] bool; invalid entries are never positive and do not rank.
  """
  rewards = np.asarray(rewards, np.float64)
  if rewards.ndim != 2:
    raise Stage2Error(f"rewards must be [Q, G], got shape {rewards.shape}")
  if top_k < 1:
    raise Stage2Error(f"top_k must be >= 1, got {top_k}")
  valid = np.ones(rewards.shape, bool) if valid is None else np.asarray(valid, bool)
  ranked = np.where(valid, rewards, -np.inf)
  kth = -np.sort(-ranked, axis=1)[:, min(top_k, rewards.shape[1]) - 1]
  return (valid & (ranked > 0) & (ranked >= kth[:, None])).astype(np.float32)


def informative_queries(rewards, valid=None) -> np.ndarray:
  """[Q] bool: queries whose candidate graphs did not all earn the same reward.

  A query whose graphs all tie teaches the classifier nothing about topology (every graph is equally
  good for it), yet top-k labels would call all of them positive and push every score up. This
  happens often once stage 1 switches most roles off: with one or two active roles most random DAGs
  reduce to the same graph. Such queries are masked out of the loss.
  """
  rewards = np.asarray(rewards, np.float64)
  valid = np.ones(rewards.shape, bool) if valid is None else np.asarray(valid, bool)
  hi = np.where(valid, rewards, -np.inf).max(axis=1)
  lo = np.where(valid, rewards, np.inf).min(axis=1)
  return valid.any(axis=1) & (hi > lo)


def positive_weight(labels, label_mask) -> float:
  """#negatives / #positives over real pairs (raises if there is no positive to learn from)."""
  labels = np.asarray(labels)[np.asarray(label_mask, bool)]
  pos = float(labels.sum())
  if pos == 0:
    raise Stage2Error("no positive (query, graph) pair: every run had reward <= 0; nothing to learn")
  return (labels.size - pos) / pos


def split_by_query(num_queries: int, val_fraction: float, seed: int) -> tuple[np.ndarray, np.ndarray]:
  """Train / validation query indices (reference: 80/20 by query, so no query is in both)."""
  if not 0.0 < val_fraction < 1.0:
    raise Stage2Error(f"val_fraction must be in (0, 1), got {val_fraction}")
  order = np.random.default_rng(seed).permutation(num_queries)
  n_val = max(1, int(round(val_fraction * num_queries)))
  if n_val >= num_queries:
    raise Stage2Error(f"{num_queries} queries are too few to split off {n_val} for validation")
  return np.sort(order[n_val:]), np.sort(order[:n_val])


def _pair_scores(params, batch: Stage2Batch, net, deterministic, dropout_rng):
  """[B, G] logits: each query against its own G graphs (the scorer's paired mode, no vmap)."""
  pool = gcn_lib.prepare_pool(batch.adjacency, batch.node_mask)  # [B, G, ...]
  rngs = None
  if not deterministic:
    # Dropout bits from XLA's RngBitGenerator ("rbg"), seeded from the threefry key: threefry-drawn
    # masks made this step take ~3x longer to compile. Same seed -> same masks on one backend.
    seed = jax.random.bits(dropout_rng, (), jnp.uint32)
    rngs = {"dropout": jax.random.key(seed, impl="rbg")}
  return net.apply({"params": params}, batch.query_emb, batch.role_emb, pool, deterministic=deterministic,
                   rngs=rngs)


def weighted_bce(logits, labels, mask, pos_weight):
  """Mean over masked pairs of pos_weight * y * -log s(x) + (1 - y) * -log(1 - s(x))."""
  logits = jnp.where(mask, logits, 0.0)  # padding graphs are -inf logits
  per_pair = optax.sigmoid_binary_cross_entropy(logits, labels)
  weight = jnp.where(labels > 0, pos_weight, 1.0) * mask
  return jnp.sum(weight * per_pair) / jnp.maximum(mask.sum(), 1)


def make_optimizer(config: Stage2Config) -> optax.GradientTransformation:
  return optax.chain(optax.clip_by_global_norm(config.clip_norm),
                     optax.adamw(config.learning_rate, weight_decay=config.weight_decay))


def create_state(rng, batch: Stage2Batch, config: Stage2Config,
                 net: gcn_lib.GCNScorer = gcn_lib.DEFAULT_SCORER) -> Stage2State:
  """A fresh state, built under jit (eager init compiles op by op), with an int32 `step` array."""
  return _create_fn(config, net)(rng, jnp.asarray(batch.query_emb[:1]), jnp.asarray(batch.role_emb),
                                 jnp.asarray(batch.adjacency[0]), jnp.asarray(batch.node_mask[0]))


@functools.lru_cache(maxsize=None)
def _create_fn(config: Stage2Config, net: gcn_lib.GCNScorer):
  def create(rng, query_emb, role_emb, adjacency, node_mask):
    params = net.init(rng, query_emb, role_emb, gcn_lib.prepare_pool(adjacency, node_mask))["params"]
    state = Stage2State.create(apply_fn=net.apply, params=params, tx=make_optimizer(config), net=net)
    return state.replace(step=jnp.zeros((), jnp.int32))
  return jax.jit(create)


@jax.jit
def train_step(state: Stage2State, batch: Stage2Batch, rng: jax.Array) -> tuple[Stage2State, dict[str, Any]]:
  """One weighted-BCE step; the dropout key is fold_in(rng, step) so a resumed run is identical."""
  def loss_fn(params):
    logits = _pair_scores(params, batch, state.net, False, jax.random.fold_in(rng, state.step))
    return weighted_bce(logits, batch.labels, batch.label_mask, batch.pos_weight)
  loss, grads = jax.value_and_grad(loss_fn)(state.params)
  return state.apply_gradients(grads=grads), {"loss": loss, "grad_norm": optax.tree.norm(grads),
                                              "nonfinite": ~jnp.isfinite(loss)}


@functools.partial(jax.jit, static_argnames=("net",))
def eval_metrics(params, batch: Stage2Batch, *, net: gcn_lib.GCNScorer = gcn_lib.DEFAULT_SCORER):
  """Validation loss, pair accuracy (logit > 0 vs label) and top-1 hit (argmax graph is a positive)."""
  logits = _pair_scores(params, batch, net, True, jax.random.key(0))
  mask = batch.label_mask
  loss = weighted_bce(logits, batch.labels, mask, batch.pos_weight)
  correct = ((logits > 0) == (batch.labels > 0)) & mask
  accuracy = correct.sum() / jnp.maximum(mask.sum(), 1)
  best = jnp.argmax(jnp.where(mask, logits, -jnp.inf), axis=-1)
  has_pos = (batch.labels * mask).sum(-1) > 0
  hit = jnp.take_along_axis(batch.labels, best[:, None], axis=-1)[:, 0] > 0
  top1 = jnp.sum(hit & has_pos) / jnp.maximum(has_pos.sum(), 1)
  return {"loss": loss, "accuracy": accuracy, "top1_hit": top1}


def _take(batch: Stage2Batch, idx: np.ndarray) -> Stage2Batch:
  return batch._replace(query_emb=batch.query_emb[idx], adjacency=batch.adjacency[idx],
                        node_mask=batch.node_mask[idx], labels=batch.labels[idx], label_mask=batch.label_mask[idx])


def _pad_to(batch: Stage2Batch, size: int) -> Stage2Batch:
  """Pads the query axis to `size` with masked-out queries (fixed shapes: one compile per run)."""
  extra = size - batch.query_emb.shape[0]
  if extra == 0:
    return batch
  def pad(x):
    x = np.asarray(x)
    return np.concatenate([x, np.zeros((extra,) + x.shape[1:], x.dtype)])
  return batch._replace(query_emb=pad(batch.query_emb), adjacency=pad(batch.adjacency),
                        node_mask=pad(batch.node_mask), labels=pad(batch.labels), label_mask=pad(batch.label_mask))


def split_data(data: Stage2Batch, val_fraction: float, split_seed: int) -> tuple[Stage2Batch, Stage2Batch]:
  """(train, validation) parts of `data` as `fit` splits them (numpy), with the training part's pos_weight.

  Queries with no real pair (all masked out) are dropped before the split, so both parts hold queries
  that can teach something. The learning evidence (`training.classifier_evidence`) reads the same
  validation part.
  """
  data = Stage2Batch(*(np.asarray(x) for x in data))
  data = _take(data, np.flatnonzero(data.label_mask.any(axis=1)))
  train_idx, val_idx = split_by_query(data.query_emb.shape[0], val_fraction, split_seed)
  train, val = _take(data, train_idx), _take(data, val_idx)
  pos_weight = np.float32(positive_weight(train.labels, train.label_mask))
  return train._replace(pos_weight=pos_weight), val._replace(pos_weight=pos_weight)


@functools.partial(jax.jit, static_argnames=("net",))
def pair_scores(params, batch: Stage2Batch, *, net: gcn_lib.GCNScorer = gcn_lib.DEFAULT_SCORER) -> jax.Array:
  """[B, G] deterministic logits of each query's own graphs (padding graphs -inf)."""
  return _pair_scores(params, batch, net, True, jax.random.key(0))


def fit(data: Stage2Batch, rng: jax.Array, config: Stage2Config, *,
        net: gcn_lib.GCNScorer = gcn_lib.DEFAULT_SCORER, split_seed: int = 0, on_epoch=None):
  """Trains the scorer on the queries of `data` with an 80/20 split by query and early stopping.

  Args:
    data: every labelled query ([Q, G, ...] arrays, numpy); queries whose label_mask is all False
      are dropped; `pos_weight` is recomputed on the training part.
    rng: the stage-2 key (init, shuffling and dropout all derive from it).
    config: hyperparameters.
    net: scorer module.
    split_seed: seed of the train/validation split.
    on_epoch: optional callback(epoch, train_loss, val_metrics) (metric writers).

  Returns:
    (best_params, history): parameters of the epoch with the lowest validation loss, and a list of
    per-epoch dicts.
  """
  train, val = split_data(data, config.val_fraction, split_seed)
  train_idx = np.arange(train.query_emb.shape[0])
  k_init, k_shuffle, k_dropout = jax.random.split(rng, 3)
  bs = min(config.batch_size, len(train_idx))
  state = create_state(k_init, _pad_to(_take(train, np.arange(bs)), bs), config, net)
  best_params, best_loss, since_best, history = state.params, np.inf, 0, []
  for epoch in range(config.epochs):
    order = np.asarray(jax.random.permutation(jax.random.fold_in(k_shuffle, epoch), len(train_idx)))
    losses = []
    for start in range(0, len(order), bs):
      batch = _pad_to(_take(train, order[start:start + bs]), bs)
      state, m = train_step(state, batch, k_dropout)
      if bool(m["nonfinite"]):
        raise FloatingPointError(f"stage 2: non-finite loss at epoch {epoch}, step {int(state.step)}")
      losses.append(float(m["loss"]))
    val_m = {k: float(v) for k, v in eval_metrics(state.params, val, net=net).items()}
    history.append({"epoch": epoch, "train_loss": float(np.mean(losses)), **{f"val_{k}": v for k, v in val_m.items()}})
    if on_epoch is not None:
      on_epoch(epoch, float(np.mean(losses)), val_m)
    if val_m["loss"] < best_loss:
      best_params, best_loss, since_best = state.params, val_m["loss"], 0
    else:
      since_best += 1
      if since_best >= config.patience:
        break
  return best_params, history
