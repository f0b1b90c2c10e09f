"""HieraMAS as published: the reference's reward, credit, sampling and inference rule on hand-made cases.

Expected values are written out by hand (the reward shape here, not imported), so a change in the
formula, the credit or the rule fails.
"""

from __future__ import annotations

import asyncio
import dataclasses
import math
import pathlib

import jax
import jax.numpy as jnp
import numpy as np
import pytest

from hieramas_jax.benchmarks.data import load_items
from hieramas_jax.learn import policy, rewards, stage1
from hieramas_jax.mas.trace import DECISION_NODE, CallRecord, Trace
from hieramas_jax.methods.hieramas import training
from hieramas_jax.methods.hieramas.config import TOTAL_COST_RECIPE, HieraMASConfig, HieraMASConfigError
from hieramas_jax.methods.hieramas.rollout import (NON_ANSWER_ROLES, Rollout, batch_rewards, checkable_roles,
                                                   consensus_index, decision_cost, rollout_system_rewards)

REPO = pathlib.Path(__file__).resolve().parents[1]


def hand(solved: bool, cost: float) -> float:
  return max(math.exp(-300 * cost), 0.5) if solved else max(-math.exp(300 * cost), -2.5)


def test_reference_reward_charges_the_decision_node_and_gives_a_skipped_role_half_the_system_reward():
  # Role 0 ran and solved at 0.001; role 1 was skipped; role 2 ran but has no checkable answer (alpha 0).
  got = rewards.reference_role_rewards(node_solved=[[True, False, True]], node_cost=[[0.001, 0.0, 0.004]],
                                       node_active=[[True, False, True]], node_checkable=[[True, True, False]],
                                       system_solved=[False], decision_cost=[0.002])
  system = -math.exp(0.6)
  np.testing.assert_allclose(got, [[0.5 * math.exp(-0.3) + 0.5 * system, 0.5 * system, system]], rtol=1e-6)


def _call(node, cost):
  return CallRecord(node=node, role=None, position="decision" if node == DECISION_NODE else "synthesizer",
                    model="gpt-5-mini", prompt_tokens=1, completion_tokens=1, cost_usd=cost, latency_s=0.0,
                    cached=False, text="")


def _rollout(active, solved_nodes, node_cost, system_solved, dec_cost):
  calls = [_call(i, node_cost[r]) for i, r in enumerate(active)] + [_call(DECISION_NODE, dec_cost)]
  trace = Trace(item_id="q", method="hieramas", final_text="", calls=calls)
  r = len(node_cost)
  node_solved = np.zeros(r, bool)
  node_solved[list(active)] = [solved_nodes[a] for a in active]
  checkable = np.zeros(r, bool)
  checkable[list(active)] = True
  return Rollout(item_id="q", choices=np.zeros((r, 3), np.int32), adjacency=np.zeros((r, r), bool),
                 active_roles=tuple(active), trace=trace, system_solved=system_solved, system_cost=trace.cost_usd,
                 node_solved=node_solved, node_cost=np.asarray(node_cost, np.float64), node_checkable=checkable,
                 decision_cost=decision_cost(trace))


def test_batch_rewards_under_both_chargings_match_hand_values():
  # Roles 0 and 2 ran (0 solved), role 1 skipped; the decision node cost 0.002 and solved.
  ro = _rollout((0, 2), {0: True, 2: False}, [0.001, 0.0, 0.003], True, 0.002)
  assert ro.decision_cost == pytest.approx(0.002) and ro.system_cost == pytest.approx(0.006)
  ref = batch_rewards([ro], alpha=0.5, k=300.0, system_cost="decision", role_checkable=[True, True, True])[0]
  sys_ref = math.exp(-0.6)
  np.testing.assert_allclose(ref, [0.5 * math.exp(-0.3) + 0.5 * sys_ref, 0.5 * sys_ref,
                                   0.5 * (-math.exp(0.9)) + 0.5 * sys_ref], rtol=1e-5)
  total = batch_rewards([ro], alpha=0.5, k=300.0, system_cost="total")[0]
  sys_total = hand(True, 0.006)  # exp(-1.8) < 0.5: the floor
  np.testing.assert_allclose(total, [0.5 * math.exp(-0.3) + 0.5 * sys_total, sys_total,
                                     0.5 * (-math.exp(0.9)) + 0.5 * sys_total], rtol=1e-5)
  np.testing.assert_allclose(rollout_system_rewards([ro], k=300.0, system_cost="decision"), [sys_ref], rtol=1e-6)
  # A non-answer role keeps alpha = 0 whether it ran or not.
  skipped_plan = batch_rewards([ro], alpha=0.5, k=300.0, system_cost="decision", role_checkable=[True, False, True])
  assert skipped_plan[0, 1] == pytest.approx(sys_ref, rel=1e-6)


