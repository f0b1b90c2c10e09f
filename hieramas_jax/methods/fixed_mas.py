"""A method that runs one fixed MAS structure (built per benchmark and pool) on every query.

Used by the sim's calibration and validation (Full-Graph, Mixture-of-Agents supernodes, chains) and
by any baseline that is a fixed graph; the structure comes from `mas/structures.py` or a builder of
the caller's, so the Table 1 rows and the sim's validation run the same system.
"""

from __future__ import annotations

import dataclasses
from typing import Any, Callable

from hieramas_jax.benchmarks.data import Item
from hieramas_jax.llm.registry import PoolSetting
from hieramas_jax.mas.config import MASConfig
from hieramas_jax.mas.runtime import run_mas
from hieramas_jax.mas.trace import Trace
from hieramas_jax.methods.api import RunContext, Untrained

Builder = Callable[[str, PoolSetting], MASConfig]


@dataclasses.dataclass(frozen=True)
class FixedMAS(Untrained):
  """`build(benchmark, pool) -> MASConfig`, executed by the MAS runtime with the run's settings."""

  name: str
  build: Builder = dataclasses.field(compare=False)
  temperature: float | None = None  # None: the run's (0.2); a published method's own protocol otherwise

  def describe(self) -> dict[str, Any]:
    """Name and temperature, not the builder: a function's repr holds its memory address, so a run
    directory's config.json would differ on every run and never resume. The name is the structure's."""
    return {"name": self.name, "temperature": self.temperature}

  async def solve(self, ctx: RunContext, item: Item) -> Trace:
    settings = ctx.settings if self.temperature is None else dataclasses.replace(ctx.settings,
                                                                                 temperature=self.temperature)
    return await run_mas(ctx.client, item, self.build(item.benchmark, ctx.pool), settings, method=self.name)
