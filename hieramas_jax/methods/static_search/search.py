"""The oracle search: the best *static* configuration, found by successive halving (`static_search`'s fit).

A static configuration fixes everything HieraMAS chooses per query, once for all queries: for every
role of the benchmark, W proposer positions and a synthesizer position, each one of the setting's
models or skip (the learned policy's choice space, turned into a `MASConfig` by the same
`learn.policy.choices_to_config`, skip semantics included), and one DAG from a seeded graph pool
(`learn.graph_pool.make_pool`: random DAGs of every density + chain, star, full). Its value is the mean
system reward (`learn.rewards.system_reward` of solved and the query's total cost): the quantity
HieraMAS is trained on.

Why a search, and why this one. The space is huge (MMLU-Redux: 9^24 mixtures x graphs), evaluations
are noisy (one query's reward is either >= 0.5 or <= -1), and cheap ones are as informative as
expensive ones. Successive halving (Jamieson & Talwalkar, 2016; Li et al., Hyperband, 2017) spends
the budget where it discriminates: many candidates on a few items, the best fraction on more items,
up to the whole search split. Candidates come from three families, because uniform draws alone
almost never skip a role and the reward punishes cost hard (below a third of a cent per query every
call counts): `uniform` (each position uniform over models + skip, the `random_reward`
distribution), `sparse` (1..R active roles, 0..W proposers each), and `structured` (every single model
everywhere on chain / star / full, every model alone in every role, strong model with W proposers).
After each rung, mutants of the survivors (one or two positions or the graph changed) join the race,
so the search also climbs locally from what is already good.

The space and its candidate families are `space.py`, the evaluation store and scores `store.py`;
this module holds the schedule, the race and the whole search of one cell (`SearchConfig`).

Honesty rules: the search sees only the search split (the cell's train + val queries); the winner is
then measured on the test split by the runner like any other method (`methods/static_search/method.py`).
Everything is seeded; evaluations are cached per (configuration hash, item, sample index) in the
method's state directory, so a killed search resumes and a rerun costs nothing. Regret arithmetic and
its tables live in the report layer (`report/regret.py`).
"""

from __future__ import annotations

import dataclasses
import logging
import math
from typing import Any, Sequence

import numpy as np

from hieramas_jax.benchmarks.data import Item
from hieramas_jax.mas.runtime import RunSettings
from hieramas_jax.methods.static_search.space import (Candidate, OracleError, SearchSpace, config_key, describe, mutate,
                                                      sparse_candidate, structured_candidates, uniform_candidate)
from hieramas_jax.methods.static_search.store import ConfigScore, Evaluator, score_outcomes

log = logging.getLogger(__name__)

# Stream ids for numpy Generators seeded with [seed, stream, ...]: each use of randomness has its own
# stream, so adding draws to one never shifts another.
_STREAM_GRAPHS, _STREAM_CANDIDATES, _STREAM_MUTANTS, _STREAM_RANDOM, _STREAM_ORDER = 1, 2, 3, 4, 5


@dataclasses.dataclass(frozen=True)
class SearchPlan:
  """Successive halving schedule.

  A rung scores its configurations on rung_items[r] items (a growing prefix of the shuffled search
  split) x rung_samples[r] sample indices. Items grow first; once the whole split is in, the sample
  indices grow, so the last races are decided on several draws per item (a query's reward is
  either >= 0.5 or <= -1: a single draw is very noisy).

  Attributes:
    rung_items: items per rung.
    rung_samples: sample indices per rung (0..s-1).
    survivors: configurations entering each rung (before that rung's mutants).
    mutants: fresh mutants of the survivors joining each rung (0 at rung 0).
    initial_candidates: configurations drawn for rung 0 (structured ones included).
    planned_queries: new queries the schedule runs (a survivor reuses its earlier queries;
      configurations that coincide, or a resumed run's cache, make the real count lower).
  """

  rung_items: tuple[int, ...]
  rung_samples: tuple[int, ...]
  survivors: tuple[int, ...]
  mutants: tuple[int, ...]
  initial_candidates: int
  planned_queries: int

  def to_json(self) -> dict[str, Any]:
    return dataclasses.asdict(self)


def _schedule(initial: int, rungs: Sequence[tuple[int, int]], eta: float, mutant_share: float,
              min_finalists: int) -> tuple[list[int], list[int], int]:
  # Survivors already ran the previous rung's queries (cached): they pay only for the new ones.
  survivors, mutants, cost, alive, previous = [], [], 0, initial, 0
  for r, (n, s) in enumerate(rungs):
    extra = 0 if r == 0 else int(math.ceil(mutant_share * alive))
    survivors.append(alive)
    mutants.append(extra)
    cost += alive * (n * s - previous) + extra * n * s
    alive = min(alive + extra, max(min_finalists, int(math.ceil((alive + extra) / eta))))
    previous = n * s
  return survivors, mutants, cost


