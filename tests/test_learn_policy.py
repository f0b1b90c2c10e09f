"""Policy pi_m, skip semantics, rewards, stage-1 REINFORCE and checkpoint resume."""

from __future__ import annotations

import math

import jax
import jax.numpy as jnp
import numpy as np
import pytest

from hieramas_jax.learn import checkpoint, policy, rewards, stage1, synthetic
from hieramas_jax.mas.config import ConfigError
from hieramas_jax.methods.hieramas import training
from hieramas_jax.methods.hieramas.config import HieraMASConfig

TINY = policy.LLMSelectionPolicy(hidden=16)


_CONFIG_BASE = dict(learning_rate=1e-3, weight_decay=1e-5, clip_norm=1.0, entropy_coef=1.0, total_steps=100,
                    tau_start=10.0, tau_end=0.8, samples_per_query=1, baseline="moving_average", sampling="tempered",
                    learning_rate_end=None)


def _config(**fields) -> stage1.Stage1Config:
  """A stage-1 config for these unit tests: the library has no defaults, so the fixed values live here."""
  return stage1.Stage1Config(**{**_CONFIG_BASE, **fields})


# One config and one input shape for every stage-1 test, so jitted steps compile once per file.
CONFIG = _config(total_steps=60, learning_rate=1e-2, entropy_coef=0.01)


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
  logp, entropy, _, _ = policy.log_prob_parts(params, inputs, a, 2.0, net=TINY)
  np.testing.assert_allclose(logp, np.log(np.take_along_axis(np.asarray(probs), np.asarray(a)[..., None], -1)[..., 0]),
                             atol=1e-5)
  assert np.all(entropy > 0) and np.all(entropy <= math.log(4) + 1e-5)
  greedy = np.asarray(policy.greedy_choices(params, inputs, net=TINY))
  argmax = np.argmax(probs, -1)
  some_on = (argmax[:, :, -1] != 3).any(axis=1)
  assert some_on.any()
  np.testing.assert_array_equal(greedy[some_on], argmax[some_on])  # the per-position mode when it is a MAS


def test_sampling_and_greedy_never_leave_the_mas_empty():
  # A strong skip prior: the independent per-position policy would switch every role off most of the time.
  net = policy.LLMSelectionPolicy(hidden=16, skip_logit_init=3.0)
  inputs = _inputs(batch=4000, roles=2, positions=2, models=3)
  params = policy.init_params(jax.random.key(0), inputs, net)
  probs = np.asarray(policy.probabilities(params, inputs, 1.0, net=net))
  q = 1 - probs[:, :, -1, 3]  # pi(on) of each role's synthesizer, [B, 2]
  assert np.mean(np.prod(1 - q, axis=1)) > 0.5  # unconditioned: mostly empty
  choices = np.asarray(policy.sample_choices(params, inputs, jax.random.key(5), 1.0, net=net))
  on = choices[:, :, -1] != 3
  assert on.any(axis=1).all()
  # Exact conditioning: P(role 0 on | some role on) = q0 / (1 - (1 - q0)(1 - q1)), averaged over rows.
  expected = np.mean(q[:, 0] / (1 - (1 - q[:, 0]) * (1 - q[:, 1])))
  assert on[:, 0].mean() == pytest.approx(expected, abs=0.025)
  # Models of an on synthesizer follow pi(m | on): compare row-averaged frequencies.
  chosen = choices[:, 0, -1][on[:, 0]]
  cond = probs[:, 0, -1, :3] / q[:, :1]
  np.testing.assert_allclose(np.bincount(chosen, minlength=3) / len(chosen), cond[on[:, 0]].mean(0), atol=0.03)
  # Greedy: where the per-position mode is all-skip, the role with the smallest skip margin is switched on.
  greedy = np.asarray(policy.greedy_choices(params, inputs, net=net))
  assert (greedy[:, :, -1] != 3).sum(axis=1).min() >= 1
  logits = np.log(probs[:, :, -1, :])
  all_off = (np.argmax(probs[:, :, -1, :], -1) == 3).all(axis=1)
  assert all_off.any()
  rescue = np.argmax(logits[:, :, :3].max(-1) - logits[:, :, 3], axis=1)
  for b in np.flatnonzero(all_off)[:50]:
    on_roles = np.flatnonzero(greedy[b, :, -1] != 3)
    assert list(on_roles) == [rescue[b]] and greedy[b, rescue[b], -1] == np.argmax(probs[b, rescue[b], -1, :3])


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


# Slow (a convergence run); the fast tier checks stage-1 steps by hand and their resume from a checkpoint.
@pytest.mark.slow
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


