"""Stage 1: REINFORCE on the LLM-selection policy with multi-level (per-role) rewards.

Loss per batch (B queries, R roles, P positions, valid positions V):

  L = -(1/|V|) sum_{b,r,p in V} (R_{b,r} - baseline_r) * log pi(c_{b,r,p})  -  beta * mean_V entropy

Every position of role r shares that role's reward (the paper's credit assignment: a supernode's
LLM choices are judged by its own output mixed with the system outcome).

Baseline: a per-role exponential moving average of past role rewards (decay 0.9, bias-corrected
like Adam's moments; on the very first batch the batch mean). The reference code subtracts no
baseline; GPTSwarm uses a moving average. The baseline is read BEFORE it is updated with the batch,
so it never depends on the rewards it is subtracted from (after the first batch).

Randomness: `update_step` and `sample_step` take the run's one key and `fold_in` the state's step,
so a run resumed from a checkpoint draws exactly the keys an uninterrupted run would.
"""

from __future__ import annotations

import dataclasses
import functools
from typing import Any, NamedTuple

import flax.struct
import jax
import jax.numpy as jnp
import optax
from flax.training import train_state

from hieramas_jax.learn import policy as policy_lib


@dataclasses.dataclass(frozen=True)
class Stage1Config:
  """Hyperparameters (reference values where the paper is silent).

  Attributes:
    learning_rate: AdamW step size.
    weight_decay: AdamW decoupled weight decay (reference: Adam with weight decay 1e-5).
    clip_norm: global gradient-norm clip (reference: 1.0).
    entropy_coef: beta (reference: 1.0; see docs/learn.md: with logits clipped to +-10 and tau
      annealed to 0.8 it is strong, so smaller values are worth a sweep).
    baseline_decay: EMA decay of the per-role baseline.
    total_steps: length of the temperature schedule.
    tau_start, tau_end: cosine temperature schedule ends (reference: 10 -> 0.8).
  """

  learning_rate: float = 1e-3
  weight_decay: float = 1e-5
  clip_norm: float = 1.0
  entropy_coef: float = 1.0
  baseline_decay: float = 0.9
  total_steps: int = 100
  tau_start: float = 10.0
  tau_end: float = 0.8


class Stage1Batch(NamedTuple):
  """What one update needs, after the MAS ran the sampled choices.

  Attributes:
    inputs: the policy inputs the choices were sampled from.
    choices: [B, R, P] int32, the sampled choices.
    rewards: [B, R] role rewards (rewards.role_rewards).
    tau: scalar temperature the choices were sampled at.
  """

  inputs: policy_lib.PolicyInputs
  choices: jax.Array
  rewards: jax.Array
  tau: jax.Array


class Stage1State(train_state.TrainState):
  """TrainState + the per-role baseline.

  Attributes:
    baseline: [R] EMA of role rewards (not yet bias-corrected).
    baseline_weight: scalar 1 - decay^t, the bias correction (0 before the first batch).
    net: the policy module (static).
    entropy_coef, baseline_decay: static hyperparameters closed over by the jitted step.
  """

  baseline: jax.Array
  baseline_weight: jax.Array
  net: policy_lib.LLMSelectionPolicy = flax.struct.field(pytree_node=False)
  entropy_coef: float = flax.struct.field(pytree_node=False, default=1.0)
  baseline_decay: float = flax.struct.field(pytree_node=False, default=0.9)


def make_optimizer(config: Stage1Config) -> optax.GradientTransformation:
  return optax.chain(optax.clip_by_global_norm(config.clip_norm),
                     optax.adamw(config.learning_rate, weight_decay=config.weight_decay))


def create_state(rng: jax.Array, inputs: policy_lib.PolicyInputs, config: Stage1Config = Stage1Config(),
                 net: policy_lib.LLMSelectionPolicy = policy_lib.DEFAULT_POLICY) -> Stage1State:
  """A fresh state: parameters from `rng`, zero baseline for the R roles of `inputs`.

  Built under jit (eager Flax/Optax init compiles op by op: ~10 s on a busy CPU), with `step` an
  int32 array from the start so the jitted steps see one signature before and after a restore.
  """
  return _create_fn(config, net)(rng, inputs)