def plan_search(budget: int, num_search_items: int, *, min_items: int = 16, eta: float = 3.0,
                mutant_share: float = 0.5, min_candidates: int = 1, max_samples: int = 3,
                min_finalists: int = 4) -> SearchPlan:
  """The largest successive-halving schedule whose query count fits `budget`.

  Rungs use min_items, min_items*eta, ... items up to the whole search split, then 1 -> eta -> ...
  sample indices per item up to `max_samples`. Each rung keeps the best 1/eta of its configurations
  (never fewer than `min_finalists`); from rung 1 on, ceil(mutant_share * survivors) mutants join.
  The number of initial candidates is the largest that fits the budget.

  Raises:
    OracleError: when not even `min_candidates` fit (the structured candidates alone).
  """
  if num_search_items < 1:
    raise OracleError("the search split is empty")
  if min_items < 1 or eta <= 1.0 or mutant_share < 0 or max_samples < 1 or min_finalists < 1:
    raise OracleError(f"need min_items >= 1, eta > 1, mutant_share >= 0, max_samples >= 1, min_finalists >= 1 "
                      f"(got {min_items}, {eta}, {mutant_share}, {max_samples}, {min_finalists})")
  rungs = []
  n = min(min_items, num_search_items)
  while n < num_search_items:
    rungs.append((n, 1))
    n = int(math.ceil(n * eta))
  rungs.append((num_search_items, 1))
  samples = 1
  while samples < max_samples:
    samples = min(max_samples, int(math.ceil(samples * eta)))
    rungs.append((num_search_items, samples))

  def cost(c):
    return _schedule(c, rungs, eta, mutant_share, min_finalists)[2]

  if cost(min_candidates) > budget:
    raise OracleError(f"search budget {budget} queries is too small: {min_candidates} candidates over rungs "
                      f"(items, samples) {rungs} need {cost(min_candidates)}")
  lo, hi = min_candidates, min_candidates
  while cost(hi * 2) <= budget:
    hi *= 2
  hi *= 2
  while hi - lo > 1:  # the largest c with cost(c) <= budget
    mid = (lo + hi) // 2
    lo, hi = (mid, hi) if cost(mid) <= budget else (lo, mid)
  survivors, mutants, planned = _schedule(lo, rungs, eta, mutant_share, min_finalists)
  return SearchPlan(tuple(n for n, _ in rungs), tuple(s for _, s in rungs), tuple(survivors), tuple(mutants),
                    lo, planned)


@dataclasses.dataclass
class RungRecord:
  items: int
  samples: int
  configurations: int
  best_key: str
  best_reward: float
  median_reward: float

  def to_json(self) -> dict[str, Any]:
    return dataclasses.asdict(self)


@dataclasses.dataclass
class SearchResult:
  """The search's outcome.

  Attributes:
    best: the winning candidate; best_key its configuration key.
    best_score: its score on the whole search split.
    leaderboard: the final rung, best first: (key, family, score).
    finalists: the final rung's candidates, in leaderboard order.
    rungs: one record per rung.
    configurations_searched: distinct configurations (by key) evaluated on at least one item.
    family_counts: configurations searched per family.
    queries: distinct (configuration, item, sample) queries the search scored (cached or not).
  """

  best: Candidate
  best_key: str
  best_score: ConfigScore
  leaderboard: list[tuple[str, str, ConfigScore]]
  finalists: list[Candidate]
  rungs: list[RungRecord]
  configurations_searched: int
  family_counts: dict[str, int]
  queries: int


def initial_candidates(space: SearchSpace, settings: RunSettings, count: int, seed: int, *,
                       sparse_share: float = 0.5) -> list[Candidate]:
  """`count` distinct configurations: the structured ones first, then seeded uniform and sparse draws.

  Raises:
    OracleError: if `count` is below the number of structured candidates.
  """
  structured = structured_candidates(space)
  out, seen = [], set()
  for c in structured:
    key = config_key(c.to_mas(space), settings)
    if key not in seen:
      seen.add(key)
      out.append(c)
  if count < len(out):
    raise OracleError(f"{count} candidates cannot hold the {len(out)} structured ones: raise the budget")
  rng = np.random.default_rng([seed, _STREAM_CANDIDATES])
  attempts = 0
  while len(out) < count:
    attempts += 1
    if attempts > 100 * count:
      raise OracleError(f"could not draw {count} distinct configurations (space too small?)")
    c = sparse_candidate(space, rng) if rng.random() < sparse_share else uniform_candidate(space, rng)
    key = config_key(c.to_mas(space), settings)
    if key not in seen:
      seen.add(key)
      out.append(c)
  return out


