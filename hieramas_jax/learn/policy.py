"""The LLM-selection policy pi_m (paper Sec. 3.2) as a Flax module, and its pure helpers.

For every supernode (one per role of the benchmark) and every position in it (W proposers, then the
synthesizer) the policy gives a distribution over the pool's M LLMs plus a skip token:

  slot_{Q,r,p} = MLP(h_{Q,r}) + e_p              h_{Q,r} = f(Q, r, desc(r))   (sentence embedding)
  key_m        = Dense(h_m)  for m in the pool,  key_skip = learned vector
  logits       = clip(<slot, key> / sqrt(H) + b * [skip], -10, 10)           (reference: clip +-10, b = 0)
  pi_m(. | Q, r, p) = softmax(logits / tau)

Choices are integers in [0, M]; M means skip. Role selection per supernode is the synthesizer's
skip: each supernode has the benchmark's fixed role, and skipping its synthesizer switches the role
off (paper: "the entire supernode is deactivated").

Shapes: B queries, R roles (supernodes), P = W + 1 positions (synthesizer last), M pool models,
D sentence-embedding width, H hidden width.
"""

from __future__ import annotations

import functools
import math
from typing import NamedTuple, Sequence

import flax.linen as nn
import jax
import jax.numpy as jnp
import numpy as np

from hieramas_jax.llm.registry import SKIP
from hieramas_jax.mas.config import MASConfig, Supernode


class PolicyError(ValueError):
  """Bad input to the policy helpers (shapes, indices, names)."""


class PolicyInputs(NamedTuple):
  """One batch of policy inputs (a pytree; all arrays).

  Attributes:
    query_role: [B, R, D] embeddings of f(Q, r, desc(r)), one per query and role.
    profiles: [M, D] embeddings of the pool's LLM profiles (paper Table 12), in pool order.
    slot_mask: [R, P] bool; False for positions that do not exist (padding roles or proposers).
      Its shape fixes P = W + 1 at init, so one module serves any W.
    metadata: [B, D] embeddings of each query's LLM-written task metadata (the reference's meta_emb; config
      `task_metadata`), or None: the policy then has no metadata input (and no parameters for one).
    excluded: [M + 1] bool, True for the models the policy must never choose (config `exclude_llms`; skip is
      never excluded), or None: every model may be chosen.
  """

  query_role: jax.Array
  profiles: jax.Array
  slot_mask: jax.Array
  metadata: jax.Array | None = None
  excluded: jax.Array | None = None


# The logit of an excluded model (the reference's `compute_logits` writes -1e8 after the clip): finite, so that
# probability x log-probability stays 0 rather than NaN, and far enough below -clip that exp() is exactly 0.
EXCLUDED_LOGIT = -1e8


def _exclude(logits: jax.Array, inputs: PolicyInputs) -> jax.Array:
  """`logits` with every excluded model's entry at `EXCLUDED_LOGIT` (unchanged without `inputs.excluded`).

  Applied inside the heads, after the clip, so every consumer of the logits (sampling, greedy, the rotation,
  the probabilities the evidence and traces record) sees the same mask."""
  if inputs.excluded is None:
    return logits
  return jnp.where(inputs.excluded, EXCLUDED_LOGIT, logits)


def _metadata_term(inputs: PolicyInputs, hidden: int) -> jax.Array | float:
  """[B, 1, H] the metadata's share of the slot projection, 0 without metadata.

  The reference projects the concatenation [position; task+role; metadata] with one linear map
  (`row_proj`), which is the sum of one map per part: this is the metadata's, without a second bias."""
  if inputs.metadata is None:
    return 0.0
  return nn.Dense(hidden, use_bias=False, name="slot_metadata")(inputs.metadata)[:, None, :]


def query_role_text(query: str, role: str, description: str) -> str:
  """The text whose embedding is h_{Q,r} = f(Q, r, desc(r))."""
  return f"Role: {role}. {description}\nQuery: {query}"


