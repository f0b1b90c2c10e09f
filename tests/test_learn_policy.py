"""Policy pi_m, skip semantics, rewards, stage-1 REINFORCE and checkpoint resume."""

from __future__ import annotations

import math

import jax
import jax.numpy as jnp
import numpy as np
import pytest

from hieramas_jax.learn import checkpoint, policy, rewards, stage1
from hieramas_jax.mas.config import ConfigError

TINY = policy.LLMSelectionPolicy(hidden=16)
# One config and one input shape for every stage-1 test, so jitted steps compile once per file.
CONFIG = stage1.Stage1Config(total_steps=60, learning_rate=1e-2, entropy_coef=0.01)


def _inputs(batch=16, roles=2, positions=3, models=3, dim=8, seed=0):
  rng = np.random.default_rng(seed)
  unit = lambda x: x / np.linalg.norm(x, axis=-1, keepdims=True)
  return policy.PolicyInputs(jnp.asarray(unit(rng.normal(size=(batch, roles, dim))), jnp.float32),
                             jnp.asarray(unit(rng.normal(size=(models, dim))), jnp.float32),
                             jnp.ones((roles, positions), bool))


def test_reward_arithmetic_by_hand():
  solved = np.array([True, True, True, False, False, False, False])
  cost = np.array([0.0, 0.001, 0.01, 0.0, 0.001, 0.01, 10.0])
  expected = [1.0, math.exp(-0.3), 0.5, -1.0, -math.exp(0.3), -2.5, -2.5]
  np.testing.assert_allclose(rewards.outcome_reward(solved, cost), expected, rtol=1e-6)
  # role = 0.5 * node + 0.5 * system where checkable; system only where not.
  got = rewards.role_rewards(node_solved=[[True, True]], node_cost=[[0.001, 0.001]],
                             node_checkable=[[True, False]], system_solved=[False], system_cost=[0.002])
  system = -math.exp(0.6)
  np.testing.assert_allclose(got, [[0.5 * math.exp(-0.3) + 0.5 * system, system]], rtol=1e-6)


def test_policy_distribution_sampling_and_log_prob():
  inputs = _inputs()
  params = policy.init_params(jax.random.key(0), inputs, TINY)
  probs = policy.probabilities(params, inputs, 2.0, net=TINY)
  assert probs.shape == (16, 2, 3, 4)  # B, R, P, M + skip
  np.testing.assert_allclose(probs.sum(-1), 1.0, atol=1e-5)
  a = policy.sample_choices(params, inputs, jax.random.key(1), 2.0, net=TINY)
  b = policy.sample_choices(params, inputs, jax.random.key(1), 2.0, net=TINY)
  np.testing.assert_array_equal(a, b)  # same key, same choices
  logp, entropy = policy.log_prob(params, inputs, a, 2.0, net=TINY)
  np.testing.assert_allclose(logp, np.log(np.take_along_axis(np.asarray(probs), np.asarray(a)[..., None], -1)[..., 0]),
                             atol=1e-5)
  assert np.all(entropy > 0) and np.all(entropy <= math.log(4) + 1e-5)
  greedy = policy.greedy_choices(params, inputs, net=TINY)
  np.testing.assert_array_equal(greedy, np.argmax(probs, -1))


def test_temperature_schedule_is_cosine_from_10_to_0_8():
  assert float(policy.temperature(0, 100)) == pytest.approx(10.0)
  assert float(policy.temperature(50, 100)) == pytest.approx(5.4)
  assert float(policy.temperature(100, 100)) == pytest.approx(0.8)
  assert float(policy.temperature(500, 100)) == pytest.approx(0.8)


