"""The AFlow baseline: a search over operator workflows on the validation split, then the best one at test.

fit: round 1 is the initial workflow (one Custom call); each further round is one `search.search_step`
(select a parent, modify it, evaluate the child on the validation queries). The rounds so far are saved
after each one (`rounds.json`) and `ctx.commit()` marks the point, so a killed search resumes at its last
finished round. AFlow evaluates on a validation set and so does this search: the cell's val split
(every query; `max_val` caps it).
solve: the best workflow, executed by the setting's strong model.
"""

from __future__ import annotations

import asyncio
import dataclasses
import json
import pathlib
from typing import Any, Sequence

from hieramas_jax.aio import gather_or_cancel
from hieramas_jax.benchmarks import graders
from hieramas_jax.benchmarks.data import Item
from hieramas_jax.fileio import atomic_write_json
from hieramas_jax.mas.trace import Trace
from hieramas_jax.methods.aflow import search
from hieramas_jax.methods.aflow.workflow import Workflow, run_workflow
from hieramas_jax.methods.api import MethodError, RunContext
from hieramas_jax.methods.common import check_pool

ROUNDS_FILE = "rounds.json"
BEST_FILE = "best.json"


@dataclasses.dataclass(frozen=True)
class AFlowConfig:
  """AFlow's search settings (reference values in parentheses: FoundationAgents/AFlow run.py, optimizer.py).

  Attributes:
    rounds: evaluated workflows, the initial one included (max_rounds 20).
    sample: parents considered per round (4).
    validation_runs: runs of each workflow over the validation queries, averaged (validation_rounds 5).
    max_val: most validation queries used (0: all of the cell's val split).
    review_revise: also offer Review/Revise edits (AFlow's run script offers them on none of our benchmarks).
  """

  rounds: int = 10
  sample: int = search.SAMPLE
  validation_runs: int = 1
  max_val: int = 0
  review_revise: bool = False

  def __post_init__(self):
    if self.rounds < 1 or self.sample < 1 or self.validation_runs < 1 or self.max_val < 0:
      raise ValueError("aflow needs rounds, sample, validation_runs >= 1 and max_val >= 0")


class AFlow:
  """AFlow on one benchmark and pool setting."""

  name = "aflow"
  trainable = True

  def __init__(self, benchmark: str, pool: str, seed: int = 0, config: AFlowConfig = AFlowConfig()):
    self.benchmark, self.pool_name, self.seed, self.config = benchmark, pool, seed, config
    self.best: Workflow | None = None

  def describe(self) -> dict[str, Any]:
    return {"benchmark": self.benchmark, "pool": self.pool_name, "seed": self.seed, **dataclasses.asdict(self.config)}

  async def fit(self, train: Sequence[Item], val: Sequence[Item], ctx: RunContext) -> dict[str, Any]:
    del train
    check_pool(self.name, self.pool_name, ctx)
    val = list(val)[:self.config.max_val] if self.config.max_val else list(val)
    if not val:
      raise MethodError("aflow's search needs validation queries")
    state_dir = ctx.require_state_dir(self.name)
    path = state_dir / ROUNDS_FILE
    rounds = [search.Round.from_json(r) for r in json.loads(path.read_text())] if path.exists() else []
    bound = ctx.query_bound(32)

    async def evaluate(workflow: Workflow) -> tuple[float, float]:
      async def one(item: Item, run: int):
        async with bound:
          trace = await run_workflow(ctx.client, item, workflow, ctx.pool.strong, ctx.settings, method=self.name,
                                     sample_offset=run)
        return (await graders.grade_async(item, trace.final_text)).correct, trace.cost_usd
      results = await gather_or_cancel([asyncio.ensure_future(one(it, r)) for r in range(self.config.validation_runs)
                                        for it in val])
      return sum(c for c, _ in results) / len(results), sum(cost for _, cost in results)

    def save():
      atomic_write_json(path, [r.to_json() for r in rounds])
      ctx.commit()
      ctx.step("round", len(rounds), self.config.rounds)  # the live display's step, rate, ETA
      ctx.log(len(rounds), {"aflow/round_score": rounds[-1].score,
                            "aflow/best_score": search.best_round(rounds).score})

    if not rounds:
      score, cost = await evaluate(Workflow().check(self.benchmark))
      rounds.append(search.Round(1, Workflow(), None, None, score, cost))
      save()
    while len(rounds) < self.config.rounds:
      child = await search.search_step(rounds, evaluate, self.benchmark, seed=self.seed, sample=self.config.sample,
                                         review_revise=self.config.review_revise)
      if child is None:
        break  # every modification of the top workflows has been tried
      rounds.append(child)
      save()
    best = search.best_round(rounds)
    self.best = best.workflow
    atomic_write_json(state_dir / BEST_FILE, best.to_json())
    return {"rounds": [r.to_json() for r in rounds], "best_round": best.round,
            "best_workflow": best.workflow.describe(), "best_val_score": best.score, "val_queries": len(val)}

  def load(self, state_dir) -> None:
    path = pathlib.Path(state_dir) / BEST_FILE
    if not path.exists():
      raise MethodError(f"{state_dir} holds no finished aflow search ({BEST_FILE} missing)")
    self.best = search.Round.from_json(json.loads(path.read_text())).workflow.check(self.benchmark)

  def load_untrained(self) -> None:
    """The workflow the search starts from (round 1: one answer generation), before any round (the runner's
    untrained check)."""
    self.best = Workflow().check(self.benchmark)

  async def prepare(self, items: Sequence[Item], ctx: RunContext) -> None:
    del items, ctx

  async def solve(self, ctx: RunContext, item: Item) -> Trace:
    if self.best is None:
      raise MethodError("aflow.solve before fit() or load()")
    return await run_workflow(ctx.client, item, self.best, ctx.pool.strong, ctx.settings, method=self.name)


def make(*, benchmark: str, pool: str, seed: int = 0, **options) -> AFlow:
  return AFlow(benchmark, pool, seed, AFlowConfig(**options))
