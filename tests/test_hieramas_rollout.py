"""HieraMAS rollouts against the simulated pool over real HTTP: reward arithmetic and skip semantics.

Expected values are computed by hand from the trace's own call records, with the reward shape written
out here (not imported), so a change in either the accounting or the formula fails.
"""

from __future__ import annotations

import asyncio
import math

import numpy as np
import pytest

from hieramas_jax.benchmarks import graders
from hieramas_jax.benchmarks.data import load_items
from hieramas_jax.learn.batching import batch_indices
from hieramas_jax.llm.client import LLMClient
from hieramas_jax.llm.endpoint import sim_endpoint
from hieramas_jax.llm.registry import get_pool
from hieramas_jax.methods.hieramas.config import HieraMASConfig, HieraMASConfigError
from hieramas_jax.methods.hieramas.rollout import Setup, batch_rewards, run_rollout, run_rollouts
from hieramas_jax.report.hieramas import results_name
from hieramas_jax.sim.server import SimConfig, start_sim_in_thread

ITEMS = load_items("mmlu_redux")
SETUP = Setup.make("mmlu_redux", get_pool("gpt-5-mini"), num_proposers=2)
M = {name: i for i, name in enumerate(SETUP.models)}
SKIP = SETUP.skip_index


@pytest.fixture(scope="module")
def sim():
  handle = start_sim_in_thread(SimConfig(seed=0))
  yield handle
  handle.close()


def _run(sim, coro_fn):
  async def go():
    async with LLMClient(sim_endpoint(sim.base_url)) as client:
      return await coro_fn(client)
  return asyncio.run(go())


def hand_outcome(solved: bool, cost: float) -> float:
  """Reference reward shape: solved max(exp(-300 c), 0.5); failed max(-exp(300 c), -2.5)."""
  return max(math.exp(-300 * cost), 0.5) if solved else max(-math.exp(300 * cost), -2.5)


def _mixed_choices():
  """Cheap and expensive models mixed, so node costs land on both sides of the reward's floors."""
  rows = []
  for r in range(SETUP.num_roles):
    cheap, dear = ("llama-8b", "qwen3-8b"), ("gpt-5-mini", "deepseek-v3")
    pair = cheap if r % 2 == 0 else dear
    rows.append([M[pair[0]], M[pair[1]], M["gpt-5-nano" if r % 3 else "gpt-5-mini"]])
  return np.array(rows, np.int32)


def test_role_rewards_of_a_real_rollout_equal_hand_computation_from_its_trace(sim):
  chain = np.eye(SETUP.num_roles, k=1, dtype=bool)
  items = [ITEMS[3], ITEMS[40]]
  choices = np.stack([_mixed_choices(), _mixed_choices()[::-1]])
  rollouts = _run(sim, lambda c: run_rollouts(c, SETUP, items, choices, np.stack([chain, chain.T])))
  rewards = batch_rewards(rollouts, alpha=0.5, k=300.0)
  assert rewards.shape == (2, SETUP.num_roles)
  for b, (item, rollout) in enumerate(zip(items, rollouts)):
    trace = rollout.trace
    system_cost = sum(c.cost_usd for c in trace.calls)
    system_solved = graders.grade(item, trace.final_text).correct
    assert rollout.system_cost == pytest.approx(system_cost) and rollout.system_solved == system_solved
    for r, role in enumerate(SETUP.roles):
      # By role name (not node index): an independent route to the same per-node cost.
      node_calls = [c for c in trace.calls if c.role == role]
      assert [c.position for c in node_calls].count("synthesizer") == 1 and len(node_calls) == 3
      node_cost = sum(c.cost_usd for c in node_calls)
      synth_text = next(c.text for c in node_calls if c.position == "synthesizer")
      node_solved = graders.grade(item, synth_text).correct
      expected = 0.5 * hand_outcome(node_solved, node_cost) + 0.5 * hand_outcome(system_solved, system_cost)
      assert rollout.node_cost[r] == pytest.approx(node_cost)
      assert rewards[b, r] == pytest.approx(expected, rel=1e-5, abs=1e-6)
    decision = [c for c in trace.calls if c.position == "decision"]
    assert len(decision) == 1 and decision[0].model == "gpt-5-mini"
    assert rollout.node_cost.sum() + decision[0].cost_usd == pytest.approx(system_cost)
  # Node costs sit where the cost term is live (below the solved floor's ln(2)/300 USD) and differ,
  # so a wrong per-node attribution would change the rewards.
  all_costs = np.concatenate([r.node_cost for r in rollouts])
  assert 0 < all_costs.min() and all_costs.max() < math.log(2) / 300 and len(set(all_costs.round(7))) > 8