@functools.lru_cache(maxsize=None)
def _create_fn(config: Stage1Config, net: policy_lib.LLMSelectionPolicy):
  def create(rng, inputs):
    params = net.init(rng, inputs)["params"]
    num_roles = inputs.slot_mask.shape[0]
    state = Stage1State.create(apply_fn=net.apply, params=params, tx=make_optimizer(config),
                               baseline=jnp.zeros((num_roles,), jnp.float32),
                               baseline_weight=jnp.zeros((), jnp.float32), net=net,
                               entropy_coef=config.entropy_coef, baseline_decay=config.baseline_decay)
    return state.replace(step=jnp.zeros((), jnp.int32))
  return jax.jit(create)


def tau_at(step, config: Stage1Config):
  return policy_lib.temperature(step, config.total_steps, config.tau_start, config.tau_end)


def _loss(params, state: Stage1State, batch: Stage1Batch, advantage, dropout_rng):
  logp, entropy = policy_lib.log_prob(params, batch.inputs, batch.choices, batch.tau, net=state.net,
                                      dropout_rng=dropout_rng)
  mask = jnp.broadcast_to(batch.inputs.slot_mask[None], logp.shape).astype(logp.dtype)
  count = jnp.maximum(mask.sum(), 1.0)
  pg = -jnp.sum(jax.lax.stop_gradient(advantage)[:, :, None] * logp) / count
  mean_entropy = jnp.sum(entropy) / count
  return pg - state.entropy_coef * mean_entropy, {"pg_loss": pg, "entropy": mean_entropy}


@jax.jit
def update_step(state: Stage1State, batch: Stage1Batch, rng: jax.Array) -> tuple[Stage1State, dict[str, Any]]:
  """One REINFORCE update; returns the new state and scalar metrics.

  `rng` is the run's stage-1 key; the dropout key is fold_in(rng, step).
  """
  rewards = batch.rewards.astype(jnp.float32)
  batch_mean = rewards.mean(axis=0)  # [R]
  corrected = state.baseline / jnp.maximum(state.baseline_weight, 1e-8)
  baseline = jnp.where(state.baseline_weight > 0, corrected, batch_mean)
  advantage = rewards - baseline[None, :]
  dropout_rng = jax.random.fold_in(rng, state.step)
  (loss, aux), grads = jax.value_and_grad(_loss, has_aux=True)(state.params, state, batch, advantage, dropout_rng)
  nonfinite = ~jnp.isfinite(loss)
  new_state = state.apply_gradients(grads=grads)
  decay = state.baseline_decay
  new_state = new_state.replace(baseline=decay * state.baseline + (1 - decay) * batch_mean,
                                baseline_weight=decay * state.baseline_weight + (1 - decay))
  metrics = {"loss": loss, "pg_loss": aux["pg_loss"], "entropy": aux["entropy"],
             "mean_reward": rewards.mean(), "grad_norm": optax.tree.norm(grads),
             "mean_abs_advantage": jnp.abs(advantage).mean(), "nonfinite": nonfinite}
  return new_state, metrics


def check_finite(metrics: dict[str, Any], step: int) -> None:
  """Fail fast on NaN/inf, saying where (host side, after update_step)."""
  if bool(metrics["nonfinite"]):
    raise FloatingPointError(f"stage 1: non-finite loss at step {step}: {jax.device_get(metrics)}")


@jax.jit
def _sample(state: Stage1State, inputs, rng, tau):
  return policy_lib.sample_choices(state.params, inputs, jax.random.fold_in(rng, state.step), tau, net=state.net)


def sample_step(state: Stage1State, inputs: policy_lib.PolicyInputs, rng: jax.Array, config: Stage1Config):
  """Choices [B, R, P] for this step and the temperature used: key fold_in(rng, step), tau from schedule.

  Use a different `rng` than the one given to `update_step` (split the run key once).
  """
  tau = tau_at(state.step, config)
  return _sample(state, inputs, rng, tau), tau


@jax.jit
def greedy(state: Stage1State, inputs: policy_lib.PolicyInputs):
  """Evaluation choices (argmax) of the current policy."""
  return policy_lib.greedy_choices(state.params, inputs, net=state.net)
