"""Oracle search (static_search's fit): planted best configuration found, plan, resume, real MAS runner."""

from __future__ import annotations

import asyncio
import hashlib

import numpy as np
import pytest

from hieramas_jax.benchmarks.data import load_items
from hieramas_jax.learn.rewards import system_reward
from hieramas_jax.llm.registry import get_pool
from hieramas_jax.mas.runtime import RunSettings, build_config
from hieramas_jax.methods.static_search import search as search_lib
from hieramas_jax.methods.static_search import space as space_lib
from hieramas_jax.methods.static_search import store as store_lib
from mas_fakes import FakeClient

POOL = get_pool("gpt-5-mini")
MATH_ITEMS = list(load_items("math")[:48])


def _uniform(*parts) -> float:
  digest = hashlib.sha256("|".join(map(str, parts)).encode()).digest()
  return int.from_bytes(digest[:8], "big") / 2.0**64


class PlantedRunner:
  """A fake query runner: configuration `golden` solves 97% of queries, every other one 30-70%.

  Cost is 1e-4 USD per call, so cheap configurations are slightly better, as on the real pool.
  Outcomes are a pure function of (configuration, item, sample), like the sim's.
  """

  def __init__(self, golden_key: str, settings: RunSettings = RunSettings()):
    self.golden_key, self.settings, self.calls = golden_key, settings, 0
    self._keys = {}  # id(config) -> key; configs live as long as the search that made them

  async def __call__(self, config, item, sample_index):
    self.calls += 1
    await asyncio.sleep(0)
    key = self._keys.get(id(config))
    if key is None:
      key = self._keys[id(config)] = space_lib.config_key(config, self.settings)
    p = 0.97 if key == self.golden_key else 0.3 + 0.4 * _uniform("p", key)
    n_calls = sum(len(n.models) for n in config.nodes) + 1
    return store_lib.QueryOutcome(_uniform(key, item.id, sample_index) < p, 1e-4 * n_calls, n_calls)


def _math_space():
  return space_lib.SearchSpace.make("math", POOL, num_proposers=2, graph_seed=0, num_random_graphs=6)


def _golden(space, family_name):
  [golden] = [c for c in space_lib.structured_candidates(space) if c.family == family_name]
  return golden


def test_successive_halving_finds_the_planted_best_configuration_within_budget():
  space = _math_space()
  golden = _golden(space, "structured:deepseek-v3-alone-Math Solver")
  golden_key = space_lib.config_key(golden.to_mas(space), RunSettings())
  runner = PlantedRunner(golden_key)
  evaluator = store_lib.Evaluator(runner, store_lib.EvaluationStore(), max_queries=16)
  budget = 2500
  plan = search_lib.plan_search(budget, len(MATH_ITEMS), min_items=8, eta=3.0,
                            min_candidates=len(space_lib.structured_candidates(space)), max_samples=2)
  assert plan.planned_queries <= budget and plan.rung_items[-1] == len(MATH_ITEMS)
  assert plan.rung_samples[-1] == 2
  result = asyncio.run(search_lib.successive_halving(space, evaluator, MATH_ITEMS, plan, seed=0))
  assert result.best_key == golden_key
  assert result.best_score.accuracy > 0.9
  # More than the structured corners were raced, from every family, and no query ran twice.
  assert result.configurations_searched > len(space_lib.structured_candidates(space))
  assert {"structured", "uniform", "sparse", "mutant"} <= set(result.family_counts)
  assert runner.calls == len(evaluator.store) <= budget
  # Rungs grow and the leaderboard is sorted.
  assert [r.items * r.samples for r in result.rungs] == sorted(r.items * r.samples for r in result.rungs)
  rewards = [s.mean_reward for _, _, s in result.leaderboard]
  assert rewards == sorted(rewards, reverse=True)


def test_plan_spends_the_budget_and_refuses_one_too_small():
  plan = search_lib.plan_search(10_000, 200, min_items=16, eta=3.0, min_candidates=50, max_samples=3)
  assert plan.rung_items == (16, 48, 144, 200, 200) and plan.rung_samples == (1, 1, 1, 1, 3)
  assert 9_000 < plan.planned_queries <= 10_000  # the largest schedule that fits
  bigger = search_lib.plan_search(20_000, 200, min_items=16, eta=3.0, min_candidates=50, max_samples=3)
  assert bigger.initial_candidates > plan.initial_candidates
  with pytest.raises(space_lib.OracleError, match="too small"):
    search_lib.plan_search(500, 200, min_items=16, min_candidates=50)


