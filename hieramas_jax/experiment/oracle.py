"""Oracle and regret on the simulated pool: the best *static* configuration, found by search.

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

Honesty rules: the search sees only the search split (train + val); the winner is then measured on
the test split, several sample indices per item to cut the measurement noise (the sim draws a fresh
outcome per sample index; every index is a legitimate run of the same configuration). Random
configurations are measured on the test split too. Everything is seeded; evaluations are cached per
(configuration hash, item, sample index) in the run directory, so a killed run resumes and a rerun
costs nothing.
"""

from __future__ import annotations

import asyncio
import dataclasses
import hashlib
import json
import logging
import math
import os
import pathlib
from typing import Any, Callable, Mapping, Protocol, Sequence

import numpy as np
from tqdm.auto import tqdm

from hieramas_jax.aio import gather_or_cancel
from hieramas_jax.benchmarks import graders
from hieramas_jax.benchmarks.data import Item
from hieramas_jax.experiment.provenance import atomic_write_text
from hieramas_jax.learn.graph_pool import KIND_NAMES, make_pool
from hieramas_jax.learn.policy import choices_to_config
from hieramas_jax.learn.rewards import system_reward
from hieramas_jax.llm.registry import PoolSetting, get_model
from hieramas_jax.mas import roles as roles_lib
from hieramas_jax.mas.config import MASConfig
from hieramas_jax.mas.runtime import ChatClient, RunSettings, run_mas

log = logging.getLogger(__name__)

EVALUATIONS_FILE = "evaluations.jsonl"
CONFIGS_FILE = "configs.jsonl"

# Stream ids for numpy Generators seeded with [seed, stream, ...]: each use of randomness has its own
# stream, so adding draws to one never shifts another.
_STREAM_GRAPHS, _STREAM_CANDIDATES, _STREAM_MUTANTS, _STREAM_RANDOM, _STREAM_ORDER = 1, 2, 3, 4, 5


class OracleError(ValueError):
  """An oracle request that cannot run (budget too small, empty split, bad sizes...)."""


# ---------------------------------------------------------------------------------------------------
# The configuration space.


@dataclasses.dataclass(frozen=True, eq=False)
class SearchSpace:
  """Everything a static configuration may choose, for one benchmark and pool setting.

  Attributes:
    benchmark: the benchmark (fixes the role set).
    roles: the benchmark's roles, in order (one supernode each).
    models: the setting's pool; choice index len(models) is skip.
    decision_model: the final decision node's model (the setting's strong backbone, as in HieraMAS).
    num_proposers: W, proposer positions per supernode.
    graphs: [G, R, R] bool candidate DAGs over the roles.
    graph_kinds: G names ("random", "chain", "star", "full").
  """

  benchmark: str
  roles: tuple[str, ...]
  models: tuple[str, ...]
  decision_model: str
  num_proposers: int
  graphs: np.ndarray
  graph_kinds: tuple[str, ...]

  @classmethod
  def make(cls, benchmark: str, pool: PoolSetting, *, num_proposers: int = 2, graph_seed: int = 0,
           num_random_graphs: int = 30) -> "SearchSpace":
    """The space of `benchmark` in the `pool` setting, graphs from `make_pool(graph_seed, ...)`."""
    if num_proposers < 0:
      raise OracleError(f"num_proposers must be >= 0, got {num_proposers}")
    role_names = roles_lib.roles_for(benchmark)
    graph_pool = make_pool(graph_seed, len(role_names), num_random_graphs)
    return cls(benchmark, tuple(role_names), tuple(pool.models), pool.strong, num_proposers,
               np.asarray(graph_pool.adjacency, bool), tuple(KIND_NAMES[k] for k in graph_pool.kind))

  @property
  def skip(self) -> int:
    return len(self.models)

  @property
  def num_positions(self) -> int:
    return self.num_proposers + 1

  def graph_index(self, kind: str) -> int:
    """The first graph of a kind ("chain", "star", "full")."""
    try:
      return self.graph_kinds.index(kind)
    except ValueError:
      raise OracleError(f"no {kind!r} graph in the pool; kinds: {sorted(set(self.graph_kinds))}") from None


@dataclasses.dataclass(frozen=True, eq=False)
class Candidate:
  """One static configuration in the policy's terms.

  Attributes:
    choices: [R, W + 1] int, model index per position (synthesizer last); space.skip = skip.
    graph: index into space.graphs.
    family: where it came from ("uniform", "sparse", "structured:...", "mutant") - bookkeeping only,
      not part of its identity.
  """

  choices: np.ndarray
  graph: int
  family: str

  def to_mas(self, space: SearchSpace) -> MASConfig:
    config, _ = choices_to_config(self.choices, space.roles, space.models, space.graphs[self.graph],
                                  space.decision_model)
    return config


