"""Training usage: what a fit's LLM calls cost, counted once across kills and resumes.

The runner hands a fit a `TrainingMeter` instead of the client; it forwards every call and totals it,
so training cost is kept apart from inference cost without the methods knowing.
"""

from __future__ import annotations

import dataclasses
import math
import pathlib
import time
from typing import Any

from hieramas_jax.experiment.rundir import StateError, read_json
from hieramas_jax.fileio import atomic_write_json


@dataclasses.dataclass
class Usage:
  """Calls, tokens and USD of a set of LLM calls (cached replays count at the pool's current prices, as
  llm/client.py prices them)."""

  calls: int = 0
  cached_calls: int = 0
  prompt_tokens: int = 0
  completion_tokens: int = 0
  cost_usd: float = 0.0
  wall_s: float = 0.0
  truncated_calls: int = 0
  by_model: dict[str, list[int]] = dataclasses.field(default_factory=dict)  # model -> [calls, prompt, completion]

  def add_call(self, result) -> None:
    self.calls += 1
    self.cached_calls += int(bool(result.cached))
    self.prompt_tokens += int(result.prompt_tokens)
    self.completion_tokens += int(result.completion_tokens)
    self.cost_usd += float(result.cost_usd)
    self.truncated_calls += int(getattr(result, "finish_reason", "") in ("length", "context_overflow"))
    row = self.by_model.setdefault(result.model, [0, 0, 0])
    row[0] += 1
    row[1] += int(result.prompt_tokens)
    row[2] += int(result.completion_tokens)

  def plus(self, other: "Usage") -> "Usage":
    """The sum of two usages (per-model rows added)."""
    by_model = {m: list(r) for m, r in self.by_model.items()}
    for m, r in other.by_model.items():
      by_model[m] = [a + b for a, b in zip(by_model.get(m, [0, 0, 0]), r)]
    return Usage(**{f.name: getattr(self, f.name) + getattr(other, f.name) for f in dataclasses.fields(Usage)
                    if f.name != "by_model"}, by_model=dict(sorted(by_model.items())))

  def to_json(self) -> dict[str, Any]:
    return dataclasses.asdict(self)


class TrainingMeter:
  """The client `fit` sees: forwards every call and totals it; `commit()` persists the totals.

  A fit calls `ctx.commit()` right after saving a checkpoint at a quiescent point, and the runner
  once more at the end. A fit killed in between resumes from its last checkpoint and repeats (from
  the response cache) exactly the calls made after it, which were not committed: every training call
  is counted once, across any number of kills.
  """

  def __init__(self, client, path: pathlib.Path):
    self.client, self.path = client, pathlib.Path(path)
    fix = f"delete {self.path.parent} (the cell then refits; cached calls cost nothing)"
    committed = read_json(self.path, fix) if self.path.exists() else {}
    try:
      self.committed = Usage(**check_usage_record(committed, self.path, fix))
    except TypeError as e:
      raise StateError(f"{self.path}: not a usage record ({e}); {fix}") from None
    self.pending = Usage()
    self._pending_costs: list[float] = []  # summed with fsum at commit: a total free of arrival order
    self._since = time.monotonic()

  async def chat(self, model, messages, *, temperature, max_tokens, sample_index=0):
    result = await self.client.chat(model, messages, temperature=temperature, max_tokens=max_tokens,
                                    sample_index=sample_index)
    self.pending.add_call(result)
    self._pending_costs.append(float(result.cost_usd))
    return result

  def commit(self) -> None:
    now = time.monotonic()
    total = self.committed.plus(self.pending)
    total.cost_usd = math.fsum([self.committed.cost_usd, *self._pending_costs])
    total.wall_s += now - self._since
    self.committed, self.pending, self._since, self._pending_costs = total, Usage(), now, []
    atomic_write_json(self.path, total.to_json())


def check_usage_record(record: Any, path: pathlib.Path, fix: str) -> dict[str, Any]:
  """`record` if it is a usage total (numbers, and `by_model`: model -> [calls, prompt, completion]
  integers), else a StateError naming `path`."""
  def number(v):
    return isinstance(v, (int, float)) and not isinstance(v, bool)
  by_model = record.get("by_model", {}) if isinstance(record, dict) else None
  if not isinstance(record, dict) or not all(number(v) for k, v in record.items() if k != "by_model") or not (
      isinstance(by_model, dict) and all(isinstance(row, list) and len(row) == 3 and all(
          isinstance(x, int) and not isinstance(x, bool) for x in row) for row in by_model.values())):
    raise StateError(f"{path}: expected an object of numbers; {fix}")
  return record