def test_a_skipped_synthesizer_removes_the_role_and_its_edges_and_costs_nothing(sim):
  choices = _mixed_choices()
  choices[1, -1] = SKIP            # role 1 (Critic) deactivated
  choices[0, 1] = SKIP             # role 0 keeps one proposer
  full = np.triu(np.ones((SETUP.num_roles, SETUP.num_roles), bool), k=1)
  rollout = _run(sim, lambda c: run_rollout(c, SETUP, ITEMS[5], choices, full))
  trace = rollout.trace
  assert not [c for c in trace.calls if c.role == "Critic"]
  assert rollout.active_roles == (0, 2, 3, 4, 5, 6, 7)
  assert rollout.node_cost[1] == 0.0 and not rollout.node_checkable[1] and not rollout.node_solved[1]
  role0 = [c.position for c in trace.calls if c.role == SETUP.roles[0]]
  assert sorted(role0) == ["proposer:0", "synthesizer"]
  config = trace.extra["config"]
  assert [n["role"] for n in config["nodes"]] == [SETUP.roles[i] for i in rollout.active_roles]
  # Edges of the remaining 7 nodes only: every forward pair among them, nothing rewired through Critic.
  assert sorted(map(tuple, config["edges"])) == [(i, j) for i in range(7) for j in range(i + 1, 7)]
  assert len(trace.calls) == 1 + 1 + 6 * 3 + 1  # role 0: 1 proposer + synth; 6 full roles; decision
  rewards = batch_rewards([rollout], alpha=0.5, k=300.0)[0]
  system = hand_outcome(rollout.system_solved, trace.cost_usd)
  assert rewards[1] == pytest.approx(system, rel=1e-6)  # a deactivated role gets the system reward only


def test_batch_order_is_a_pure_function_of_seed_and_step_and_covers_every_query_each_epoch():
  steps = [batch_indices(7, s, 4, 10) for s in range(5)]
  assert all(np.array_equal(a, batch_indices(7, s, 4, 10)) for s, a in enumerate(steps))
  flat = np.concatenate(steps)
  assert sorted(flat[:10]) == list(range(10)) and sorted(flat[10:20]) == list(range(10))
  assert not np.array_equal(flat[:10], flat[10:20])  # a new permutation each epoch
  assert not np.array_equal(batch_indices(8, 0, 4, 10), steps[0])


def test_config_rejects_bad_values_with_one_clear_message_and_tags_name_results():
  with pytest.raises(HieraMASConfigError, match="stage2_val_fraction must be in"):
    HieraMASConfig(stage2_val_fraction=1.0)
  with pytest.raises(HieraMASConfigError, match="graph_mode must be one of classifier, random_vote"):
    HieraMASConfig(graph_mode="vote")
  with pytest.raises(HieraMASConfigError, match="k_pool must be 0"):
    HieraMASConfig(k_pool=2)
  assert HieraMASConfig(benchmark="math").num_candidates == 100
  assert HieraMASConfig().num_candidates == 200 and HieraMASConfig(k_pool=50).num_candidates == 50
  cfg = HieraMASConfig(k_pool=50)
  tag = "k{k_pool}".format(**cfg.to_json())
  assert results_name(cfg.benchmark, cfg.pool, tag) == "hieramas_mmlu_redux_gpt-5-mini_k50"
  assert results_name("math", "qwen3-80b") == "hieramas_math_qwen3-80b"


def test_inference_candidates_are_drawn_per_query_by_seed_and_item_id():
  from hieramas_jax.methods.hieramas.method import query_candidates  # pylint: disable=import-outside-toplevel
  cfg = HieraMASConfig()
  assert cfg.graph_pool == "per_query" and cfg.num_candidates == 200
  a, b = ITEMS[0].id, ITEMS[1].id
  first = query_candidates(cfg, SETUP.num_roles, a)
  np.testing.assert_array_equal(first.adjacency, query_candidates(cfg, SETUP.num_roles, a).adjacency)
  assert not np.array_equal(first.adjacency, query_candidates(cfg, SETUP.num_roles, b).adjacency)
  assert not np.array_equal(first.adjacency, query_candidates(HieraMASConfig(seed=1), SETUP.num_roles, a).adjacency)
  assert first.adjacency.shape == (200, SETUP.num_roles, SETUP.num_roles)
  pairs = SETUP.num_roles * (SETUP.num_roles - 1) / 2
  assert (first.density >= round(0.3 * pairs) / pairs).all() and (first.density <= round(0.7 * pairs) / pairs).all()
  with pytest.raises(HieraMASConfigError, match="graph_pool must be one of per_query, shared"):
    HieraMASConfig(graph_pool="pool")
  assert HieraMASConfig(graph_pool="shared").training_fingerprint() == cfg.training_fingerprint()


def test_the_shared_pool_option_scores_one_pool_for_every_query():
  from hieramas_jax.learn import graph_pool  # pylint: disable=import-outside-toplevel
  from hieramas_jax.methods.hieramas.method import HieraMAS  # pylint: disable=import-outside-toplevel
  shared = HieraMAS(HieraMASConfig(graph_pool="shared", k_pool=8))
  a, b = shared.candidates(ITEMS[0]), shared.candidates(ITEMS[1])
  assert a is b and a.num_graphs == 8
  assert list(a.kind[-3:]) == [graph_pool.KIND_CHAIN, graph_pool.KIND_STAR, graph_pool.KIND_FULL]
  per_query = HieraMAS(HieraMASConfig(k_pool=8))
  assert per_query.pool is None and not np.array_equal(per_query.candidates(ITEMS[0]).adjacency,
                                                       per_query.candidates(ITEMS[1]).adjacency)