def config_key(config: MASConfig, settings: RunSettings) -> str:
  """Identity of what actually runs: the effective MASConfig (after skips) plus sampling settings.

  Two candidates that differ only in a skipped role's proposers or in edges touching a skipped
  role run the same system; they share one key, one cache entry and count once as searched.
  """
  blob = json.dumps({"config": config.to_json(), "settings": dataclasses.asdict(settings)}, sort_keys=True)
  return hashlib.sha256(blob.encode()).hexdigest()[:20]


def _graph_choice(space: SearchSpace, rng: np.random.Generator) -> int:
  return int(rng.integers(len(space.graphs)))


def uniform_candidate(space: SearchSpace, rng: np.random.Generator) -> Candidate:
  """Every position uniform over the pool's models and skip; a graph uniform over the pool.

  This is the distribution `random_reward` averages over (what an untrained, uniform policy picks).
  """
  choices = rng.integers(0, space.skip + 1, size=(len(space.roles), space.num_positions))
  return Candidate(choices, _graph_choice(space, rng), "uniform")


def sparse_candidate(space: SearchSpace, rng: np.random.Generator) -> Candidate:
  """1..R active roles, 0..W proposers in each, models uniform: the cheap corner uniform draws miss."""
  num_roles = len(space.roles)
  choices = np.full((num_roles, space.num_positions), space.skip)
  active = rng.choice(num_roles, size=int(rng.integers(1, num_roles + 1)), replace=False)
  for r in active:
    choices[r, -1] = rng.integers(space.skip)
    num_prop = int(rng.integers(0, space.num_proposers + 1))
    choices[r, :num_prop] = rng.integers(0, space.skip, size=num_prop)
  return Candidate(choices, _graph_choice(space, rng), "sparse")


def structured_candidates(space: SearchSpace) -> list[Candidate]:
  """Hand-picked corners: each model everywhere (chain / star / full), each model alone in each role,
  each model as a one-role mixture (W proposers + synthesizer). The strongest and the cheapest model
  everywhere are among them."""
  num_roles, positions = len(space.roles), space.num_positions
  out = []
  for m, name in enumerate(space.models):
    for kind in ("chain", "star", "full"):
      out.append(Candidate(np.full((num_roles, positions), m), space.graph_index(kind),
                           f"structured:{name}-everywhere-{kind}"))
  for m, name in enumerate(space.models):
    for r, role in enumerate(space.roles):
      solo = np.full((num_roles, positions), space.skip)
      solo[r, -1] = m
      out.append(Candidate(solo, space.graph_index("chain"), f"structured:{name}-alone-{role}"))
    mixture = np.full((num_roles, positions), space.skip)
    mixture[0, :] = m
    out.append(Candidate(mixture, space.graph_index("chain"), f"structured:{name}-moa-{space.roles[0]}"))
  return out


def mutate(candidate: Candidate, space: SearchSpace, rng: np.random.Generator) -> Candidate:
  """A neighbour: one or two positions redrawn (models or skip), or another graph from the pool."""
  choices = np.array(candidate.choices, copy=True)
  graph = candidate.graph
  if rng.random() < 0.25 and len(space.graphs) > 1:
    graph = int(rng.integers(len(space.graphs) - 1))
    graph += graph >= candidate.graph  # a different one
  else:
    for _ in range(int(rng.integers(1, 3))):
      r, p = int(rng.integers(len(space.roles))), int(rng.integers(space.num_positions))
      choices[r, p] = rng.integers(space.skip + 1)
  return Candidate(choices, graph, "mutant")


# ---------------------------------------------------------------------------------------------------
# Evaluating a configuration.


@dataclasses.dataclass(frozen=True)
class QueryOutcome:
  """One query of one configuration: graded, with its total cost (every call, decision included)."""

  correct: bool
  cost_usd: float
  n_calls: int


class QueryRunner(Protocol):
  """Runs one configuration on one item; the real one goes through the MAS runtime and the graders."""

  async def __call__(self, config: MASConfig, item: Item, sample_index: int) -> QueryOutcome:
    ...


class _SampleIndexClient:
  """Sends every call of a query with one sample index (the OpenAI `seed`).

  `run_mas` calls with small sample indices (0, or k for a model's k-th seat in a node); sample s > 0
  of a query shifts them all by s * STRIDE. Another sample is another legitimate run of the same
  system (a real endpoint samples afresh; the sim draws afresh).
  """

  STRIDE = 1000  # the runtime's own indices (a model's k-th seat in a node) stay below this

  def __init__(self, client: ChatClient, sample_index: int):
    self._client, self._offset = client, sample_index * self.STRIDE

  async def chat(self, model, messages, *, temperature, max_tokens, sample_index=0):
    return await self._client.chat(model, messages, temperature=temperature, max_tokens=max_tokens,
                                   sample_index=self._offset + sample_index)


class MASQueryRunner:
  """The real runner: `run_mas` over the client, then the benchmark's real grader."""

  def __init__(self, client: ChatClient, settings: RunSettings = RunSettings()):
    self.client, self.settings = client, settings

  async def __call__(self, config: MASConfig, item: Item, sample_index: int) -> QueryOutcome:
    client = self.client if sample_index == 0 else _SampleIndexClient(self.client, sample_index)
    trace = await run_mas(client, item, config, self.settings, method="oracle")
    grade = await graders.grade_async(item, trace.final_text)
    return QueryOutcome(bool(grade.correct), float(trace.cost_usd), trace.n_calls)