def _rank(scored: Sequence[tuple[Candidate, str, ConfigScore]]) -> list[tuple[Candidate, str, ConfigScore]]:
  # Ties broken by key, so the ranking (and the whole search) is a pure function of the outcomes.
  return sorted(scored, key=lambda t: (-t[2].mean_reward, t[1]))


async def successive_halving(space: SearchSpace, evaluator: Evaluator, items: Sequence[Item], plan: SearchPlan,
                             *, seed: int, sparse_share: float = 0.5) -> SearchResult:
  """Races configurations on growing prefixes of `items` (already shuffled), keeping the best 1/eta.

  Args:
    space: the configuration space.
    evaluator: runs and caches queries.
    items: the search split (never the test split), in the order rungs take their prefixes.
    plan: from `plan_search`.
    seed: draws of candidates and mutants.
    sparse_share: share of random candidates drawn from the sparse family (the rest uniform).
  """
  if len(items) != plan.rung_items[-1]:
    raise OracleError(f"plan ends at {plan.rung_items[-1]} items but the search split has {len(items)}")
  settings = evaluator.settings
  alive = initial_candidates(space, settings, plan.initial_candidates, seed, sparse_share=sparse_share)
  seen = {config_key(c.to_mas(space), settings): c.family for c in alive}
  mutant_rng = np.random.default_rng([seed, _STREAM_MUTANTS])
  rungs, queries, ranked = [], set(), []
  for r, (n, num_samples) in enumerate(zip(plan.rung_items, plan.rung_samples)):
    if r > 0:
      keep = plan.survivors[r]
      alive = [c for c, _, _ in ranked[:keep]]
      parents = list(alive)
      added, attempts = 0, 0
      while added < plan.mutants[r] and attempts < 100 * max(1, plan.mutants[r]):
        attempts += 1
        # The better of two uniformly drawn ranks: good survivors are mutated more often.
        parent = parents[min(int(mutant_rng.integers(len(parents))), int(mutant_rng.integers(len(parents))))]
        child = mutate(parent, space, mutant_rng)
        key = config_key(child.to_mas(space), settings)
        if key in seen:
          continue
        seen[key] = child.family
        alive.append(child)
        added += 1
    subset, samples = items[:n], tuple(range(num_samples))
    configs = [c.to_mas(space) for c in alive]
    scores = await evaluator.evaluate_many([(cfg, subset, samples) for cfg in configs],
                                           desc=f"{space.benchmark} rung {r} ({len(alive)} x {n} x {num_samples})")
    keys = [evaluator.key(cfg) for cfg in configs]
    queries.update((k, it.id, s) for k in keys for it in subset for s in samples)
    ranked = _rank(list(zip(alive, keys, scores)))
    rungs.append(RungRecord(n, num_samples, len(alive), ranked[0][1], ranked[0][2].mean_reward,
                            float(np.median([s.mean_reward for _, _, s in ranked]))))
    log.info("%s rung %d: %d configurations x %d items x %d samples, best %.4f (%s)", space.benchmark, r,
             len(alive), n, num_samples, ranked[0][2].mean_reward, ranked[0][0].family)
  families: dict[str, int] = {}
  for fam in seen.values():
    fam = fam.split(":")[0]
    families[fam] = families.get(fam, 0) + 1
  best, best_key, best_score = ranked[0]
  return SearchResult(best, best_key, best_score, [(k, c.family, s) for c, k, s in ranked],
                      [c for c, _, _ in ranked], rungs,
                      len(seen), families, len(queries))


async def random_configurations_reward(space: SearchSpace, evaluator: Evaluator, items: Sequence[Item], *,
                                       draws_per_item: int, seed: int) -> tuple[ConfigScore, int]:
  """Mean system reward of uniformly random configurations on `items`.

  Each (item, draw) gets its own uniform configuration, so the estimate averages over
  len(items) * draws_per_item configurations (an unbiased estimate of E_config E_item reward with
  far less noise than a few configurations on every item).

  Returns:
    (score over all draws, number of distinct configurations drawn).
  """
  if draws_per_item < 1:
    raise OracleError(f"draws_per_item must be >= 1, got {draws_per_item}")
  jobs, keys = [], set()
  for i, item in enumerate(items):
    for d in range(draws_per_item):
      rng = np.random.default_rng([seed, _STREAM_RANDOM, i, d])
      config = uniform_candidate(space, rng).to_mas(space)
      keys.add(evaluator.key(config))
      jobs.append((config, [item], (0,)))
  await evaluator.evaluate_many(jobs, desc=f"{space.benchmark} random configurations")
  outcomes = [evaluator.store.get(evaluator.key(c), its[0].id, 0) for c, its, _ in jobs]
  return score_outcomes(outcomes, [its[0].id for _, its, _ in jobs]), len(keys)


