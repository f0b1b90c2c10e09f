"""The oracle as methods: the best static configuration found by search, and uniformly random ones.

`static_search`: fit = the successive-halving search (`search.run_search`) on the cell's train + val
queries, every query cached in `state/evaluations.jsonl` (a killed search resumes query by query);
the winner is saved in `state/winner.json`. solve = the winner, the same configuration for every query.
Its training cost is read from the evaluation store (the cost of every query the search ran), which
knows it exactly even across kills.

`random_config`: each query gets its own uniformly random static configuration (every position uniform
over the pool's models and skip, a graph uniform over the pool), drawn with a generator keyed by
(seed, item id): the `random` reference point of the regret.
"""

from __future__ import annotations

import dataclasses
import functools
import json
import math
import pathlib
from typing import Any, Sequence

import numpy as np

from hieramas_jax.benchmarks.data import Item
from hieramas_jax.fileio import atomic_write_json
from hieramas_jax.llm.registry import get_pool
from hieramas_jax.mas.runtime import run_mas
from hieramas_jax.mas.trace import Trace
from hieramas_jax.methods.api import MethodError, RunContext, Untrained
from hieramas_jax.methods.common import check_pool
from hieramas_jax.methods.digest import item_fold
from hieramas_jax.methods.static_search import search
from hieramas_jax.methods.static_search import space as space_lib
from hieramas_jax.methods.static_search import store as store_lib

WINNER_FILE = "winner.json"
_STREAM_SOLVE = 11


def training_usage(outcomes: Sequence[store_lib.QueryOutcome]) -> dict[str, Any]:
  """What the search spent, over every evaluated query. The cost is an exactly rounded sum (fsum): the
  store holds outcomes in the order queries finished, and a plain sum's last digit followed that order."""
  return {"calls": sum(o.n_calls for o in outcomes), "cached_calls": 0,
          "prompt_tokens": sum(o.prompt_tokens for o in outcomes),
          "completion_tokens": sum(o.completion_tokens for o in outcomes),
          "cost_usd": math.fsum(o.cost_usd for o in outcomes), "wall_s": 0.0, "queries": len(outcomes)}


class StaticSearch:
  """The best static configuration of one benchmark and pool setting."""

  name = "static_search"
  trainable = True

  def __init__(self, benchmark: str, pool: str, seed: int = 0, config: search.SearchConfig = search.SearchConfig()):
    self.benchmark, self.pool_name, self.seed, self.config = benchmark, pool, seed, config
    self.space = space_lib.SearchSpace.make(benchmark, get_pool(pool), num_proposers=config.num_proposers,
                                            graph_seed=seed, num_random_graphs=config.num_random_graphs)
    self.winner: space_lib.Candidate | None = None

  def describe(self) -> dict[str, Any]:
    return {"benchmark": self.benchmark, "pool": self.pool_name, "seed": self.seed, **dataclasses.asdict(self.config)}

  async def fit(self, train: Sequence[Item], val: Sequence[Item], ctx: RunContext) -> dict[str, Any]:
    check_pool(self.name, self.pool_name, ctx)
    state_dir = ctx.require_state_dir(self.name)
    store = store_lib.EvaluationStore(state_dir / store_lib.EVALUATIONS_FILE)
    try:
      evaluator = store_lib.Evaluator(store_lib.MASQueryRunner(ctx.client, ctx.settings), store,
                                      settings=ctx.settings, max_queries=ctx.query_bound(64), progress=ctx.progress)
      winner, record = await search.run_search(self.config, self.space, evaluator, list(train) + list(val), self.seed)
      outcomes = store.outcomes()
    finally:
      store.close()
    self.winner = winner
    atomic_write_json(state_dir / WINNER_FILE, {"choices": winner.choices.tolist(), "graph": int(winner.graph),
                                                "family": winner.family})
    return {**record, "training_usage": training_usage(outcomes)}

  def load(self, state_dir) -> None:
    path = pathlib.Path(state_dir) / WINNER_FILE
    if not path.exists():
      raise MethodError(f"{state_dir} holds no finished static search ({WINNER_FILE} missing)")
    data = json.loads(path.read_text())
    self.winner = space_lib.Candidate(np.asarray(data["choices"], np.int64), int(data["graph"]), data["family"])

  async def prepare(self, items: Sequence[Item], ctx: RunContext) -> None:
    del items, ctx

  async def solve(self, ctx: RunContext, item: Item) -> Trace:
    if self.winner is None:
      raise MethodError("static_search.solve before fit() or load()")
    trace = await run_mas(ctx.client, item, self.winner.to_mas(self.space), ctx.settings, method=self.name)
    trace.extra["configuration_family"] = self.winner.family
    return trace


@dataclasses.dataclass(frozen=True)
class RandomConfig(Untrained):
  """A uniformly random static configuration per query (the oracle's search space, the pool of graphs).

  Attributes:
    num_proposers, num_random_graphs: the space, as `static_search` uses it.
  """

  name = "random_config"
  num_proposers: int = 2
  num_random_graphs: int = 30

  async def solve(self, ctx: RunContext, item: Item) -> Trace:
    space = _space(item.benchmark, ctx.pool.name, self.num_proposers, ctx.seed, self.num_random_graphs)
    rng = np.random.default_rng([ctx.seed, _STREAM_SOLVE, item_fold(item.id)])
    candidate = space_lib.uniform_candidate(space, rng)
    trace = await run_mas(ctx.client, item, candidate.to_mas(space), ctx.settings, method=self.name)
    trace.extra["configuration"] = {"choices": candidate.choices.tolist(), "graph": int(candidate.graph)}
    return trace


@functools.lru_cache(maxsize=32)
def _space(benchmark: str, pool: str, num_proposers: int, seed: int, num_random_graphs: int) -> space_lib.SearchSpace:
  return space_lib.SearchSpace.make(benchmark, get_pool(pool), num_proposers=num_proposers, graph_seed=seed,
                                    num_random_graphs=num_random_graphs)


def make(*, benchmark: str, pool: str, seed: int = 0, **options) -> StaticSearch:
  return StaticSearch(benchmark, pool, seed, search.SearchConfig(**options))