class EvaluationStore:
  """Per-query outcomes keyed by (configuration key, item id, sample index), appended to a JSONL file.

  The file is the resume point: every finished query is one flushed line, a line torn by a kill can
  only be the last one and is dropped on load. `path=None` keeps everything in memory (tests).
  """

  def __init__(self, path: str | os.PathLike | None = None):
    self.path = pathlib.Path(path) if path is not None else None
    self._data: dict[tuple[str, str, int], QueryOutcome] = {}
    self._f = None
    if self.path is None:
      return
    self.path.parent.mkdir(parents=True, exist_ok=True)
    if self.path.exists():
      good, torn = [], False
      for line in self.path.read_text(encoding="utf-8").splitlines():
        if not line.strip():
          continue
        try:
          rec = json.loads(line)
          self._data[(rec["config"], rec["item"], int(rec["sample"]))] = QueryOutcome(
              bool(rec["correct"]), float(rec["cost_usd"]), int(rec["n_calls"]))
          good.append(line)
        except (json.JSONDecodeError, KeyError, TypeError, ValueError):
          torn = True
      if torn:
        log.warning("%s: dropped a torn line left by an interrupted run", self.path)
        atomic_write_text(self.path, "".join(l + "\n" for l in good))
    self._f = open(self.path, "a", encoding="utf-8")

  def __len__(self) -> int:
    return len(self._data)

  def get(self, key: str, item_id: str, sample_index: int) -> QueryOutcome | None:
    return self._data.get((key, item_id, sample_index))

  def put(self, key: str, item_id: str, sample_index: int, outcome: QueryOutcome) -> None:
    self._data[(key, item_id, sample_index)] = outcome
    if self._f is not None:
      self._f.write(json.dumps({"config": key, "item": item_id, "sample": sample_index,
                                **dataclasses.asdict(outcome)}) + "\n")
      self._f.flush()

  def close(self) -> None:
    if self._f is not None:
      self._f.close()
      self._f = None


@dataclasses.dataclass(frozen=True)
class ConfigScore:
  """A configuration's value on a set of queries (items x sample indices).

  Attributes:
    mean_reward: mean system reward per query (the quantity searched for).
    stderr: standard error of that mean, clustered by item: queries of one item (several sample
      indices, or several random configurations) are correlated, because a model's correctness on an
      item is largely persistent, so the per-item means are the independent units.
    accuracy: share of queries solved, in [0, 1].
    cost_usd: mean USD per query.
    n: number of queries.
    items: number of distinct items.
  """

  mean_reward: float
  stderr: float
  accuracy: float
  cost_usd: float
  n: int
  items: int

  def to_json(self) -> dict[str, Any]:
    return dataclasses.asdict(self)


def score_outcomes(outcomes: Sequence[QueryOutcome], item_ids: Sequence[str] | None = None) -> ConfigScore:
  """Mean system reward, its standard error, accuracy and mean cost of a list of query outcomes.

  Args:
    outcomes: the queries.
    item_ids: the item of each query, for the clustered standard error (None: every query its own item).
  """
  if not outcomes:
    raise OracleError("cannot score zero queries")
  if item_ids is not None and len(item_ids) != len(outcomes):
    raise OracleError(f"{len(item_ids)} item ids for {len(outcomes)} outcomes")
  n = len(outcomes)
  # Padded to a power-of-two length: jnp ops compile once per shape, and rung sizes vary freely.
  size = max(64, 1 << (n - 1).bit_length())
  solved = np.zeros(size, bool)
  cost = np.zeros(size, np.float64)
  solved[:n] = [o.correct for o in outcomes]
  cost[:n] = [o.cost_usd for o in outcomes]
  rewards = np.asarray(system_reward(solved, cost), np.float64)[:n]
  solved = solved[:n]
  cost = cost[:n]
  groups: dict[str, list[float]] = {}
  for i, r in zip(item_ids if item_ids is not None else [str(i) for i in range(n)], rewards):
    groups.setdefault(i, []).append(float(r))
  per_item = np.array([np.mean(v) for v in groups.values()])
  stderr = float(per_item.std(ddof=1) / math.sqrt(len(per_item))) if len(per_item) > 1 else float("nan")
  return ConfigScore(float(rewards.mean()), stderr, float(solved.mean()), float(cost.mean()), n, len(per_item))


