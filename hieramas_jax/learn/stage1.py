"""Stage 1: REINFORCE on the LLM-selection policy with multi-level (per-role) rewards.

Loss per batch (B rollouts, R roles, P positions, effective positions V):

  L = -(1/|V|) sum_{b,r,p in V} (R_{b,r} - baseline_{b,r}) * log pi(c_{b,r,p})  -  beta * mean entropy

Every position of role r shares that role's reward (the paper's credit assignment: a supernode's
LLM choices are judged by its own output mixed with the system outcome), with one exception when
the batch carries system rewards: whether a call happens at all. Every position's categorical is
factored exactly, pi(m) = pi(on) * pi(m | on) (`policy.log_prob_parts`); the on/off factor (a
synthesizer's: the role's activation; a proposer's: its membership in the mixture) gets the
system-level advantage, the model-given-on factor the role's mixed one. Why: the node level counts
only the node's own cost, so it rewards adding calls that make the node's own answer right even when
they lower the system reward (measured on MMLU-Redux with the reference credit: skip rate 0.11 ->
0.00 in 20 steps, validation reward 0.26-0.31; with a skipped synthesizer the node level has no
output to grade at all). The node level keeps judging what it can: which LLMs fill an active node.

Non-empty configurations: the policy samples conditioned on at least one active role
(`policy.sample_choices`); the log-probability of a configuration is the sum of its factors minus
log P(at least one on), and that normaliser is credited at the system level.

Effective positions: a choice that cannot have changed the outcome gets no gradient. The proposers
of a role whose synthesizer was skipped were never called (the whole supernode is off), so their
sampled models are pure noise in the estimator; `Stage1Batch.effective` masks them out. The
synthesizer position always counts (its skip is the role's on/off decision). The entropy bonus covers
the same positions: on a masked position it would be the only force, and since the positions share
parameters (the skip bias above all) it pushed every position toward uniform, i.e. toward "on"
(measured: late in training the skip rate fell to 0 on MMLU-Redux and HumanEval+ and the reward
with it).

Baseline (variance reduction), one of three:
- none (the reference code, `Stage1Config.baseline = "none"` with G = 1): the raw rewards.
- samples_per_query G >= 2 (default in training): the batch holds G independently sampled
  configurations of each query, consecutive. Each rollout's baseline is the mean role reward of the
  OTHER G - 1 samples of the same query (leave-one-out, "REINFORCE with G samples, get a baseline for
  free", Kool et al. 2019). It removes the query's difficulty from the signal: on these benchmarks
  whether the strong decision node solves a query dominates the reward, and a per-role average
  cannot tell a hard query from a bad configuration. Unbiased, since the other samples are
  independent of this one's choices.
- G = 1: a per-role exponential moving average of past role rewards (decay 0.9, bias-corrected like
  Adam's moments; on the very first batch the batch mean), read BEFORE it is updated with the batch.
  GPTSwarm uses a moving average.

Sampling: "gumbel" (the reference's hard Gumbel-softmax: the argmax of logits + Gumbel noise, i.e. a draw
from softmax(logits) whatever tau is; tau enters only the log-probabilities and the entropy of the loss)
or "tempered" (a draw from softmax(logits / tau), the distribution whose log-probabilities the loss uses).

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
import numpy as np
import optax
from flax.training import train_state

from hieramas_jax.learn import policy as policy_lib


@dataclasses.dataclass(frozen=True)
class Stage1Config:
  """What one stage-1 run is told; its caller gives every mapped field.

  No defaults for what HieraMAS configures: the values a run uses (the paper's, the reference code's
  where the paper is silent, the per-benchmark ones) have one home, `methods/hieramas/config.py`'s
  `HieraMASConfig` (fields `stage1_*`), and `methods/hieramas/training.stage1_config` passes each one.
  A default here would be a second set, different from the first, that library users and tests got
  silently. Only `baseline_decay`, which HieraMASConfig does not expose, keeps its one default here.

  Attributes:
    learning_rate: AdamW step size (HieraMASConfig.stage1_lr).
    weight_decay: AdamW decoupled weight decay (stage1_weight_decay).
    clip_norm: global gradient-norm clip (stage1_clip).
    entropy_coef: beta (stage1_entropy; see docs/learn.md: with logits clipped to +-10 and tau
      annealed to 0.8 it is strong, so smaller values are worth a sweep).
    total_steps: length of the temperature schedule (stage1_steps, at least 1).
    tau_start, tau_end: cosine temperature schedule ends (stage1_tau_start, stage1_tau_end).
    samples_per_query: G configurations sampled per query in a batch (G >= 2: leave-one-out
      baseline; 1: `baseline`) (stage1_samples).
    baseline: with G = 1, "moving_average" (per-role EMA) or "none" (stage1_baseline).
    sampling: "gumbel" (draws at tau = 1) or "tempered" (draws at the schedule's tau) (stage1_sampling).
    learning_rate_end: the step size falls from learning_rate to it on a cosine over the first half of
      total_steps, then stays there (None: constant; the reference's lr_start -> lr_end and its shape,
      `learning_rate_schedule`) (stage1_lr_end).
    baseline_decay: EMA decay of the per-role baseline (fixed at 0.9 in every HieraMAS run).
  """

  learning_rate: float
  weight_decay: float
  clip_norm: float
  entropy_coef: float
  total_steps: int
  tau_start: float
  tau_end: float
  samples_per_query: int
  baseline: str
  sampling: str
  learning_rate_end: float | None
  baseline_decay: float = 0.9


class Stage1Batch(NamedTuple):
  """What one update needs, after the MAS ran the sampled choices.

  Attributes:
    inputs: the policy inputs the choices were sampled from (with G >= 2 samples per query, each
      query's row repeated G times, consecutively).
    choices: [B, R, P] int32, the sampled choices.
    rewards: [B, R] role rewards (rewards.role_rewards).
    tau: scalar temperature the choices were sampled at.
    effective: [B, R, P] bool, positions whose choice took part in the run (`effective_positions`);
      None counts every existing position.
    system_rewards: [B] system-level rewards. Given, each position's choice is split into its
      on/off factor, credited with the system reward, and its model given "on", credited with the
      role reward (see module docstring). None: the role reward credits all.
  """

  inputs: policy_lib.PolicyInputs
  choices: jax.Array
  rewards: jax.Array
  tau: jax.Array
  effective: jax.Array | None = None
  system_rewards: jax.Array | None = None


def effective_positions(choices, active_roles) -> np.ndarray:
  """[B, R, P] bool: which sampled choices took part in the MAS run.

  Args:
    choices: [B, R, P] ints, synthesizer last.
    active_roles: per rollout, the role indices that ran (`Rollout.active_roles`; it includes the
      fallback role when every synthesizer was skipped).

  A proposer counts only if its role ran (skipping a proposer of an active role is a real decision,
  "omit it", so it counts too); a synthesizer position always counts.
  """
  choices = np.asarray(choices)
  b, r, p = choices.shape
  active = np.zeros((b, r), bool)
  for i, roles in enumerate(active_roles):
    active[i, list(roles)] = True
  out = np.broadcast_to(active[:, :, None], (b, r, p)).copy()
  out[:, :, -1] = True
  return out


class Stage1State(train_state.TrainState):
  """TrainState + the per-role baseline.

  Attributes:
    baseline: [R + 1] EMA of role rewards and (last) the system reward (not yet bias-corrected).
    baseline_weight: scalar 1 - decay^t, the bias correction (0 before the first batch).
    net: the policy module (static).
    entropy_coef, baseline_decay: static hyperparameters closed over by the jitted step.
  """

  baseline: jax.Array
  baseline_weight: jax.Array
  net: policy_lib.LLMSelectionPolicy = flax.struct.field(pytree_node=False)
  entropy_coef: float = flax.struct.field(pytree_node=False, default=1.0)
  baseline_decay: float = flax.struct.field(pytree_node=False, default=0.9)
  samples_per_query: int = flax.struct.field(pytree_node=False, default=1)
  use_baseline: bool = flax.struct.field(pytree_node=False, default=True)


def learning_rate_schedule(config: Stage1Config):
  """The step size per update: the reference's shape (`get_cosine_warmup_lr` of its learnable-graph
  scripts), a cosine from `learning_rate` down to `learning_rate_end` over the first half of the updates,
  then flat at `learning_rate_end`. Constant when no end is given (or it equals the start)."""
  if config.learning_rate_end is None or config.learning_rate_end == config.learning_rate:
    return config.learning_rate
  return optax.cosine_decay_schedule(config.learning_rate, max(config.total_steps // 2, 1),
                                     alpha=config.learning_rate_end / config.learning_rate)


def make_optimizer(config: Stage1Config) -> optax.GradientTransformation:
  lr = learning_rate_schedule(config)
  return optax.chain(optax.clip_by_global_norm(config.clip_norm), optax.adamw(lr, weight_decay=config.weight_decay))


def create_state(rng: jax.Array, inputs: policy_lib.PolicyInputs, config: Stage1Config,
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
                               baseline=jnp.zeros((num_roles + 1,), jnp.float32),
                               baseline_weight=jnp.zeros((), jnp.float32), net=net,
                               entropy_coef=config.entropy_coef, baseline_decay=config.baseline_decay,
                               samples_per_query=config.samples_per_query,
                               use_baseline=config.baseline != "none")
    return state.replace(step=jnp.zeros((), jnp.int32))
  return jax.jit(create)


def tau_at(step, config: Stage1Config):
  return policy_lib.temperature(step, config.total_steps, config.tau_start, config.tau_end)


def _loss(params, state: Stage1State, batch: Stage1Batch, advantage, dropout_rng):
  parts = policy_lib.log_prob_parts(params, batch.inputs, batch.choices, batch.tau, net=state.net,
                                    dropout_rng=dropout_rng)
  logp, entropy, log_on = parts.chosen, parts.entropy, parts.log_on
  exists = jnp.broadcast_to(batch.inputs.slot_mask[None], logp.shape).astype(logp.dtype)
  used = exists if batch.effective is None else exists * batch.effective.astype(logp.dtype)
  advantage = jax.lax.stop_gradient(advantage)
  num_roles = logp.shape[1]
  role_adv = advantage[:, :num_roles, None]  # [B, R, 1]
  terms = role_adv * logp
  if batch.system_rewards is not None:
    system_adv = advantage[:, num_roles][:, None, None]  # [B, 1, 1]
    skipped = batch.choices == batch.inputs.profiles.shape[0]  # the skip token is index M
    on_off = jnp.where(skipped, logp, log_on)
    model_given_on = jnp.where(skipped, 0.0, logp - log_on)
    terms = system_adv * on_off + role_adv * model_given_on
  # The sampled distribution is conditioned on a non-empty MAS: log pi(config) = sum of the factors
  # - log P(valid). The normaliser depends on every role's on/off, so the system column credits it.
  normaliser = advantage[:, num_roles] * parts.log_valid
  pg = -(jnp.sum(terms * used) - jnp.sum(normaliser)) / jnp.maximum(used.sum(), 1.0)
  mean_entropy = jnp.sum(entropy * used) / jnp.maximum(used.sum(), 1.0)
  return pg - state.entropy_coef * mean_entropy, {"pg_loss": pg, "entropy": mean_entropy}


def _advantage(state: Stage1State, rewards, batch_mean):
  """[B, R + 1] reward minus baseline (leave-one-out over each query's G samples, the EMA, or none)."""
  g = state.samples_per_query
  if g >= 2:
    if rewards.shape[0] % g:
      raise ValueError(f"batch of {rewards.shape[0]} rollouts is not a multiple of samples_per_query={g}")
    grouped = rewards.reshape(-1, g, rewards.shape[1])
    others = (grouped.sum(axis=1, keepdims=True) - grouped) / (g - 1)
    return (grouped - others).reshape(rewards.shape)
  if not state.use_baseline:
    return rewards
  corrected = state.baseline / jnp.maximum(state.baseline_weight, 1e-8)
  baseline = jnp.where(state.baseline_weight > 0, corrected, batch_mean)
  return rewards - baseline[None, :]


@jax.jit
def update_step(state: Stage1State, batch: Stage1Batch, rng: jax.Array) -> tuple[Stage1State, dict[str, Any]]:
  """One REINFORCE update; returns the new state and scalar metrics.

  `rng` is the run's stage-1 key; the dropout key is fold_in(rng, step).
  """
  # Column R is the system level (the batch's system rewards, or the mean role reward when absent).
  system = batch.rewards.mean(axis=1) if batch.system_rewards is None else batch.system_rewards
  rewards = jnp.concatenate([batch.rewards, system[:, None]], axis=1).astype(jnp.float32)
  batch_mean = rewards.mean(axis=0)  # [R + 1]
  advantage = _advantage(state, rewards, batch_mean)
  dropout_rng = jax.random.fold_in(rng, state.step)
  (loss, aux), grads = jax.value_and_grad(_loss, has_aux=True)(state.params, state, batch, advantage, dropout_rng)
  nonfinite = ~jnp.isfinite(loss)
  new_state = state.apply_gradients(grads=grads)
  decay = state.baseline_decay
  new_state = new_state.replace(baseline=decay * state.baseline + (1 - decay) * batch_mean,
                                baseline_weight=decay * state.baseline_weight + (1 - decay))
  metrics = {"loss": loss, "pg_loss": aux["pg_loss"], "entropy": aux["entropy"],
             "mean_reward": rewards[:, :-1].mean(), "grad_norm": optax.tree.norm(grads),
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
  """Choices [B, R, P] for this step and the schedule's tau (for the loss): key fold_in(rng, step).

  With "gumbel" sampling the draw ignores tau (the reference's hard Gumbel argmax); with "tempered" it
  is made at tau. Use a different `rng` than the one given to `update_step` (split the run key once).
  """
  tau = tau_at(state.step, config)
  draw_tau = jnp.float32(1.0) if config.sampling == "gumbel" else tau
  return _sample(state, inputs, rng, draw_tau), tau


@jax.jit
def greedy(state: Stage1State, inputs: policy_lib.PolicyInputs):
  """Evaluation choices (argmax) of the current policy."""
  return policy_lib.greedy_choices(state.params, inputs, net=state.net)