def test_leave_one_out_advantage_by_hand():
  # 2 queries x G = 2 samples, 1 role: advantage = own reward - mean of the other sample of that query.
  inputs = _inputs(batch=4, roles=1)
  config = _config(total_steps=10, samples_per_query=2)
  state = stage1.create_state(jax.random.key(0), inputs, config, TINY)
  rewards = jnp.array([[1.0], [-1.0], [0.5], [0.5]])
  np.testing.assert_allclose(stage1._advantage(state, rewards, rewards.mean(0)), [[2.0], [-2.0], [0.0], [0.0]])
  config3 = _config(total_steps=10, samples_per_query=3)
  state3 = stage1.create_state(jax.random.key(0), _inputs(batch=3, roles=1), config3, TINY)
  np.testing.assert_allclose(stage1._advantage(state3, jnp.array([[3.0], [0.0], [0.0]]), None),
                             [[3.0], [-1.5], [-1.5]])
  # A batch that is not whole groups is refused at trace time.
  with pytest.raises(ValueError, match="not a multiple"):
    stage1._advantage(state3, rewards, rewards.mean(0))
  # With G = 1 the EMA baseline (per role, and the system column) is used: first batch, the batch mean.
  state1 = stage1.create_state(jax.random.key(0), inputs, _config(total_steps=10), TINY)
  both = jnp.concatenate([rewards, 2 * rewards], axis=1)
  np.testing.assert_allclose(stage1._advantage(state1, both, both.mean(0)), both - jnp.array([0.25, 0.5]))


def test_effective_positions_mask_proposers_of_switched_off_roles():
  choices = np.zeros((2, 3, 3), np.int32)
  eff = stage1.effective_positions(choices, [(0, 2), (1,)])
  np.testing.assert_array_equal(eff[0], [[1, 1, 1], [0, 0, 1], [1, 1, 1]])
  np.testing.assert_array_equal(eff[1], [[0, 0, 1], [1, 1, 1], [0, 0, 1]])


def test_ineffective_positions_get_no_gradient():
  # Rewards depend on the synthesizer only; a masked proposer position must get exactly zero
  # policy-gradient: its log-prob term is removed, so the pg loss ignores what was sampled there.
  inputs = _inputs(batch=4, roles=2)
  config = _config(total_steps=10, samples_per_query=2, entropy_coef=0.0)
  state = stage1.create_state(jax.random.key(0), inputs, config, TINY)
  choices = jnp.zeros((4, 2, 3), jnp.int32)
  rewards = jnp.array([[1.0, 0.0], [0.0, 0.0], [1.0, 0.0], [0.0, 0.0]])
  effective = np.ones((4, 2, 3), bool)
  effective[:, :, :2] = False  # every proposer masked
  batch = stage1.Stage1Batch(inputs, choices, rewards, jnp.float32(1.0), jnp.asarray(effective))
  other = batch._replace(choices=choices.at[:, :, :2].set(2))  # different proposer choices, same outcome
  adv = jnp.concatenate([rewards, rewards.mean(1, keepdims=True)], axis=1)
  loss_a, _ = stage1._loss(state.params, state, batch, adv, jax.random.key(0))
  loss_b, _ = stage1._loss(state.params, state, other, adv, jax.random.key(0))
  assert float(loss_a) == pytest.approx(float(loss_b), abs=1e-7)
  unmasked = batch._replace(effective=None)
  loss_c, _ = stage1._loss(state.params, state, unmasked, adv, jax.random.key(0))
  assert float(loss_c) != pytest.approx(float(loss_a), abs=1e-6)


def test_synthesizer_on_off_is_credited_at_system_level_by_hand():
  # One query, G = 2 samples, one role with only a synthesizer (W = 0) over M = 2 models + skip.
  inputs = _inputs(batch=2, roles=1, positions=1, models=2)
  config = _config(total_steps=10, samples_per_query=2, entropy_coef=0.0)
  state = stage1.create_state(jax.random.key(0), inputs, config, TINY)
  choices = jnp.array([[[0]], [[2]]], jnp.int32)  # sample 0: model 0; sample 1: skip (role off)
  role = jnp.array([[0.9], [0.5]])  # role advantages +0.4 / -0.4
  system = jnp.array([0.3, 0.5])    # system advantages -0.2 / +0.2
  batch = stage1.Stage1Batch(inputs, choices, role, jnp.float32(1.0), None, system)
  adv = stage1._advantage(state, jnp.concatenate([role, system[:, None]], axis=1), None)
  np.testing.assert_allclose(adv, [[0.4, -0.2], [-0.4, 0.2]], atol=1e-6)
  loss, _ = stage1._loss(state.params, state, batch, adv, jax.random.key(0))
  probs = np.asarray(policy.probabilities(state.params, inputs, 1.0, net=TINY))[:, 0, 0]  # [2, 3]
  on0, on1 = probs[0, 0] + probs[0, 1], probs[1, 0] + probs[1, 1]
  # The conditioned policy's normaliser log P(valid) = log pi(on) (one role) is credited at system level.
  normaliser = -0.2 * np.log(on0) + 0.2 * np.log(on1)
  expected = -(-0.2 * np.log(on0) + 0.4 * np.log(probs[0, 0] / on0) + 0.2 * np.log(probs[1, 2]) - normaliser) / 2
  assert float(loss) == pytest.approx(expected, rel=1e-5)
  # Without system rewards the role advantage credits the whole categorical.
  plain, _ = stage1._loss(state.params, state, batch._replace(system_rewards=None), adv, jax.random.key(0))
  expected = -(0.4 * np.log(probs[0, 0]) - 0.4 * np.log(probs[1, 2]) - normaliser) / 2
  assert float(plain) == pytest.approx(expected, rel=1e-5)