def test_non_answer_roles_are_the_references_humaneval_planners():
  assert checkable_roles("humaneval_plus") == (False, False, True, False, True)
  assert all(checkable_roles("mmlu_redux")) and all(checkable_roles("math"))
  assert NON_ANSWER_ROLES == {"Project Manager", "Algorithm Designer", "Test Analyst"}


def test_reference_consensus_compares_whole_texts():
  item = next(it for it in load_items("mmlu_redux"))
  assert asyncio.run(consensus_index(item, ["The answer is B", "The answer is B\n"])) == 0
  # The same letter in different words is no consensus in the reference (its extractor is the identity here).
  agree = ["Reasoning...\nThe answer is B", "B", "I pick option B.\nAnswer: B"]
  assert asyncio.run(consensus_index(item, agree)) is None
  assert asyncio.run(consensus_index(item, [])) is None
  assert HieraMASConfig().consensus_match == "text"


def test_suite_answer_consensus_when_every_extracted_answer_agrees():
  item = next(it for it in load_items("mmlu_redux"))
  agree = ["Reasoning...\nThe answer is B", "B", "I pick option B.\nAnswer: B"]
  assert asyncio.run(consensus_index(item, agree, "answer")) == 0
  assert asyncio.run(consensus_index(item, agree + ["The answer is C"], "answer")) is None


def test_stage1_validates_on_the_full_dag_like_the_reference():
  cfg = HieraMASConfig()
  graphs = training.validation_graphs(cfg, jax.random.key(0), 3, 4)
  np.testing.assert_array_equal(graphs, np.broadcast_to(np.triu(np.ones((4, 4), bool), 1), (3, 4, 4)))
  rand = training.validation_graphs(dataclasses.replace(cfg, stage1_val_graph="random"), jax.random.key(0), 3, 4)
  assert not (rand == graphs).all()


def _inputs(batch=4, roles=2, positions=3, models=3, dim=8, seed=0):
  rng = np.random.default_rng(seed)
  return policy.PolicyInputs(jnp.asarray(rng.normal(size=(batch, roles, dim)), jnp.float32),
                             jnp.asarray(rng.normal(size=(models, dim)), jnp.float32),
                             jnp.ones((roles, positions), bool))


NET = policy.LLMSelectionPolicy(hidden=16)


_CONFIG_BASE = dict(learning_rate=1e-3, weight_decay=1e-5, clip_norm=1.0, entropy_coef=1.0, total_steps=100,
                    tau_start=10.0, tau_end=0.8, samples_per_query=1, baseline="moving_average", sampling="tempered",
                    learning_rate_end=None)


def _config(**fields) -> stage1.Stage1Config:
  """A stage-1 config for these unit tests: the library has no defaults, so the fixed values live here."""
  return stage1.Stage1Config(**{**_CONFIG_BASE, **fields})


def test_reference_credit_is_the_role_reward_on_every_position_without_a_baseline():
  cfg = _config(total_steps=12, entropy_coef=0.0, baseline="none", sampling="gumbel")
  inputs = _inputs()
  state = stage1.create_state(jax.random.key(0), inputs, cfg, NET)
  choices, tau = stage1.sample_step(state, inputs, jax.random.key(1), cfg)
  role_rewards = jnp.asarray([[1.0, -0.5], [0.5, 0.5], [-2.5, 0.25], [0.75, -1.0]], jnp.float32)
  batch = stage1.Stage1Batch(inputs, choices, role_rewards, tau)
  _, metrics = stage1.update_step(state, batch, jax.random.key(2))
  parts = policy.log_prob_parts(state.params, inputs, choices, tau, net=NET)
  # Every position of role r (a skipped role's proposers included) gets R_{b,r}; the non-empty normaliser
  # gets the mean role reward; no baseline is subtracted.
  expected = -(np.sum(np.asarray(role_rewards)[:, :, None] * np.asarray(parts.chosen))
               - np.sum(np.asarray(role_rewards).mean(axis=1) * np.asarray(parts.log_valid))) / choices.size
  assert float(metrics["pg_loss"]) == pytest.approx(expected, rel=1e-4)
  assert float(metrics["mean_abs_advantage"]) == pytest.approx(
      np.abs(np.concatenate([role_rewards, role_rewards.mean(1, keepdims=True)], 1)).mean(), rel=1e-6)