class Evaluator:
  """Runs (configuration, item, sample index) queries through a runner, once each, under one bound.

  Attributes:
    runner: the query runner (MASQueryRunner against the sim; a fake in tests).
    store: where outcomes are cached (and resumed from).
    settings: part of every configuration key.
    bound: the one global bound on queries in flight (grading included).
    progress: show a progress bar per batch.
    queries_run: queries actually executed by this process (cache misses).
  """

  def __init__(self, runner: QueryRunner, store: EvaluationStore, *, settings: RunSettings = RunSettings(),
               max_queries: int = 64, progress: bool = False):
    if max_queries < 1:
      raise OracleError(f"max_queries must be >= 1, got {max_queries}")
    self.runner, self.store, self.settings, self.progress = runner, store, settings, progress
    self.max_queries = max_queries
    self.queries_run = 0

  def key(self, config: MASConfig) -> str:
    return config_key(config, self.settings)

  async def evaluate_many(self, jobs: Sequence[tuple[MASConfig, Sequence[Item], Sequence[int]]], *,
                          desc: str = "queries") -> list[ConfigScore]:
    """Scores of several configurations, all their missing queries run concurrently under the bound.

    Args:
      jobs: (config, items, sample indices) per configuration; its score averages items x samples.
      desc: the progress bar's label.
    """
    bound = asyncio.Semaphore(self.max_queries)
    keyed = [(self.key(c), c, items, samples) for c, items, samples in jobs]
    todo: dict[tuple[str, str, int], tuple[MASConfig, Item]] = {}
    total = 0
    for key, config, items, samples in keyed:
      for it in items:
        for s in samples:
          total += 1
          if self.store.get(key, it.id, s) is None:
            todo[(key, it.id, s)] = (config, it)
    bar = tqdm(total=total, initial=total - len(todo), desc=desc, disable=not self.progress,
               dynamic_ncols=True, leave=False)

    async def one(key: str, sample_index: int, config: MASConfig, item: Item) -> None:
      async with bound:
        outcome = await self.runner(config, item, sample_index)
      self.store.put(key, item.id, sample_index, outcome)
      self.queries_run += 1
      bar.update(1)

    try:
      await gather_or_cancel([asyncio.ensure_future(one(k, s, c, it)) for (k, _, s), (c, it) in todo.items()])
    finally:
      bar.close()
    return [score_outcomes([self.store.get(key, it.id, s) for it in items for s in samples],
                           [it.id for it in items for _ in samples])
            for key, _, items, samples in keyed]

  async def evaluate(self, config: MASConfig, items: Sequence[Item], sample_indices: Sequence[int] = (0,),
                     *, desc: str = "queries") -> ConfigScore:
    return (await self.evaluate_many([(config, items, sample_indices)], desc=desc))[0]


async def evaluate_configuration(client: ChatClient, items: Sequence[Item], config: MASConfig, *,
                                 settings: RunSettings = RunSettings(), sample_indices: Sequence[int] = (0,),
                                 max_queries: int = 64, store: EvaluationStore | None = None,
                                 progress: bool = False) -> ConfigScore:
  """Runs one static configuration on every item (and sample index) and scores it.

  Args:
    client: the run's LLMClient (the sim, or anything with the same `chat`).
    items: the queries.
    config: the same MASConfig for every query.
    settings: sampling and wiring settings of the MAS.
    sample_indices: repeat each item under these sample indices (more samples, less noise).
    max_queries: the global bound on queries in flight.
    store: cache of outcomes (None: in memory, nothing reused).
    progress: progress bar.

  Returns:
    mean system reward (utility minus cost, learn/rewards.system_reward), accuracy, mean cost, n.
  """
  evaluator = Evaluator(MASQueryRunner(client, settings), store or EvaluationStore(), settings=settings,
                        max_queries=max_queries, progress=progress)
  return await evaluator.evaluate(config, items, sample_indices)


# ---------------------------------------------------------------------------------------------------
# The search.


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


# ---------------------------------------------------------------------------------------------------
# Regret and the learned system's result.


def regret_stderr(oracle: float, learned: float, random: float, se_oracle: float, se_learned: float,
                  se_random: float) -> float:
  """Delta-method standard error of (O - L) / (O - R), treating the three means as independent.

  They are measured on the same test items, so their errors are positively correlated and this is
  conservative for the numerator; it is a scale for reading a regret, not an exact interval.
  """
  gap = oracle - random
  d_oracle = (learned - random) / gap**2
  d_learned = -1.0 / gap
  d_random = (oracle - learned) / gap**2
  return float(math.sqrt((d_oracle * se_oracle)**2 + (d_learned * se_learned)**2 + (d_random * se_random)**2))


def learned_stderr(path: str | os.PathLike) -> float | None:
  """Item-level standard error of the learned system's mean reward, from its run directory's
  items.jsonl (correct, cost_usd per test query); None when that file is not there."""
  try:
    run_dir = json.loads(pathlib.Path(path).read_text()).get("run_dir")
  except (OSError, json.JSONDecodeError):
    return None
  items = pathlib.Path(run_dir) / "items.jsonl" if isinstance(run_dir, str) else None
  if items is None or not items.exists():
    return None
  outcomes, ids = [], []
  for line in items.read_text().splitlines():
    try:
      rec = json.loads(line)
      outcomes.append(QueryOutcome(bool(rec["correct"]), float(rec["cost_usd"]), int(rec.get("n_calls", 0))))
      ids.append(str(rec["item_id"]))
    except (json.JSONDecodeError, KeyError, TypeError, ValueError):
      continue
  return score_outcomes(outcomes, ids).stderr if len(outcomes) > 1 else None