def make_inputs(encoder, queries: Sequence[str], roles: Sequence[str], descriptions: Sequence[str],
                models: Sequence[str], profiles: Sequence[str], num_proposers: int) -> PolicyInputs:
  """Embeds queries x roles and the pool's profiles (host side; the encoder caches each text).

  Args:
    encoder: anything with `encode(texts) -> np.ndarray[n, D]` (learn.encoder.SentenceEncoder).
    queries: B query texts.
    roles, descriptions: the benchmark's R roles and their descriptions.
    models, profiles: the pool's M models and their profile texts (same order).
    num_proposers: W.
  """
  if len(roles) != len(descriptions):
    raise PolicyError(f"{len(roles)} roles but {len(descriptions)} descriptions")
  if len(models) != len(profiles):
    raise PolicyError(f"{len(models)} models but {len(profiles)} profiles")
  if num_proposers < 0:
    raise PolicyError(f"num_proposers must be >= 0, got {num_proposers}")
  texts = [query_role_text(q, r, d) for q in queries for r, d in zip(roles, descriptions)]
  qr = encoder.encode(texts).reshape(len(queries), len(roles), -1)
  prof = encoder.encode(list(profiles))
  return PolicyInputs(jnp.asarray(qr), jnp.asarray(prof), jnp.ones((len(roles), num_proposers + 1), bool))


class LLMSelectionPolicy(nn.Module):
  """pi_m: logits [B, R, P, M + 1] over the pool and skip (last index) for every position.

  Attributes:
    hidden: width H of the slot and key spaces.
    logit_clip: |logit| bound before the temperature (reference: 10).
    dropout_rate: dropout on the slot features during training.
    skip_logit_init: initial value of a learned bias on the skip logit (0: the reference policy,
      where skip starts as likely as any one model). With a pool of M models an unbiased policy
      starts with ~M/(M+1) of all positions on, i.e. dense, expensive configurations; under the
      reference reward every solved query above ~0.23 cents scores the same 0.5, so those samples
      carry no cost signal at all. A positive bias starts exploration among sparse, cheap
      configurations, where cost still moves the reward; it is a learned parameter like any other.
  """

  hidden: int = 128
  logit_clip: float = 10.0
  dropout_rate: float = 0.0
  skip_logit_init: float = 0.0

  @nn.compact
  def __call__(self, inputs: PolicyInputs, *, deterministic: bool = True) -> jax.Array:
    num_positions = inputs.slot_mask.shape[1]
    slot = nn.Dense(self.hidden, name="query_role_in")(inputs.query_role) + _metadata_term(inputs, self.hidden)
    slot = nn.Dense(self.hidden, name="query_role_out")(nn.gelu(slot))  # [B, R, H]
    position = self.param("position_embedding", nn.initializers.normal(0.1), (num_positions, self.hidden))
    slot = slot[:, :, None, :] + position  # [B, R, P, H]
    slot = nn.Dropout(self.dropout_rate)(slot, deterministic=deterministic)
    keys = nn.Dense(self.hidden, name="profile_key")(inputs.profiles)  # [M, H]
    skip = self.param("skip_embedding", nn.initializers.normal(0.1), (1, self.hidden))
    keys = jnp.concatenate([keys, skip], axis=0)  # [M + 1, H]
    logits = jnp.einsum("brph,mh->brpm", slot, keys) / math.sqrt(self.hidden)
    skip_bias = self.param("skip_logit_bias", nn.initializers.constant(self.skip_logit_init), ())
    logits = logits.at[..., -1].add(skip_bias)
    return _exclude(jnp.clip(logits, -self.logit_clip, self.logit_clip), inputs)