def test_skip_semantics():
  models, roles = ["m0", "m1", "m2"], ["A", "B", "C"]
  skip = len(models)
  adjacency = np.array([[0, 1, 1], [0, 0, 1], [0, 0, 0]], bool)  # A->B, A->C, B->C
  choices = np.array([[0, skip, 1],      # A: proposer 2 skipped, synthesizer m1
                      [1, 2, skip],      # B: synthesizer skipped -> role off
                      [skip, skip, 2]])  # C: no proposers, synthesizer answers alone
  config, active = policy.choices_to_config(choices, roles, models, adjacency, "m0")
  assert active == [0, 2]
  assert [n.role for n in config.nodes] == ["A", "C"]
  assert config.nodes[0].proposers == ("m0",) and config.nodes[0].synthesizer == "m1"
  assert config.nodes[1].proposers == () and config.nodes[1].synthesizer == "m2"
  # B and its edges are gone (A->C stays; nothing is rewired through B); B's models never run: cost 0.
  np.testing.assert_array_equal(config.adjacency, [[False, True], [False, False]])
  assert all(n.role != "B" for n in config.nodes)

  all_skipped = np.array([[1, skip, skip], [0, 0, skip], [2, 2, skip]])
  config, active = policy.choices_to_config(all_skipped, roles, models, adjacency, "m0")
  assert active == [0] and config.nodes[0].synthesizer == "m0" and config.nodes[0].proposers == ("m1",)
  assert config.adjacency.shape == (1, 1)

  with pytest.raises(policy.PolicyError, match="choices must lie"):
    policy.choices_to_config(choices + 1, roles, models, adjacency, "m0")
  with pytest.raises(ConfigError):
    policy.choices_to_config(choices, roles, models, adjacency | adjacency.T, "m0")  # not a DAG


def _train(state, inputs, config, steps, k_sample, k_update):
  for _ in range(steps):
    choices, tau = stage1.sample_step(state, inputs, k_sample, config)
    # Synthetic reward: role rewarded for synthesizer = model 2, punished otherwise.
    reward = jnp.where(choices[..., -1] == 2, 1.0, -1.0)
    state, metrics = stage1.update_step(state, stage1.Stage1Batch(inputs, choices, reward, tau), k_update)
    stage1.check_finite(metrics, int(state.step))
  return state, metrics


def test_stage1_learns_the_rewarded_choice():
  inputs, config = _inputs(), CONFIG
  state = stage1.create_state(jax.random.key(0), inputs, config, TINY)
  k_sample, k_update = jax.random.split(jax.random.key(1))
  before = float(policy.probabilities(state.params, inputs, 1.0, net=TINY)[..., -1, 2].mean())
  state, metrics = _train(state, inputs, config, 60, k_sample, k_update)
  after = float(policy.probabilities(state.params, inputs, 1.0, net=TINY)[..., -1, 2].mean())
  assert before < 0.4 and after > 0.9, (before, after)
  np.testing.assert_array_equal(stage1.greedy(state, inputs)[..., -1], 2)
  assert float(metrics["mean_reward"]) > 0.5


def test_resume_from_checkpoint_matches_uninterrupted_run(tmp_path):
  inputs, config = _inputs(), CONFIG
  keys = jax.random.split(jax.random.key(3))
  fresh = lambda: stage1.create_state(jax.random.key(0), inputs, config, TINY)
  straight, _ = _train(fresh(), inputs, config, 8, *keys)

  ckpt = checkpoint.Checkpointer(tmp_path / "ckpt")
  half, _ = _train(fresh(), inputs, config, 4, *keys)
  ckpt.save(int(half.step), half, val_metric=0.5)
  ckpt.save(int(half.step) + 100, half, val_metric=0.1)  # a worse later checkpoint
  assert ckpt.best_step() == 4 and ckpt.latest_step() == 104
  resumed = ckpt.restore_best(fresh())  # a new process would start from a fresh template
  assert int(resumed.step) == 4
  resumed, _ = _train(resumed, inputs, config, 4, *keys)
  ckpt.close()
  jax.tree_util.tree_map(np.testing.assert_array_equal, resumed.params, straight.params)
  np.testing.assert_array_equal(resumed.baseline, straight.baseline)
