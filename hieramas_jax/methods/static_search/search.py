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

Honesty rules: the search sees only the search split (the cell's train + val queries); the winner is
then measured on the test split by the runner like any other method (`methods/static_search/method.py`).
Everything is seeded; evaluations are cached per (configuration hash, item, sample index) in the
method's state directory, so a killed search resumes and a rerun costs nothing. Regret arithmetic and
its tables live in the report layer (`report/regret.py`).
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
from typing import Any, Protocol, Sequence

import numpy as np
from tqdm.auto import tqdm

from hieramas_jax.aio import gather_or_cancel
from hieramas_jax.benchmarks import graders
from hieramas_jax.benchmarks.data import Item
from hieramas_jax.errors import UserError
from hieramas_jax.fileio import atomic_write_text
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


class OracleError(UserError, ValueError):
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
  prompt_tokens: int = 0
  completion_tokens: int = 0


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
    trace = await run_mas(client, item, config, self.settings, method="static_search")
    grade = await graders.grade_async(item, trace.final_text)
    return QueryOutcome(bool(grade.correct), float(trace.cost_usd), trace.n_calls, trace.prompt_tokens,
                        trace.completion_tokens)


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
              bool(rec["correct"]), float(rec["cost_usd"]), int(rec["n_calls"]), int(rec.get("prompt_tokens", 0)),
              int(rec.get("completion_tokens", 0)))
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

  def outcomes(self) -> list[QueryOutcome]:
    return list(self._data.values())

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
               max_queries: int | asyncio.Semaphore = 64, progress: bool = False):
    if isinstance(max_queries, int) and max_queries < 1:
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
    bound = asyncio.Semaphore(self.max_queries) if isinstance(self.max_queries, int) else self.max_queries
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
# The whole search of one cell.


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