def regret(oracle: float, learned: float | None, random: float) -> tuple[float | None, str | None]:
  """(oracle - learned) / (oracle - random): the share of the gain over random that learning missed.

  Returns:
    (regret, None) or (None, reason) when it is undefined: no learned result, or an oracle that does
    not beat random (the ratio would be meaningless).
  """
  if learned is None:
    return None, "no learned result"
  gap = oracle - random
  if not gap > 0:
    return None, f"oracle ({oracle:.4f}) does not beat random ({random:.4f}): regret undefined"
  return (oracle - learned) / gap, None


LEARNED_REWARD_KEYS = ("mean_system_reward", "test_mean_system_reward", "system_reward", "mean_reward")


def read_learned_reward(path: str | os.PathLike) -> tuple[float | None, str | None, str | None]:
  """The trained HieraMAS mean system reward on the test split, from its results file.

  Looks for one of LEARNED_REWARD_KEYS at the top level or under "test" / "metrics" / "summary".

  Returns:
    (value, key path used, None) or (None, None, reason).
  """
  path = pathlib.Path(path)
  if not path.exists():
    return None, None, f"{path.name} not found (train HieraMAS first: experiments/train_hieramas.py)"
  try:
    data = json.loads(path.read_text())
  except json.JSONDecodeError as e:
    return None, None, f"{path.name} is not valid JSON: {e}"
  for scope in (None, "test", "metrics", "summary"):
    node = data if scope is None else data.get(scope)
    if not isinstance(node, Mapping):
      continue
    for k in LEARNED_REWARD_KEYS:
      v = node.get(k)
      if isinstance(v, (int, float)) and not isinstance(v, bool) and math.isfinite(v):
        return float(v), k if scope is None else f"{scope}.{k}", None
  return None, None, f"{path.name} has no mean system reward under any of {LEARNED_REWARD_KEYS}"


# ---------------------------------------------------------------------------------------------------
# One benchmark end to end.


@dataclasses.dataclass(frozen=True)
class OracleSpec:
  """What one oracle run does, for one benchmark and pool setting.

  Attributes:
    benchmark, pool: where.
    seed: graph pool, candidate draws, mutants, split order and random configurations.
    budget: search queries (configuration x item) allowed on the search split.
    num_proposers: W.
    num_random_graphs: random DAGs in the graph pool (plus chain, star, full).
    max_search_items: the search uses a seeded random subset of at most this many search-split items
      (MMLU-Redux's train + val has 2,474; the last rungs' cost grows with it).
    min_items, eta, max_search_samples, min_finalists, mutant_share, sparse_share: the
      successive-halving schedule (see `plan_search`) and the candidate mix.
    test_samples: sample indices 0..S-1 the winner runs on the test split.
    random_draws_per_item: random configurations per test item for random_reward.
    holdout_share: share of the search subset held out of the race; the race's best
      `holdout_finalists` are re-ranked on it alone. The race overfits its own items (mutants of a
      lucky configuration share its luck: a model's correctness on an item is mostly persistent), so
      the final choice is made on items the race never saw. 0: no holdout (the race's best wins).
  """

  benchmark: str
  pool: str
  seed: int = 0
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
  test_samples: int = 4
  random_draws_per_item: int = 4
  holdout_share: float = 1 / 3
  holdout_finalists: int = 5

  def __post_init__(self):
    if not 0.0 <= self.holdout_share < 1.0:
      raise OracleError(f"holdout_share must be in [0, 1), got {self.holdout_share}")
    if self.holdout_finalists < 1:
      raise OracleError(f"holdout_finalists must be >= 1, got {self.holdout_finalists}")
    if self.test_samples < 1:
      raise OracleError(f"test_samples must be >= 1, got {self.test_samples}")
    if self.random_draws_per_item < 1:
      raise OracleError(f"random_draws_per_item must be >= 1, got {self.random_draws_per_item}")
    if self.budget < 1:
      raise OracleError(f"budget must be >= 1, got {self.budget}")
    if self.max_search_items < 1:
      raise OracleError(f"max_search_items must be >= 1, got {self.max_search_items}")


def describe(candidate: Candidate, space: SearchSpace) -> dict[str, Any]:
  """The configuration as a reader wants it: per role proposers + synthesizer (or skipped), the edges
  between active roles, the decision model, and its cost per 1M tokens as a hint."""
  config = candidate.to_mas(space)
  names = list(space.models) + ["skip"]
  per_role = {}
  for r, role in enumerate(space.roles):
    synth = names[candidate.choices[r, -1]]
    per_role[role] = ("skipped" if synth == "skip" else
                      {"proposers": [names[c] for c in candidate.choices[r, :-1] if c != space.skip],
                       "synthesizer": synth})
  return {"family": candidate.family, "graph_kind": space.graph_kinds[candidate.graph],
          "graph_index": int(candidate.graph), "roles": per_role, "mas_config": config.to_json(),
          "calls_per_query": sum(len(n.models) for n in config.nodes) + 1,
          "models_used": sorted({m for n in config.nodes for m in n.models} | {config.decision_model},
                                key=lambda m: get_model(m).price_out)}


