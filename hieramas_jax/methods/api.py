"""The one method interface, the per-run context every method receives, and its errors.

Every Table 1 method is one object with

  name                                 its registry name
  trainable                            whether `fit` does anything (the runner skips fitting when not)
  describe() -> dict                   what identifies it (goes into each cell's config.json)
  async fit(train, val, ctx) -> dict   learns; saves its state under `ctx.state_dir`, resumes from it;
                                       returns a JSON summary of the fit
  load(state_dir) -> None              restores what a finished `fit` saved there
  async prepare(items, ctx) -> None    optional precomputation before solving (embeddings, in a thread)
  async solve(ctx, item) -> Trace      answers one query
  load_untrained() -> None             optional, learned methods: takes the state `fit` starts from (the
                                       seeded initialisation, before any update) so that the runner can
                                       run the untrained method on the same test queries and a report
                                       can say whether training beat its own starting point

Methods import `mas`, `learn`, `llm`, `benchmarks` and never the experiment or report layers: the
runner (`experiment/runner.py`) is the only code that drives them, so adding a method never touches it.
This module imports no method: every method package imports it, and the name -> factory table that
imports them all lives one floor up, in `registry.py`.
"""

from __future__ import annotations

import asyncio
import dataclasses
import difflib
import pathlib
from typing import Any, Callable, Mapping, Protocol, Sequence, runtime_checkable

from hieramas_jax.benchmarks.data import Item
from hieramas_jax.errors import UserError
from hieramas_jax.llm.registry import PoolSetting
from hieramas_jax.mas.runtime import ChatClient, RunSettings
from hieramas_jax.mas.trace import Trace


class ScalarWriter(Protocol):
  """What a method may log training curves to (the experiment layer's metric writers)."""

  def write_scalars(self, step: int, scalars: Mapping[str, float]) -> None:
    ...


@dataclasses.dataclass(frozen=True)
class RunContext:
  """What a method may use while fitting or solving: nothing else (no globals).

  Attributes:
    client: the run's one LLMClient (during `fit`, wrapped by the runner so training calls are totalled).
    pool: the Table 1 setting (which models may be used, which is the strong backbone).
    seed: the run's seed (learned methods derive their keys from it).
    settings: sampling settings shared by MAS calls (temperature 0.2, max_tokens 2048).
    state_dir: where `fit` keeps its state (checkpoints, search records) and resumes from; None when
      solving only.
    bound: the run's one global bound on queries in flight, shared by every cell; a method that runs
      training queries takes one slot per query (never nested inside another slot).
    writer: where `fit` logs training curves (None: nowhere).
    progress: whether `fit` may show progress bars.
    report: where `fit` reports its progress, `(stage, done, total)` (None: nowhere); see `step`.
    checkpoint: call it right after saving state at a quiescent point (no training query in flight):
      the runner then persists the training cost so far, so a resumed fit counts every call once.
  """

  client: ChatClient
  pool: PoolSetting
  seed: int = 0
  settings: RunSettings = RunSettings()
  state_dir: pathlib.Path | None = None
  bound: asyncio.Semaphore | None = None
  writer: ScalarWriter | None = None
  progress: bool = False
  checkpoint: Callable[[], None] | None = None
  report: Callable[[str, int, int | None], None] | None = None

  def step(self, stage: str, done: int, total: int | None = None) -> None:
    """Reports a fit's progress (`report`): "stage 1", 3 of 8 steps; the table's live display shows it."""
    if self.report is not None:
      self.report(stage, done, total)

  def commit(self) -> None:
    """Marks a quiescent checkpoint (see `checkpoint`)."""
    if self.checkpoint is not None:
      self.checkpoint()

  def query_bound(self, default: int) -> asyncio.Semaphore:
    """The global bound, or a fresh one of `default` slots when the caller gave none (library use)."""
    return self.bound if self.bound is not None else asyncio.Semaphore(default)

  def require_state_dir(self, method: str) -> pathlib.Path:
    if self.state_dir is None:
      raise MethodError(f"{method}.fit needs ctx.state_dir (where its state is saved and resumed from)")
    path = pathlib.Path(self.state_dir)
    path.mkdir(parents=True, exist_ok=True)
    return path

  def log(self, step: int, scalars: Mapping[str, float]) -> None:
    if self.writer is not None:
      self.writer.write_scalars(step, scalars)


class MethodError(UserError, RuntimeError):
  """A method used wrongly (solve before fit or load, a state directory that does not match)."""


@runtime_checkable
class Method(Protocol):
  name: str
  trainable: bool

  def describe(self) -> dict[str, Any]:
    ...

  async def fit(self, train: Sequence[Item], val: Sequence[Item], ctx: RunContext) -> dict[str, Any]:
    ...

  def load(self, state_dir: str | pathlib.Path) -> None:
    ...

  async def prepare(self, items: Sequence[Item], ctx: RunContext) -> None:
    ...

  async def solve(self, ctx: RunContext, item: Item) -> Trace:
    ...


class Untrained:
  """Mixin for methods with nothing to learn: `fit` is a no-op, `load` restores nothing."""

  trainable = False

  def describe(self) -> dict[str, Any]:
    if dataclasses.is_dataclass(self):
      return dataclasses.asdict(self)
    return {"name": getattr(self, "name", type(self).__name__)}

  async def fit(self, train: Sequence[Item], val: Sequence[Item], ctx: RunContext) -> dict[str, Any]:
    del train, val, ctx
    return {}

  def load(self, state_dir: str | pathlib.Path) -> None:
    del state_dir

  async def prepare(self, items: Sequence[Item], ctx: RunContext) -> None:
    del items, ctx


class UnknownMethodError(UserError, KeyError):
  """A method name that is not in the registry (`registry.METHODS`).

  Raised with the known names so the message can list them without this module importing the table
  (the registry imports every method package, and they import this module).
  """

  def __init__(self, name: str, known: Sequence[str] = ()):
    super().__init__(name, tuple(sorted(known)))

  def __str__(self) -> str:
    close = difflib.get_close_matches(str(self.args[0]).lower(), self.args[1], n=1, cutoff=0.6)
    return (f"unknown method {self.args[0]!r}" + (f" (did you mean {close[0]!r}?)" if close else "")
            + f"; known: {', '.join(self.args[1])}")