class PairMLPPolicy(nn.Module):
  """pi_m with the reference selector's head (`model/llm_selector.py`, `compute_logits`): logits [B, R, P, M + 1].

  Every (position, LLM) pair is scored by an MLP over the pair's features, not by a dot product:

    slot_{Q,r,p} = W_s h_{Q,r} + e_p                    (linear map of [position; task/role] to H)
    key_m        = W_k h_m,   key_skip = learned vector  (linear map of the LLM profile to H)
    logit        = w_2 . relu(W_1 [slot; key] + b_1) + b_2      (hidden H = 256 in the reference)
    logits       = clip(logit + b * [skip], -10, 10)

  Why it matters: a dot product of two random projections starts with logits of sd ~0.005 and moves them by
  a few hundredths in the published 12 steps; the MLP's output layer is shared by every pair, so a reward
  for one model moves its logit for every query at once (measured on a synthetic pool: docs/learn.md).
  The first layer over the concatenation is computed as W_1a slot + W_1b key (the same map, without
  materialising [B, R, P, M + 1, 2H] features). With `inputs.metadata` (config `task_metadata`) the slot also
  takes the reference's embedding of LLM-written task metadata.

  Attributes:
    hidden: H (reference 256).
    logit_clip: |logit| bound before the temperature (reference 10).
    skip_logit_init: initial learned bias on the skip logit (reference 0; see `LLMSelectionPolicy`).
  """

  hidden: int = 256
  logit_clip: float = 10.0
  skip_logit_init: float = 0.0

  @nn.compact
  def __call__(self, inputs: PolicyInputs, *, deterministic: bool = True) -> jax.Array:
    del deterministic  # no dropout in the reference head
    num_positions = inputs.slot_mask.shape[1]
    slot = nn.Dense(self.hidden, name="slot")(inputs.query_role) + _metadata_term(inputs, self.hidden)  # [B, R, H]
    position = self.param("position_embedding", nn.initializers.normal(0.1), (num_positions, self.hidden))
    slot = slot[:, :, None, :] + position  # [B, R, P, H]
    keys = nn.Dense(self.hidden, name="profile_key")(inputs.profiles)  # [M, H]
    skip = self.param("skip_embedding", nn.initializers.normal(0.1), (1, self.hidden))
    keys = jnp.concatenate([keys, skip], axis=0)  # [M + 1, H]
    hidden = (nn.Dense(self.hidden, name="pair_slot")(slot)[:, :, :, None, :]
              + nn.Dense(self.hidden, use_bias=False, name="pair_key")(keys))  # [B, R, P, M + 1, H]
    logits = nn.Dense(1, name="pair_out")(nn.relu(hidden))[..., 0]
    skip_bias = self.param("skip_logit_bias", nn.initializers.constant(self.skip_logit_init), ())
    logits = logits.at[..., -1].add(skip_bias)
    return _exclude(jnp.clip(logits, -self.logit_clip, self.logit_clip), inputs)


# The heads a HieraMAS config may name (`policy_head`): the reference's pair MLP, and the suite's earlier
# dot product of projections (kept for the total-cost variant, which was tuned with it).
HEADS = {"pair_mlp": PairMLPPolicy, "dot": LLMSelectionPolicy}
DEFAULT_POLICY = LLMSelectionPolicy()


def init_params(rng: jax.Array, inputs: PolicyInputs, net: LLMSelectionPolicy = DEFAULT_POLICY):
  """Fresh parameters for `net` (shapes taken from `inputs`)."""
  return _jit_init(net, rng, inputs)["params"]


@functools.partial(jax.jit, static_argnums=0)
def _jit_init(net, rng, inputs):
  # Jitted: eager Flax init compiles op by op (seconds on a busy CPU).
  return net.init(rng, inputs)


def _masked_log_softmax(params, inputs, tau, net, rng=None):
  deterministic = rng is None
  rngs = None if deterministic else {"dropout": rng}
  logits = net.apply({"params": params}, inputs, deterministic=deterministic, rngs=rngs)
  return jax.nn.log_softmax(logits / tau, axis=-1)


@functools.partial(jax.jit, static_argnames=("net",))
def probabilities(params, inputs: PolicyInputs, tau, *, net: LLMSelectionPolicy = DEFAULT_POLICY):
  """pi_m for every position: [B, R, P, M + 1]."""
  return jnp.exp(_masked_log_softmax(params, inputs, tau, net))


def _synth_on_off(logp, slot_mask):
  """log pi(on), log pi(skip) of every role's synthesizer, [B, R]; a padding role is always off."""
  synth = logp[:, :, -1, :]
  exists = slot_mask[None, :, -1]
  log_on = jnp.where(exists, jax.nn.logsumexp(synth[..., :-1], axis=-1), -jnp.inf)
  log_skip = jnp.where(exists, synth[..., -1], 0.0)
  return log_on, log_skip


def log_valid(logp, slot_mask):
  """[B] log P(at least one synthesizer on) = log(1 - prod_r pi_r(skip)) under the unconditioned policy."""
  _, log_skip = _synth_on_off(logp, slot_mask)
  return jnp.log(-jnp.expm1(jnp.minimum(jnp.sum(log_skip, axis=1), -1e-30)))