async def run_oracle(spec: OracleSpec, evaluator: Evaluator, search_items: Sequence[Item],
                     test_items: Sequence[Item], pool: PoolSetting) -> dict[str, Any]:
  """Search on `search_items`, then measure the winner and random configurations on `test_items`.

  Returns the JSON record of one benchmark (without learned reward, regret and provenance, which the
  caller adds).
  """
  if not test_items:
    raise OracleError(f"{spec.benchmark}: the test split is empty")
  space = SearchSpace.make(spec.benchmark, pool, num_proposers=spec.num_proposers, graph_seed=spec.seed,
                           num_random_graphs=spec.num_random_graphs)
  order = shuffled(search_items, spec.seed)[:spec.max_search_items]
  num_holdout = int(round(spec.holdout_share * len(order)))
  race, holdout = order[:len(order) - num_holdout], order[len(order) - num_holdout:]
  plan = plan_search(spec.budget, len(race), min_items=spec.min_items, eta=spec.eta,
                     mutant_share=spec.mutant_share, min_candidates=len(structured_candidates(space)),
                     max_samples=spec.max_search_samples, min_finalists=spec.min_finalists)
  result = await successive_halving(space, evaluator, race, plan, seed=spec.seed, sparse_share=spec.sparse_share)
  best, best_key = result.best, result.best_key
  holdout_board = []
  if holdout:
    finalists = result.finalists[:spec.holdout_finalists]
    configs = [c.to_mas(space) for c in finalists]
    scores = await evaluator.evaluate_many([(cfg, holdout, (0,)) for cfg in configs],
                                           desc=f"{spec.benchmark} finalists on the holdout")
    ranked = _rank([(c, evaluator.key(cfg), s) for c, cfg, s in zip(finalists, configs, scores)])
    best, best_key = ranked[0][0], ranked[0][1]
    race_scores = {k: s for k, _, s in result.leaderboard}
    holdout_board = [{"key": k, "family": c.family, "holdout": s.to_json(), "race": race_scores[k].to_json()}
                     for c, k, s in ranked]
  winner = best.to_mas(space)
  samples = tuple(range(spec.test_samples))
  oracle = await evaluator.evaluate(winner, test_items, samples, desc=f"{spec.benchmark} oracle on test")
  oracle_sample0 = await evaluator.evaluate(winner, test_items, (0,))
  rand, num_random = await random_configurations_reward(space, evaluator, test_items,
                                                        draws_per_item=spec.random_draws_per_item,
                                                        seed=spec.seed)
  return {
      "benchmark": spec.benchmark, "pool": spec.pool,
      "oracle_reward": oracle.mean_reward, "oracle_test": oracle.to_json(),
      "oracle_test_sample0": oracle_sample0.to_json(),
      "oracle_race_score": next(s.to_json() for k, _, s in result.leaderboard if k == best_key),
      "finalists_on_holdout": holdout_board, "race_items": len(race), "holdout_items": len(holdout),
      "random_reward": rand.mean_reward, "random_test": rand.to_json(),
      "random_configurations": num_random,
      "configurations_searched": result.configurations_searched,
      "configurations_by_family": result.family_counts,
      "search_queries": result.queries,
      "oracle_configuration": {"key": best_key, **describe(best, space)},
      "race_top": [{"key": k, "family": f, **s.to_json()} for k, f, s in result.leaderboard[:5]],
      "plan": plan.to_json(),
      "rungs": [r.to_json() for r in result.rungs],
      "search_items": len(order), "search_split_items": len(search_items), "test_items": len(test_items), "test_samples": spec.test_samples,
      "space": {"roles": list(space.roles), "models": list(space.models), "decision_model": space.decision_model,
                "num_proposers": space.num_proposers, "graphs": len(space.graphs)},
  }


# ---------------------------------------------------------------------------------------------------
# results/regret.json and .md


REGRET_GOAL = 0.05


def learned_results_path(results_dir: str | os.PathLike, benchmark: str, pool: str) -> pathlib.Path:
  """Where the HieraMAS training run leaves its test result (experiments/train_hieramas.py)."""
  return pathlib.Path(results_dir) / f"hieramas_{benchmark}_{pool}.json"