def test_pair_mlp_logits_match_a_hand_computation_of_the_reference_compute_logits():
  """The reference head scores each (position, LLM) pair: MLP([W_s h + e_p; W_k h_m]) -> one logit, clipped at 10."""
  net = policy.PairMLPPolicy(hidden=6)
  inputs = _inputs(batch=2, roles=2, positions=3, models=3, dim=5)
  params = jax.tree.map(np.asarray, policy.init_params(jax.random.key(3), inputs, net))
  params["skip_logit_bias"] = np.float32(0.7)  # a trained skip bias, to check where it lands
  got = np.asarray(policy.logits(params, inputs, net=net))
  qr, prof = np.asarray(inputs.query_role, np.float64), np.asarray(inputs.profiles, np.float64)
  dense = lambda name, x: x @ params[name]["kernel"] + params[name].get("bias", 0.0)
  want = np.empty((2, 2, 3, 4))
  for b in range(2):
    for r in range(2):
      for p in range(3):
        slot = dense("slot", qr[b, r]) + params["position_embedding"][p]
        for m in range(4):
          key = dense("profile_key", prof[m]) if m < 3 else params["skip_embedding"][0]
          # One linear layer over the concatenation [slot; key] (its kernel split in two), ReLU, one output.
          w1 = np.concatenate([params["pair_slot"]["kernel"], params["pair_key"]["kernel"]])
          h = np.maximum(np.concatenate([slot, key]) @ w1 + params["pair_slot"]["bias"], 0.0)
          want[b, r, p, m] = h @ params["pair_out"]["kernel"][:, 0] + params["pair_out"]["bias"][0] + 0.7 * (m == 3)
  np.testing.assert_allclose(got, np.clip(want, -10, 10), rtol=1e-4, atol=1e-5)
  # Clipping at +-10: scale the output layer up until the logits saturate.
  big = dict(params, pair_out={"kernel": params["pair_out"]["kernel"] * 1e4, "bias": params["pair_out"]["bias"]})
  out = np.asarray(policy.logits(big, inputs, net=net))
  assert np.abs(out).max() == pytest.approx(10.0) and np.isclose(np.abs(out), 10.0).mean() > 0.5


def test_published_stage1_recipe_learns_the_best_model_of_a_synthetic_pool_with_the_reference_head():
  """One synthesizer model is strictly best for role 0 (0.9 vs 0.4 solved). In the published 12 steps
  (MMLU-Redux's: lr 5e-3 -> 2e-3 on a cosine over 6 steps, batch 4, hard Gumbel draws, tau 10 -> 0.8,
  entropy 1, no baseline) the reference head raises P(best) from uniform 0.10 by at least 0.08 on held-out
  queries (mean of 3 seeds; measured 0.099 -> 0.272, over 8 seeds 0.204, seeds spread 0.11-0.52); the
  suite's earlier dot-product head stays within 0.02 of uniform (0.100 -> 0.105; 8 seeds 0.106)."""
  results = {}
  for head, hidden in (("pair_mlp", 256), ("dot", 128)):
    cfg = HieraMASConfig(benchmark="mmlu_redux", policy_head=head, policy_hidden=hidden)
    assert cfg.stage1_steps == 12 and cfg.stage1_batch == 4
    runs = [synthetic.train(training.stage1_config(cfg), training.policy_net(cfg), cfg.stage1_batch, seed)
            for seed in range(3)]
    results[head] = (np.mean([r["before"] for r in runs]), np.mean([r["after"] for r in runs]))
  uniform = 0.1
  assert abs(results["pair_mlp"][0] - uniform) < 0.01
  assert results["pair_mlp"][1] > uniform + 0.08
  assert abs(results["dot"][1] - uniform) < 0.02


def test_learning_rate_is_the_reference_cosine_over_the_first_half_then_flat():
  cfg = _config(learning_rate=5e-3, learning_rate_end=2e-3, total_steps=12)
  lr = stage1.learning_rate_schedule(cfg)
  hand = [2e-3 + 0.5 * 3e-3 * (1 + math.cos(math.pi * i / 6)) for i in range(6)] + [2e-3] * 6
  np.testing.assert_allclose([float(lr(i)) for i in range(12)], hand, rtol=1e-6)
  assert stage1.learning_rate_schedule(_config(learning_rate=2e-3, learning_rate_end=2e-3)) == 2e-3