@functools.partial(jax.jit, static_argnames=("net",))
def sample_choices(params, inputs: PolicyInputs, rng: jax.Array, tau, *,
                   net: LLMSelectionPolicy = DEFAULT_POLICY) -> jax.Array:
  """Training-time choices [B, R, P] int32 from softmax(logits / tau), conditioned on a non-empty MAS.

  Every position is an independent categorical, except that a draw with every synthesizer skipped
  describes no MAS (nothing would answer), so the policy's distribution is the independent one
  conditioned on "at least one role on", sampled exactly: the first active role j is drawn with
  P(j) = q_j prod_{i<j} (1 - q_i) / (1 - prod_i (1 - q_i)) (q = pi(on)), roles before j are off,
  role j is on, roles after j are independent; an on synthesizer's model is drawn from pi(m | on).
  Its log-probability is the independent one minus `log_valid` (see `log_prob_parts`).
  """
  logp = _masked_log_softmax(params, inputs, tau, net)
  k_all, k_first, k_after, k_model = jax.random.split(rng, 4)
  choices = jax.random.categorical(k_all, logp, axis=-1).astype(jnp.int32)  # proposers (and a draft)
  log_on, log_skip = _synth_on_off(logp, inputs.slot_mask)
  log_off_before = jnp.cumsum(log_skip, axis=1) - log_skip  # log prod_{i<j} (1 - q_i)
  first = jax.random.categorical(k_first, log_on + log_off_before, axis=1)  # [B]
  roles = jnp.arange(logp.shape[1])[None, :]
  after_on = jnp.log(jax.random.uniform(k_after, log_on.shape)) < log_on
  on = (roles == first[:, None]) | ((roles > first[:, None]) & after_on)
  model = jax.random.categorical(k_model, logp[:, :, -1, :-1], axis=-1).astype(jnp.int32)
  skip_index = logp.shape[-1] - 1
  return choices.at[:, :, -1].set(jnp.where(on, model, skip_index))


@functools.partial(jax.jit, static_argnames=("net",))
def greedy_choices(params, inputs: PolicyInputs, *, net: LLMSelectionPolicy = DEFAULT_POLICY) -> jax.Array:
  """Evaluation-time choices [B, R, P]: the most probable configuration with at least one role on.

  The per-position argmax, except when it skips every synthesizer: then the role whose best model
  loses least against its skip (largest logit gap) is switched on with that model, which is the
  mode of the conditioned distribution. Temperature does not change the result.
  """
  logits = net.apply({"params": params}, inputs)
  choices = jnp.argmax(logits, axis=-1).astype(jnp.int32)
  skip_index = logits.shape[-1] - 1
  synth = logits[:, :, -1, :]
  exists = inputs.slot_mask[None, :, -1]
  gap = jnp.where(exists, jnp.max(synth[..., :-1], axis=-1) - synth[..., -1], -jnp.inf)  # [B, R]
  all_off = ~jnp.any((choices[:, :, -1] != skip_index) & exists, axis=1)  # [B]
  rescue = jnp.argmax(gap, axis=1)  # [B]
  best_model = jnp.argmax(synth[..., :-1], axis=-1).astype(jnp.int32)  # [B, R]
  switch_on = all_off[:, None] & (jnp.arange(logits.shape[1])[None, :] == rescue[:, None])
  return choices.at[:, :, -1].set(jnp.where(switch_on, best_model, choices[:, :, -1]))


@functools.partial(jax.jit, static_argnames=("net",))
def logits(params, inputs: PolicyInputs, *, net: LLMSelectionPolicy = DEFAULT_POLICY) -> jax.Array:
  """The policy's clipped logits [B, R, P, M + 1] (skip last), for the inference rules."""
  return net.apply({"params": params}, inputs)


def dropped_roles(synth_logits, droppable, max_dropped: int) -> np.ndarray:
  """[R] bool: the roles the reference's inference rule switches off (`determine_roles_to_skip`).

  Only roles where skip is the synthesizer's argmax may go, only `droppable` ones (roles with a
  checkable answer), at most `max_dropped` and never all droppable roles (one always stays): if more
  qualify, those with the highest skip probability go (ties: lower role index first).

  Args:
    synth_logits: [R, M + 1] the synthesizer position's logits (skip last).
    droppable: [R] bool.
    max_dropped: the benchmark's cap (reference: 2 on MMLU-Redux, 0 on MATH and HumanEval+).
  """
  synth_logits = np.asarray(synth_logits, np.float64)
  droppable = np.asarray(droppable, bool)
  cap = min(max_dropped, max(int(droppable.sum()) - 1, 0))
  out = np.zeros(len(droppable), bool)
  if cap <= 0:
    return out
  z = synth_logits - synth_logits.max(axis=-1, keepdims=True)
  skip_prob = np.exp(z[:, -1]) / np.exp(z).sum(axis=-1)
  candidates = [r for r in range(len(droppable)) if droppable[r] and np.argmax(synth_logits[r]) == z.shape[1] - 1]
  candidates.sort(key=lambda r: (-skip_prob[r], r))
  out[candidates[:cap]] = True
  return out