def shuffled(items: Sequence[Item], seed: int) -> list[Item]:
  """A seeded order of the search split: rung r takes the first rung_items[r] of it."""
  order = np.random.default_rng([seed, _STREAM_ORDER]).permutation(len(items))
  return [items[i] for i in order]


@dataclasses.dataclass(frozen=True)
class SearchConfig:
  """What one search does (the `static_search` method's options).

  Attributes:
    budget: search queries (configuration x item) allowed on the search split.
    num_proposers: W.
    num_random_graphs: random DAGs in the graph pool (plus chain, star, full).
    max_search_items: the search uses a seeded random subset of at most this many search-split items
      (the last rungs' cost grows with it).
    min_items, eta, max_search_samples, min_finalists, mutant_share, sparse_share: the
      successive-halving schedule (see `plan_search`) and the candidate mix.
    holdout_share: share of the search subset held out of the race; the race's best
      `holdout_finalists` are re-ranked on it alone. The race overfits its own items (mutants of a
      lucky configuration share its luck: a model's correctness on an item is mostly persistent), so
      the final choice is made on items the race never saw. 0: no holdout (the race's best wins).
  """

  budget: int = 8000
  num_proposers: int = 2
  num_random_graphs: int = 30
  max_search_items: int = 200
  min_items: int = 8
  eta: float = 3.0
  max_search_samples: int = 1
  min_finalists: int = 3
  mutant_share: float = 0.5
  sparse_share: float = 0.5
  holdout_share: float = 1 / 3
  holdout_finalists: int = 5

  def __post_init__(self):
    if not 0.0 <= self.holdout_share < 1.0:
      raise OracleError(f"holdout_share must be in [0, 1), got {self.holdout_share}")
    if self.holdout_finalists < 1:
      raise OracleError(f"holdout_finalists must be >= 1, got {self.holdout_finalists}")
    if self.budget < 1:
      raise OracleError(f"budget must be >= 1, got {self.budget}")
    if self.max_search_items < 1:
      raise OracleError(f"max_search_items must be >= 1, got {self.max_search_items}")
    if self.num_proposers < 0:
      raise OracleError(f"num_proposers must be >= 0, got {self.num_proposers}")


async def run_search(config: SearchConfig, space: SearchSpace, evaluator: Evaluator, search_items: Sequence[Item],
                     seed: int) -> tuple[Candidate, dict[str, Any]]:
  """Successive halving on a seeded subset of `search_items`, the finalists re-ranked on a holdout.

  Returns:
    (the winning candidate, the search's JSON record: plan, rungs, leaderboards, what was searched).
  """
  if not search_items:
    raise OracleError(f"{space.benchmark}: the search split is empty")
  order = shuffled(search_items, seed)[:config.max_search_items]
  num_holdout = int(round(config.holdout_share * len(order)))
  race, holdout = order[:len(order) - num_holdout], order[len(order) - num_holdout:]
  plan = plan_search(config.budget, len(race), min_items=config.min_items, eta=config.eta,
                     mutant_share=config.mutant_share, min_candidates=len(structured_candidates(space)),
                     max_samples=config.max_search_samples, min_finalists=config.min_finalists)
  result = await successive_halving(space, evaluator, race, plan, seed=seed, sparse_share=config.sparse_share)
  best, best_key = result.best, result.best_key
  holdout_board = []
  if holdout:
    finalists = result.finalists[:config.holdout_finalists]
    configs = [c.to_mas(space) for c in finalists]
    scores = await evaluator.evaluate_many([(cfg, holdout, (0,)) for cfg in configs],
                                           desc=f"{space.benchmark} finalists on the holdout")
    ranked = _rank([(c, evaluator.key(cfg), s) for c, cfg, s in zip(finalists, configs, scores)])
    best, best_key = ranked[0][0], ranked[0][1]
    race_scores = {k: s for k, _, s in result.leaderboard}
    holdout_board = [{"key": k, "family": c.family, "holdout": s.to_json(), "race": race_scores[k].to_json()}
                     for c, k, s in ranked]
  record = {
      "configuration": {"key": best_key, **describe(best, space)},
      "race_score": next(s.to_json() for k, _, s in result.leaderboard if k == best_key),
      "finalists_on_holdout": holdout_board, "race_items": len(race), "holdout_items": len(holdout),
      "configurations_searched": result.configurations_searched,
      "configurations_by_family": result.family_counts, "search_queries": result.queries,
      "race_top": [{"key": k, "family": f, **s.to_json()} for k, f, s in result.leaderboard[:5]],
      "plan": plan.to_json(), "rungs": [r.to_json() for r in result.rungs],
      "search_items": len(order), "search_split_items": len(search_items),
      "space": {"roles": list(space.roles), "models": list(space.models), "decision_model": space.decision_model,
                "num_proposers": space.num_proposers, "graphs": len(space.graphs)},
  }
  return best, record
