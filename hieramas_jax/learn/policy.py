"""The LLM-selection policy pi_m (paper Sec. 3.2) as a Flax module, and its pure helpers.

For every supernode (one per role of the benchmark) and every position in it (W proposers, then the
synthesizer) the policy gives a distribution over the pool's M LLMs plus a skip token:

  slot_{Q,r,p} = MLP(h_{Q,r}) + e_p              h_{Q,r} = f(Q, r, desc(r))   (sentence embedding)
  key_m        = Dense(h_m)  for m in the pool,  key_skip = learned vector
  logits       = clip(<slot, key> / sqrt(H), -10, 10)                         (reference: clip +-10)
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
  """

  query_role: jax.Array
  profiles: jax.Array
  slot_mask: jax.Array


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
  """

  hidden: int = 128
  logit_clip: float = 10.0
  dropout_rate: float = 0.0

  @nn.compact
  def __call__(self, inputs: PolicyInputs, *, deterministic: bool = True) -> jax.Array:
    num_positions = inputs.slot_mask.shape[1]
    slot = nn.Dense(self.hidden, name="query_role_in")(inputs.query_role)
    slot = nn.Dense(self.hidden, name="query_role_out")(nn.gelu(slot))  # [B, R, H]
    position = self.param("position_embedding", nn.initializers.normal(0.1), (num_positions, self.hidden))
    slot = slot[:, :, None, :] + position  # [B, R, P, H]
    slot = nn.Dropout(self.dropout_rate)(slot, deterministic=deterministic)
    keys = nn.Dense(self.hidden, name="profile_key")(inputs.profiles)  # [M, H]
    skip = self.param("skip_embedding", nn.initializers.normal(0.1), (1, self.hidden))
    keys = jnp.concatenate([keys, skip], axis=0)  # [M + 1, H]
    logits = jnp.einsum("brph,mh->brpm", slot, keys) / math.sqrt(self.hidden)
    return jnp.clip(logits, -self.logit_clip, self.logit_clip)


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


@functools.partial(jax.jit, static_argnames=("net",))
def sample_choices(params, inputs: PolicyInputs, rng: jax.Array, tau, *,
                   net: LLMSelectionPolicy = DEFAULT_POLICY) -> jax.Array:
  """Training-time choices [B, R, P] int32 drawn from softmax(logits / tau) (Gumbel-max)."""
  logp = _masked_log_softmax(params, inputs, tau, net)
  return jax.random.categorical(rng, logp, axis=-1).astype(jnp.int32)


@functools.partial(jax.jit, static_argnames=("net",))
def greedy_choices(params, inputs: PolicyInputs, *, net: LLMSelectionPolicy = DEFAULT_POLICY) -> jax.Array:
  """Evaluation-time choices [B, R, P]: argmax (temperature does not change the argmax)."""
  logits = net.apply({"params": params}, inputs)
  return jnp.argmax(logits, axis=-1).astype(jnp.int32)


def log_prob(params, inputs: PolicyInputs, choices: jax.Array, tau, *, net: LLMSelectionPolicy = DEFAULT_POLICY,
             dropout_rng: jax.Array | None = None) -> tuple[jax.Array, jax.Array]:
  """Per-position log pi(choice) and entropy, both [B, R, P]; zero where slot_mask is False.

  Not jitted on its own: it is traced inside the jitted stage-1 update.
  """
  logp = _masked_log_softmax(params, inputs, tau, net, dropout_rng)
  chosen = jnp.take_along_axis(logp, choices[..., None].astype(jnp.int32), axis=-1)[..., 0]
  entropy = -jnp.sum(jnp.exp(logp) * logp, axis=-1)
  mask = inputs.slot_mask[None].astype(logp.dtype)
  return chosen * mask, entropy * mask


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