def rotation_choices(query_logits, rng: np.random.Generator, num_proposers: int, *, top_n: int = 2,
                     max_dropped: int = 0, droppable=None, aggregator_slot: str = "reference",
                     drop_logits=None) -> np.ndarray:
  """One query's inference choices [R, num_proposers + 1] by the reference's top-N rotation.

  Per role (`select_llms_topN_rotation` of graph/learnable_multi_node.py): one proposer position of the
  policy is drawn at random (from `rng`, seeded per query by the caller), its top-N LLMs with skip
  excluded fill the W proposer slots in rotation [A, B, A, B, ...]; the synthesizer is the argmax with
  skip masked; then `dropped_roles` switches roles off. So no proposer or synthesizer is ever skip
  except a dropped role's synthesizer. The policy may have any number of proposer positions (stage 1
  may train with another W than inference uses).

  Which positions (`aggregator_slot`): "reference" indexes the policy as the reference's inference does,
  by the inference W: with k = min(W, policy proposers), the proposer position is drawn among the first
  k and the synthesizer (and the drop rule) read position k. When the policy was trained with W = k
  (MATH, HumanEval+) position k is its synthesizer; on MMLU-Redux (trained with W = 6, inference W = 2) it
  is the third worker position. "last" draws among all proposer positions and reads the trained
  synthesizer position (the suite's earlier rule).

  Args:
    query_logits: [R, P, M + 1] logits (synthesizer last, skip last).
    rng: the query's generator (one draw per role).
    num_proposers: W at inference.
    top_n: N (reference 2).
    max_dropped: the drop cap.
    droppable: [R] bool (default: every role).
    aggregator_slot: "reference" or "last" (above).
    drop_logits: [R, P, M + 1] the logits the drop rule reads, when they are not `query_logits` (with task
      metadata the reference's drop rule reads the policy without it); the same positions are read.
  """
  query_logits = np.asarray(query_logits, np.float64)
  drop_logits = query_logits if drop_logits is None else np.asarray(drop_logits, np.float64)
  if drop_logits.shape != query_logits.shape:
    raise PolicyError(f"drop_logits {drop_logits.shape} and query_logits {query_logits.shape} differ in shape")
  if aggregator_slot == "reference":  # positions 0..k-1 and k of the policy (k = the inference W, capped)
    query_logits = query_logits[:, :min(num_proposers, query_logits.shape[1] - 1) + 1]
    drop_logits = drop_logits[:, :query_logits.shape[1]]
  elif aggregator_slot != "last":
    raise PolicyError(f"aggregator_slot must be 'reference' or 'last', got {aggregator_slot!r}")
  num_roles, num_positions, width = query_logits.shape
  num_models = width - 1
  if num_positions < 2:
    raise PolicyError("the rotation needs at least one proposer position in the policy")
  if not 1 <= top_n <= num_models:
    raise PolicyError(f"top_n must be in [1, {num_models}], got {top_n}")
  droppable = np.ones(num_roles, bool) if droppable is None else np.asarray(droppable, bool)
  out = np.empty((num_roles, num_proposers + 1), np.int32)
  for r in range(num_roles):
    position = int(rng.integers(num_positions - 1))
    models = query_logits[r, position, :num_models]
    top = np.argsort(-models, kind="stable")[:top_n]
    out[r, :-1] = [top[i % top_n] for i in range(num_proposers)]
    out[r, -1] = int(np.argmax(query_logits[r, -1, :num_models]))
  drop = dropped_roles(drop_logits[:, -1, :], droppable, max_dropped)
  out[drop, -1] = num_models
  return out


class LogProbParts(NamedTuple):
  """Per-position log pi(choice), entropy and log pi(on), all [B, R, P]; log_valid [B]."""

  chosen: jax.Array
  entropy: jax.Array
  log_on: jax.Array
  log_valid: jax.Array


