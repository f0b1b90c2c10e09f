"""Can a policy head learn at all in the published stage-1 budget? A synthetic pool with a known answer.

The embedded pool's signal is weak and noisy, so "the policy stayed uniform" there cannot tell a head
that cannot learn from a task with nothing to learn. Here the answer is known: for role 0, one model
(`best`) solves a query with probability `p_best`, every other model with `p_other`; the other roles'
models are all alike. Each rollout draws its outcomes from those probabilities (its own seeded
Generator), the role rewards are the suite's (`rewards.role_rewards`, cost 0), and the policy is trained
by the suite's own stage-1 step (`stage1.sample_step` / `update_step`) with whatever config and head the
caller passes (the published recipe: `methods/hieramas/training.stage1_config` and `policy_net`).

Measured: P(best | role 0, synthesizer) over held-out queries at temperature 1, before and after.
Inputs are random unit vectors of the encoder's width (queries differ; nothing in them names the best
model), so only the head's own parameters can carry what was learned.
"""

from __future__ import annotations

import dataclasses

import jax
import jax.numpy as jnp
import numpy as np

from hieramas_jax.learn import policy as policy_lib
from hieramas_jax.learn import rewards as rewards_lib
from hieramas_jax.learn import stage1 as stage1_lib
from hieramas_jax.learn.batching import batch_indices


@dataclasses.dataclass(frozen=True)
class SyntheticPool:
  """The synthetic task: R roles, W proposers, M models, `best` strictly best for role 0."""

  num_roles: int = 3
  num_proposers: int = 2
  num_models: int = 9
  dim: int = 384
  best: int = 3
  p_best: float = 0.9
  p_other: float = 0.4
  p_others_roles: float = 0.6
  train_queries: int = 60
  test_queries: int = 40


def _unit(x: np.ndarray) -> np.ndarray:
  return (x / np.linalg.norm(x, axis=-1, keepdims=True)).astype(np.float32)


def _inputs(pool: SyntheticPool, query_role: np.ndarray, profiles: np.ndarray) -> policy_lib.PolicyInputs:
  mask = np.ones((pool.num_roles, pool.num_proposers + 1), bool)
  return policy_lib.PolicyInputs(jnp.asarray(query_role), jnp.asarray(profiles), jnp.asarray(mask))


def role_rewards(pool: SyntheticPool, choices: np.ndarray, rng: np.random.Generator) -> np.ndarray:
  """[B, R] role rewards of sampled choices [B, R, P]: each active role's synthesizer solves with its
  model's probability; the system answer is role 0's when it ran, else the first active role's."""
  synth = np.asarray(choices)[:, :, -1]
  active = synth < pool.num_models
  prob = np.full(synth.shape, pool.p_others_roles)
  prob[:, 0] = np.where(synth[:, 0] == pool.best, pool.p_best, pool.p_other)
  node_solved = active & (rng.random(synth.shape) < prob)
  first = np.argmax(active, axis=1)  # role 0 if active (an all-skip draw cannot happen: sampling conditions)
  system_solved = node_solved[np.arange(len(synth)), first]
  zeros = np.zeros(synth.shape, np.float32)
  return np.asarray(rewards_lib.role_rewards(node_solved, zeros, active, system_solved, zeros[:, 0]))


def best_probability(state: stage1_lib.Stage1State, inputs: policy_lib.PolicyInputs, pool: SyntheticPool) -> float:
  """Mean P(best | role 0, synthesizer position) at temperature 1."""
  probs = policy_lib.probabilities(state.params, inputs, 1.0, net=state.net)
  return float(jnp.mean(probs[:, 0, -1, pool.best]))


def train(config: stage1_lib.Stage1Config, net, batch: int, seed: int,
          pool: SyntheticPool = SyntheticPool()) -> dict[str, float]:
  """Runs `config.total_steps` stage-1 updates on the synthetic pool; returns P(best) before and after
  (held-out queries) and uniform's 1 / (M + 1)."""
  rng = np.random.default_rng([seed, 27])
  profiles = _unit(rng.normal(size=(pool.num_models, pool.dim)))
  train_qr = _unit(rng.normal(size=(pool.train_queries, pool.num_roles, pool.dim)))
  test_inputs = _inputs(pool, _unit(rng.normal(size=(pool.test_queries, pool.num_roles, pool.dim))), profiles)
  keys = jax.random.split(jax.random.key(seed), 3)
  g = config.samples_per_query
  state = stage1_lib.create_state(keys[0], _inputs(pool, train_qr[:batch * g], profiles), config, net)
  before = best_probability(state, test_inputs, pool)
  for step in range(config.total_steps):
    idx = np.repeat(batch_indices(seed, step, batch, pool.train_queries), g)
    inputs = _inputs(pool, train_qr[idx], profiles)
    choices, tau = stage1_lib.sample_step(state, inputs, keys[1], config)
    rewards = role_rewards(pool, np.asarray(choices), rng)
    state, metrics = stage1_lib.update_step(state, stage1_lib.Stage1Batch(inputs, choices, jnp.asarray(rewards), tau),
                                            keys[2])
    stage1_lib.check_finite(metrics, step)
  return {"before": before, "after": best_probability(state, test_inputs, pool), "uniform": 1.0 / (pool.num_models + 1)}