def with_regret(record: Mapping[str, Any], results_dir: str | os.PathLike) -> dict[str, Any]:
  """The record plus learned_reward (read now, so a later HieraMAS run is picked up) and regret."""
  out = dict(record)
  path = learned_results_path(results_dir, record["benchmark"], record["pool"])
  learned, source, reason = read_learned_reward(path)
  value, why = regret(record["oracle_reward"], learned, record["random_reward"])
  same_sim = None
  fingerprint = str(record.get("endpoint", "")).split(":")[-1] if str(record.get("endpoint", "")).startswith("sim:") else ""
  if learned is not None and len(fingerprint) >= 8:
    same_sim = _learned_endpoint_matches(path, fingerprint)
  learned_n = None
  if learned is not None:
    data = json.loads(path.read_text())
    sizes = data.get("sizes") if isinstance(data.get("sizes"), Mapping) else {}
    learned_n = sizes.get("test", data.get("n"))
    learned_n = int(learned_n) if isinstance(learned_n, (int, float)) else None
  se_learned = learned_stderr(path) if learned is not None else None
  se_regret = None
  if value is not None and se_learned is not None:
    se_regret = regret_stderr(record["oracle_reward"], learned, record["random_reward"],
                              record["oracle_test"]["stderr"], se_learned, record["random_test"]["stderr"])
  out.update({"learned_reward": learned,
              "learned_stderr": se_learned,
              "regret_stderr": se_regret,
              "learned_test_items": learned_n,
              "learned_on_full_test": None if learned_n is None else learned_n == record.get("test_items"),
              "learned_source": f"{path.name}:{source}" if source else None,
              "learned_on_same_sim": same_sim,
              "learned_missing_reason": reason,
              "regret": value, "regret_reason": why if value is None else None,
              "regret_goal": REGRET_GOAL,
              "meets_goal": None if value is None else bool(value <= REGRET_GOAL)})
  return out


def _learned_endpoint_matches(path: pathlib.Path, fingerprint: str) -> bool | None:
  """Whether the learned result ran on the same sim (same code + data fingerprint); None if unknown.

  The fingerprint is looked for in the results file, then in its run directory's config.json
  ("endpoint"), which every run directory of the suite records.
  """
  text = path.read_text()
  if fingerprint in text:
    return True
  run_dir = json.loads(text).get("run_dir")
  config = pathlib.Path(run_dir) / "config.json" if isinstance(run_dir, str) else None
  if config is not None and config.exists():
    endpoint = json.loads(config.read_text()).get("endpoint")
    if isinstance(endpoint, str) and endpoint.startswith("sim:"):
      return fingerprint in endpoint
  return None


def entry_key(benchmark: str, pool: str) -> str:
  return f"{benchmark}/{pool}"


def merge_regret_file(path: str | os.PathLike, entries: Mapping[str, Mapping[str, Any]], *, label: str
                      ) -> dict[str, Any]:
  """Writes results/regret.json: the entries of this run replace theirs, the others are kept."""
  path = pathlib.Path(path)
  data = json.loads(path.read_text()) if path.exists() else {}
  merged = dict(data.get("entries", {}))
  merged.update(entries)
  record = {
      "label": label,
      "what": ("regret = (oracle - learned) / (oracle - random) of mean system reward "
               "(learn/rewards.system_reward: utility minus cost) on the test split; oracle = best static "
               "configuration found by successive halving on train+val; random = uniformly random "
               "configurations. See docs/regret.md."),
      "goal": f"regret <= {REGRET_GOAL} on every benchmark",
      "entries": {k: merged[k] for k in sorted(merged)},
  }
  from hieramas_jax.experiment.provenance import atomic_write_json  # pylint: disable=import-outside-toplevel
  atomic_write_json(path, record)
  return record


def _fmt(x: float | None, spec: str = ".3f") -> str:
  return "n/a" if x is None else format(x, spec)


def short_configuration(configuration: Mapping[str, Any]) -> str:
  """'Role: [p1, p2] -> synth; ...; graph kind' with skipped roles left out."""
  parts = []
  for role, choice in configuration["roles"].items():
    if choice == "skipped":
      continue
    props = ", ".join(choice["proposers"])
    parts.append(f"{role}: [{props}] -> {choice['synthesizer']}" if props else f"{role}: {choice['synthesizer']}")
  active = len(parts)
  return "; ".join(parts) + (f" ({configuration['graph_kind']} graph)" if active > 1 else "")