# Slow (two compiles of the stage-1 sampling step, about a minute on a loaded 2-core machine); the policy's
# sampling itself is in the fast tier (tests/test_learn_policy.py).
@pytest.mark.slow
def test_gumbel_sampling_ignores_the_schedules_temperature():
  inputs = _inputs(batch=64)
  gumbel = _config(total_steps=12, tau_start=10.0, sampling="gumbel")
  tempered = _config(total_steps=12, tau_start=10.0, sampling="tempered")
  state = stage1.create_state(jax.random.key(0), inputs, gumbel, NET)
  key = jax.random.key(3)
  drawn, tau = stage1.sample_step(state, inputs, key, gumbel)
  assert float(tau) == pytest.approx(10.0)  # step 0 of the cosine schedule: used in the loss only
  at_one = policy.sample_choices(state.params, inputs, jax.random.fold_in(key, 0), 1.0, net=NET)
  np.testing.assert_array_equal(drawn, at_one)
  hot, _ = stage1.sample_step(state, inputs, key, tempered)
  at_ten = policy.sample_choices(state.params, inputs, jax.random.fold_in(key, 0), 10.0, net=NET)
  np.testing.assert_array_equal(hot, at_ten)


SKIP = 3  # three models, skip last


def _logits():
  """[R=3, P=3 (2 proposers + synthesizer), M + 1 = 4]; skip is the argmax of every proposer position."""
  lg = np.zeros((3, 3, 4))
  lg[:, 0] = [1.0, 3.0, 2.0, 9.0]   # proposer position 0: top models 1 then 2
  lg[:, 1] = [3.0, 2.0, 1.0, 9.0]   # proposer position 1: top models 0 then 1
  lg[0, 2] = [2.0, 1.0, 0.0, 5.0]   # role 0: skip argmax, p(skip) highest
  lg[1, 2] = [0.0, 4.0, 1.0, 4.5]   # role 1: skip argmax, lower p(skip)
  lg[2, 2] = [0.0, 0.5, 3.0, 1.0]   # role 2: model 2 is the argmax
  return lg


class _FixedPosition:
  """A generator stand-in that always draws proposer position `p` (the rule's one random choice)."""

  def __init__(self, p):
    self.p = p

  def integers(self, high):
    assert high == 2
    return self.p


def test_rotation_takes_one_positions_top_two_masks_skip_and_drops_up_to_the_cap():
  got = policy.rotation_choices(_logits(), _FixedPosition(0), 2, top_n=2, max_dropped=2)
  # Proposers: position 0's top two without skip (1, 2); synthesizer argmax without skip; roles 0 and 1
  # have skip as argmax but one role must stay among the droppable -> with cap 2 both go (role 2 stays).
  np.testing.assert_array_equal(got, [[1, 2, SKIP], [1, 2, SKIP], [1, 2, 2]])
  # Cap 1: only the role with the highest skip probability (role 0) goes.
  got = policy.rotation_choices(_logits(), _FixedPosition(1), 2, top_n=2, max_dropped=1)
  np.testing.assert_array_equal(got, [[0, 1, SKIP], [0, 1, 1], [0, 1, 2]])
  # Cap 0 (MATH, HumanEval+): nobody is dropped; W = 4 from the same position rotates A, B, A, B.
  got = policy.rotation_choices(_logits(), _FixedPosition(1), 4, top_n=2, max_dropped=0)
  np.testing.assert_array_equal(got, [[0, 1, 0, 1, 0], [0, 1, 0, 1, 1], [0, 1, 0, 1, 2]])
  # A role that may not be dropped (no checkable answer) stays even when skip is its argmax.
  got = policy.rotation_choices(_logits(), _FixedPosition(0), 2, top_n=2, max_dropped=2,
                                droppable=[False, True, True])
  assert got[0, -1] == 0 and got[1, -1] == SKIP