def log_prob_parts(params, inputs: PolicyInputs, choices: jax.Array, tau, *,
                   net: LLMSelectionPolicy = DEFAULT_POLICY, dropout_rng: jax.Array | None = None) -> LogProbParts:
  """Per-position log pi(choice), entropy and log pi(on) = log(1 - pi(skip)), all [B, R, P] and zero
  where slot_mask is False, plus `log_valid` [B]. These are the independent factors; the conditioned
  policy's log-probability of a whole configuration is their sum minus `log_valid`. Not jitted on its
  own: it is traced inside the jitted stage-1 update.

  One categorical over {models, skip} is the same distribution as two nested ones: on/off with
  pi(on) = 1 - pi(skip), then the model given "on" with pi(m) / pi(on). So for a chosen model
  log pi(m) = log pi(on) + log pi(m | on), and the two factors may be credited separately (stage 1
  credits every on/off, a synthesizer's being the role's activation, at the system level).
  """
  logp = _masked_log_softmax(params, inputs, tau, net, dropout_rng)
  chosen = jnp.take_along_axis(logp, choices[..., None].astype(jnp.int32), axis=-1)[..., 0]
  entropy = -jnp.sum(jnp.exp(logp) * logp, axis=-1)
  log_on = jax.nn.logsumexp(logp[..., :-1], axis=-1)
  mask = inputs.slot_mask[None].astype(logp.dtype)
  return LogProbParts(chosen * mask, entropy * mask, log_on * mask, log_valid(logp, inputs.slot_mask))


def temperature(step, total_steps: int, start: float = 10.0, end: float = 0.8):
  """Cosine schedule from `start` (explore) to `end` (exploit), as in the reference code.

  Works on Python numbers and on traced jnp scalars; clamps steps past `total_steps` to `end`.
  """
  if total_steps <= 0:
    raise PolicyError(f"total_steps must be positive, got {total_steps}")
  frac = jnp.clip(jnp.asarray(step, jnp.float32) / total_steps, 0.0, 1.0)
  return end + 0.5 * (start - end) * (1.0 + jnp.cos(jnp.pi * frac))


def choices_to_config(choices, roles: Sequence[str], models: Sequence[str], adjacency,
                      decision_model: str) -> tuple[MASConfig, list[int]]:
  """Turns one query's choices [R, P] and a DAG [R, R] into the `MASConfig` the runtime executes.

  Skip semantics (paper Sec. 3.2): index len(models) is skip. A skipped proposer is left out (it costs
  nothing). A skipped synthesizer deactivates the supernode: the node and all its edges are removed
  (edges are NOT rewired around it, so a path a -> x -> b with x skipped leaves a and b unconnected).

  Fallback when every synthesizer is skipped: the MAS cannot be empty, so role 0 (the benchmark's
  first role) runs with its chosen proposers and `decision_model` as synthesizer. Its index is in
  the returned list as usual, so callers see which role actually ran.

  Returns:
    (config, active_roles): active_roles are the original role indices kept, in order; node i of
    the config is role active_roles[i].
  """
  choices = np.asarray(choices)
  adjacency = np.asarray(adjacency, bool)
  num_roles = len(roles)
  skip_index = len(models)
  if choices.ndim != 2 or choices.shape[0] != num_roles:
    raise PolicyError(f"choices must be [R={num_roles}, P], got shape {choices.shape}")
  if adjacency.shape != (num_roles, num_roles):
    raise PolicyError(f"adjacency must be [{num_roles}, {num_roles}], got {adjacency.shape}")
  if choices.min() < 0 or choices.max() > skip_index:
    raise PolicyError(f"choices must lie in [0, {skip_index}] (skip = {skip_index}), got "
                      f"[{choices.min()}, {choices.max()}]")
  if SKIP in models:
    raise PolicyError("the pool must not list 'skip'; it is the implicit last choice")
  names = list(models) + [SKIP]
  nodes, active = [], []
  for r, role in enumerate(roles):
    proposers = tuple(names[c] for c in choices[r, :-1] if c != skip_index)
    synth = names[choices[r, -1]]
    if synth == SKIP:
      continue
    nodes.append(Supernode(role, proposers, synth))
    active.append(r)
  if not nodes:
    proposers = tuple(names[c] for c in choices[0, :-1] if c != skip_index)
    nodes, active = [Supernode(roles[0], proposers, decision_model)], [0]
  adj = adjacency[np.ix_(active, active)]
  return MASConfig(tuple(nodes), adj, decision_model), active