def regret_markdown(record: Mapping[str, Any]) -> str:
  """results/regret.md from the regret.json record."""
  lines = [f"# Oracle and regret ({record['label']})", "",
           record["what"], "", f"Goal: {record['goal']}.", "",
           "| benchmark | pool | learned (test, +-se) | oracle (test, +-se) | random (test, +-se) | regret (+-se) | "
           "configurations "
           "searched | oracle accuracy / cost per query |",
           "|---|---|---|---|---|---|---|---|"]
  for key, e in record["entries"].items():
    regret_cell = _fmt(e.get("regret"))
    if e.get("regret_stderr") is not None:
      regret_cell += f" +- {_fmt(e['regret_stderr'], '.2f')}"
    if e.get("regret") is None:
      regret_cell += f" ({e.get('regret_reason')})"
    lines.append(
        f"| {e['benchmark']} | {e['pool']} | {_fmt(e.get('learned_reward'))}"
        f"{' +- ' + _fmt(e['learned_stderr']) if e.get('learned_stderr') is not None else ''} | "
        f"{_fmt(e['oracle_reward'])} +- {_fmt(e['oracle_test']['stderr'])} | "
        f"{_fmt(e['random_reward'])} +- {_fmt(e['random_test']['stderr'])} | {regret_cell} | "
        f"{e['configurations_searched']} | {100 * e['oracle_test']['accuracy']:.1f}% / "
        f"${e['oracle_test']['cost_usd']:.5f} |")
  lines += ["", "Oracle configurations (the same for every query):", ""]
  for key, e in record["entries"].items():
    lines.append(f"- {key}: {short_configuration(e['oracle_configuration'])}; decision "
                 f"{e['space']['decision_model']}; found as {e['oracle_configuration']['family']}.")
  other_sim = [f"- {k}: the learned result was made on another version of the sim than {e['endpoint']}"
               for k, e in record["entries"].items() if e.get("learned_on_same_sim") is False]
  partial = [f"- {k}: the learned result covers {e['learned_test_items']} test items, the oracle and random "
             f"ones all {e['test_items']}" for k, e in record["entries"].items()
             if e.get("learned_on_full_test") is False]
  if other_sim or partial:
    lines += ["", "Caution:", ""] + other_sim + partial
  lines += ["", "Missing learned results:", ""]
  missing = [f"- {k}: {e['learned_missing_reason']}" for k, e in record["entries"].items()
             if e.get("learned_reward") is None]
  lines += missing or ["- none"]
  lines += ["", "Commands:", ""]
  for key, e in record["entries"].items():
    lines.append(f"- {key}: `{e['provenance']['command']}`")
  return "\n".join(lines) + "\n"


def load_oracle_items(benchmark: str, search_splits: Sequence[str], limit: int | None = None
                      ) -> tuple[list[Item], list[Item]]:
  """(search items, test items): the saved splits; the test split is never searched on.

  Raises:
    OracleError: if "test" is among the search splits, or a split is unknown.
  """
  if "test" in search_splits:
    raise OracleError("the search must not see the test split; use train and/or val")
  if not search_splits:
    raise OracleError("no search split given")
  for s in search_splits:
    if s not in ("train", "val"):
      raise OracleError(f"unknown search split {s!r}; use train and/or val")
  from hieramas_jax.benchmarks.splits import load_split  # pylint: disable=import-outside-toplevel
  search = [it for s in search_splits for it in load_split(benchmark, s)]
  test = list(load_split(benchmark, "test"))
  if limit is not None:
    if limit < 1:
      raise OracleError(f"limit must be >= 1, got {limit}")
    search, test = search[:limit], test[:limit]
  return search, test


async def run_benchmark(spec: OracleSpec, client: ChatClient, *, endpoint_name: str, run_root: str | os.PathLike,
                        search_splits: Sequence[str] = ("train", "val"), limit: int | None = None,
                        settings: RunSettings = RunSettings(), max_queries: int = 64, progress: bool = True
                        ) -> dict[str, Any]:
  """Search + test measurement of one benchmark and pool, resumable from its run directory.

  The run directory `<run_root>/<endpoint>/<pool>/<benchmark>/` holds config.json (what the cached
  evaluations are valid for: endpoint, benchmark, pool, settings; a mismatch refuses to mix; the sim's
  endpoint name carries the fingerprint of its code and data, `backend.sim_endpoint_name`),
  evaluations.jsonl (one line per query), spec.json and oracle.json (this run's record).
  """
  from hieramas_jax.experiment.provenance import atomic_write_json  # pylint: disable=import-outside-toplevel
  from hieramas_jax.experiment.table1 import prepare_run_dir  # pylint: disable=import-outside-toplevel
  from hieramas_jax.llm.registry import get_pool  # pylint: disable=import-outside-toplevel
  pool = get_pool(spec.pool)
  search_items, test_items = load_oracle_items(spec.benchmark, search_splits, limit)
  safe_endpoint = endpoint_name.replace(":", "-").replace("/", "_")
  run_dir = pathlib.Path(run_root) / safe_endpoint / spec.pool / spec.benchmark
  run_dir.mkdir(parents=True, exist_ok=True)
  prepare_run_dir(run_dir, {"endpoint": endpoint_name, "benchmark": spec.benchmark, "pool": spec.pool,
                            "settings": dataclasses.asdict(settings)})
  atomic_write_json(run_dir / "spec.json", {**dataclasses.asdict(spec), "search_splits": list(search_splits),
                                            "limit": limit})
  store = EvaluationStore(run_dir / EVALUATIONS_FILE)
  cached_before = len(store)
  try:
    evaluator = Evaluator(MASQueryRunner(client, settings), store, settings=settings, max_queries=max_queries,
                          progress=progress)
    record = await run_oracle(spec, evaluator, search_items, test_items, pool)
  finally:
    store.close()
  record.update({"endpoint": endpoint_name, "search_splits": list(search_splits), "limit": limit,
                 "run_dir": str(run_dir),
                 "settings": dataclasses.asdict(settings), "queries_run_now": evaluator.queries_run,
                 "queries_cached_before": cached_before, "spec": dataclasses.asdict(spec)})
  atomic_write_json(run_dir / "oracle.json", record)
  return record