def test_a_rerun_resumes_from_the_evaluation_file_and_runs_nothing_again(tmp_path):
  space = _math_space()
  golden_key = space_lib.config_key(_golden(space, "structured:llama-8b-alone-Inspector").to_mas(space), RunSettings())
  plan = search_lib.plan_search(1200, 24, min_items=8, min_candidates=len(space_lib.structured_candidates(space)),
                            max_samples=1)
  path = tmp_path / store_lib.EVALUATIONS_FILE

  def search():
    runner = PlantedRunner(golden_key)
    store = store_lib.EvaluationStore(path)
    try:
      result = asyncio.run(search_lib.successive_halving(space, store_lib.Evaluator(runner, store), MATH_ITEMS[:24],
                                                     plan, seed=3))
    finally:
      store.close()
    return result, runner.calls

  first, first_calls = search()
  # A kill mid-write leaves a torn last line: it is dropped, and only that query runs again.
  lines = path.read_text().splitlines()
  path.write_text("\n".join(lines[:-1]) + "\n" + lines[-1][:15])
  second, second_calls = search()
  third, third_calls = search()
  assert first_calls == len(lines) and second_calls == 1 and third_calls == 0
  for again in (second, third):
    assert again.best_key == first.best_key == golden_key
    assert again.best_score == first.best_score
    assert [r.to_json() for r in again.rungs] == [r.to_json() for r in first.rungs]


