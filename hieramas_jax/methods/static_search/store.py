"""Evaluating static configurations: per-query outcomes, their on-disk store, scores, and the evaluator.

A configuration's value is the mean system reward (`learn.rewards.system_reward` of solved and the
query's total cost): the quantity HieraMAS is trained on. Every (configuration key, item, sample index)
query runs once: its outcome is appended to the method's `EVALUATIONS_FILE`, so a killed search resumes
and a rerun costs nothing. The search that decides what to evaluate is `search.py`.
"""

from __future__ import annotations

import asyncio
import dataclasses
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
from hieramas_jax.fileio import atomic_write_text
from hieramas_jax.learn.rewards import system_reward
from hieramas_jax.mas.config import MASConfig
from hieramas_jax.mas.runtime import ChatClient, RunSettings, run_mas
from hieramas_jax.methods.static_search.space import OracleError, config_key

log = logging.getLogger(__name__)

EVALUATIONS_FILE = "evaluations.jsonl"


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