def test_rotation_reads_the_reference_positions_of_a_policy_trained_with_more_proposers():
  # A policy with 4 proposer positions (trained W = 4) used with W = 2: the reference draws the proposer
  # position among the first 2 and reads the synthesizer (and the drop rule) at position 2, a worker slot.
  lg = np.zeros((1, 5, 4))
  lg[0, 0] = [1.0, 3.0, 2.0, 0.0]
  lg[0, 2] = [0.0, 1.0, 6.0, 0.0]  # position 2: model 2
  lg[0, 4] = [7.0, 0.0, 0.0, 0.0]  # the trained synthesizer position: model 0
  got = policy.rotation_choices(lg, _FixedPosition(0), 2, top_n=2)
  np.testing.assert_array_equal(got, [[1, 2, 2]])

  class _Last:
    def integers(self, high):
      assert high == 4  # the earlier rule draws among every proposer position
      return 0
  got = policy.rotation_choices(lg, _Last(), 2, top_n=2, aggregator_slot="last")
  np.testing.assert_array_equal(got, [[1, 2, 0]])


def test_drop_rule_always_leaves_one_droppable_role():
  lg = np.zeros((3, 4))
  lg[:, -1] = [5.0, 4.0, 3.0]  # skip is every role's argmax
  np.testing.assert_array_equal(policy.dropped_roles(lg, [True] * 3, 5), [True, True, False])
  np.testing.assert_array_equal(policy.dropped_roles(lg, [True] * 3, 0), [False] * 3)


@pytest.mark.parametrize("seed", range(20))
def test_rotation_never_selects_skip_except_a_dropped_synthesizer(seed):
  rng = np.random.default_rng(seed)
  lg = rng.normal(size=(8, 7, 10)) * 3
  lg[..., -1] += rng.normal() * 4  # sometimes skip dominates everywhere
  cap = int(rng.integers(0, 4))
  got = policy.rotation_choices(lg, np.random.default_rng(seed + 100), 2, top_n=2, max_dropped=cap)
  assert (got[:, :-1] != 9).all()
  dropped = got[:, -1] == 9
  assert dropped.sum() <= min(cap, 7)
  assert (np.argmax(lg[dropped, 2], axis=-1) == 9).all()  # the reference reads position W = 2 of the 6


def test_config_fills_the_references_per_benchmark_values():
  mmlu, math_, he = (HieraMASConfig(benchmark=b) for b in ("mmlu_redux", "math", "humaneval_plus"))
  assert (mmlu.stage1_batch, mmlu.stage1_lr, mmlu.stage1_lr_end, mmlu.stage1_val_every) == (4, 5e-3, 2e-3, 3)
  assert (math_.stage1_batch, math_.stage1_lr, math_.stage1_lr_end, math_.stage1_val_every) == (6, 2e-3, 2e-3, 2)
  assert (mmlu.stage1_proposers, math_.stage1_proposers, he.stage1_proposers) == (6, 2, 2)
  assert (mmlu.max_dropped_roles, math_.max_dropped_roles, he.max_dropped_roles) == (2, 0, 0)
  assert (mmlu.num_candidates, math_.num_candidates, he.num_candidates) == (200, 100, 200)
  assert (mmlu.stage2_max_density, math_.stage2_max_density, he.stage2_max_density) == (0.7, 1.0, 0.8)
  assert he.stage1_max_density == 0.75 and mmlu.gcn_dropout == 0.05 and math_.gcn_dropout == 0.5
  assert (mmlu.stage2_lr, mmlu.stage2_batch, mmlu.stage2_weight_decay) == (1e-3, 128, 2e-5)
  assert (math_.stage2_lr, math_.stage2_batch, math_.stage2_weight_decay) == (5e-4, 32, 1e-5)
  assert mmlu.stage1_steps == 12 and mmlu.policy_skip_logit_init == 0.0 and mmlu.system_cost == "decision"
  assert HieraMASConfig(stage1_lr=1e-2).stage1_lr_end == 1e-2  # an explicit lr alone: constant
  assert HieraMASConfig.from_json(mmlu.to_json()) == mmlu
  with pytest.raises(HieraMASConfigError, match="system_cost must be one of"):
    HieraMASConfig(system_cost="all")


def test_total_cost_flag_file_is_the_named_recipe():
  flags = {}
  for line in (REPO / "experiments/ablations/total_cost.flags").read_text().splitlines():
    if line.startswith("--") and not line.startswith("--tag"):
      name, _, value = line[2:].partition("=")
      if not value:
        name, value = (name[2:], False) if name.startswith("no") and name not in TOTAL_COST_RECIPE else (name, True)
      flags[name] = value
  assert set(flags) == set(TOTAL_COST_RECIPE)
  for name, value in TOTAL_COST_RECIPE.items():
    assert type(value)(flags[name]) == value if not isinstance(value, bool) else flags[name] == value, name