def test_evaluate_configuration_runs_the_mas_grades_and_rewards_cost():
  items = list(load_items("mmlu_redux")[:8])
  client = FakeClient(lambda model, messages, sample_index: "The answer is (A)")
  config = build_config([("Knowlegable Expert", ["llama-8b", "llama-8b"], "gemma-3-27b"),
                         ("Critic", [], "qwen3-8b")], "gpt-5-mini", [(0, 1)])
  score = asyncio.run(store_lib.evaluate_configuration(client, items, config, sample_indices=(0, 2)))
  solved = np.array([it.answer == "A" for it in items for _ in (0, 2)])
  per_query = {}
  for call in client.calls:  # cost per query, rebuilt from the fake's own per-call costs
    question = call["messages"][-1]["content"]
    key = (next(it.id for it in items if it.question.rstrip() in question), call["sample_index"] // 1000)
    per_query[key] = per_query.get(key, 0.0) + call["cost_usd"]
  cost = np.array([per_query[(it.id, s)] for it in items for s in (0, 2)])
  assert score.n == 16 and len(client.calls) == 16 * 5
  assert score.accuracy == pytest.approx(solved.mean())
  assert score.cost_usd == pytest.approx(cost.mean())
  assert score.mean_reward == pytest.approx(float(np.mean(system_reward(solved, cost))), abs=1e-6)
  # Sample 2 shifts every call's sample index; the two llama seats stay distinct draws.
  assert sorted({c["sample_index"] for c in client.calls}) == [0, 1, 2000, 2001]


def test_random_configurations_are_seeded_and_each_item_gets_its_own():
  space = _math_space()
  runner = PlantedRunner("none")
  evaluator = store_lib.Evaluator(runner, store_lib.EvaluationStore())
  score, distinct = asyncio.run(search_lib.random_configurations_reward(space, evaluator, MATH_ITEMS[:10],
                                                                   draws_per_item=3, seed=1))
  again, _ = asyncio.run(search_lib.random_configurations_reward(space, store_lib.Evaluator(
      PlantedRunner("none"), store_lib.EvaluationStore()), MATH_ITEMS[:10], draws_per_item=3, seed=1))
  assert score.n == 30 and distinct == 30 and again == score
  with pytest.raises(space_lib.OracleError):
    asyncio.run(search_lib.random_configurations_reward(space, evaluator, MATH_ITEMS[:2], draws_per_item=0, seed=1))


def test_skipped_roles_collapse_to_one_configuration_key():
  space = _math_space()
  skip = space.skip
  a = space_lib.Candidate(np.array([[0, 1, 2], [skip, skip, skip], [3, skip, 4]]), 0, "x")
  b = space_lib.Candidate(np.array([[0, 1, 2], [5, 6, skip], [3, skip, 4]]), 0, "x")  # role 1 skipped too
  c = space_lib.Candidate(np.array([[0, 1, 2], [5, 6, 7], [3, skip, 4]]), 0, "x")
  keys = [space_lib.config_key(x.to_mas(space), RunSettings()) for x in (a, b, c)]
  assert keys[0] == keys[1] != keys[2]


def test_against_the_sim_the_strong_decider_carries_accuracy_and_the_cheap_agent_costs_less():
  from hieramas_jax.llm.client import LLMClient  # pylint: disable=import-outside-toplevel
  from hieramas_jax.llm.endpoint import make_endpoint  # pylint: disable=import-outside-toplevel
  from hieramas_jax.sim.server import SimConfig, start_sim_in_thread  # pylint: disable=import-outside-toplevel
  items = list(load_items("mmlu_redux")[:30])
  space = space_lib.SearchSpace.make("mmlu_redux", POOL, num_proposers=2, num_random_graphs=0)
  everywhere = {c.family: c.to_mas(space) for c in space_lib.structured_candidates(space)}
  handle = start_sim_in_thread(SimConfig(seed=0))

  async def go():
    async with LLMClient(make_endpoint("sim", base_url=handle.base_url), cache=None) as client:
      strong = await store_lib.evaluate_configuration(client, items, everywhere["structured:gpt-5-mini-alone-Critic"])
      cheap = await store_lib.evaluate_configuration(client, items, everywhere["structured:llama-8b-alone-Critic"])
      return strong, cheap

  try:
    strong, cheap = asyncio.run(go())
  finally:
    handle.close()
  assert strong.n == cheap.n == 30
  # Both end at the strong decision node, which forms its own attempt and holds to it against a
  # weaker agent's answer (sim v2): accuracy is the decider's either way; the cost is not.
  assert abs(strong.accuracy - cheap.accuracy) <= 0.1 and strong.accuracy > 0.8
  assert 0 < cheap.cost_usd < strong.cost_usd


def test_standard_error_is_clustered_by_item():
  solved, failed = store_lib.QueryOutcome(True, 0.0, 2), store_lib.QueryOutcome(False, 0.0, 2)
  score = store_lib.score_outcomes([solved, solved, failed, failed], ["a", "a", "b", "b"])
  # Rewards 1, 1, -1, -1 (cost 0); per-item means 1 and -1: SE = std([1, -1], ddof=1) / sqrt(2) = 1.
  assert (score.mean_reward, score.accuracy, score.n, score.items) == (0.0, 0.5, 4, 2)
  assert score.stderr == pytest.approx(1.0)
  unclustered = store_lib.score_outcomes([solved, solved, failed, failed])
  assert unclustered.items == 4 and unclustered.stderr == pytest.approx(np.std([1, 1, -1, -1], ddof=1) / 2)


def test_models_used_are_listed_in_one_order_whatever_order_they_come_in():
  """qwen3-8b and gpt-5-nano cost the same per output token; a set of model names iterates in an order
  that changes with each process's string hashing, so the regret record listed them either way round."""
  import itertools  # pylint: disable=import-outside-toplevel
  models = ["qwen3-8b", "gpt-5-nano", "llama-8b", "gpt-5-mini"]
  orders = {tuple(space_lib.models_by_price(p)) for p in itertools.permutations(models)}
  assert orders == {("llama-8b", "gpt-5-nano", "qwen3-8b", "gpt-5-mini")}


def test_the_searchs_training_cost_does_not_depend_on_the_order_queries_finished():
  """The store holds outcomes as queries finished; the regret record's search_training_usd followed
  that order in its last digit (a plain sum). Here every order gives the same bytes."""
  from hieramas_jax.methods.static_search import method as method_lib  # pylint: disable=import-outside-toplevel
  rng = np.random.default_rng(1)
  outcomes = [store_lib.QueryOutcome(bool(i % 2), float(c), 3, 100, 50)
              for i, c in enumerate(rng.uniform(1e-5, 1e-1, size=400))]
  want = method_lib.training_usage(outcomes)
  assert want["calls"] == 1200 and want["queries"] == 400
  for seed in range(10):
    shuffled = [outcomes[j] for j in np.random.default_rng(seed).permutation(len(outcomes))]
    assert method_lib.training_usage(shuffled) == want
