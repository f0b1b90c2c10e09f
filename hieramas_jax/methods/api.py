"""The Method protocol, the per-run context every method receives, and the registry by name.

Every Table 1 method is one class with `name` and `async solve(ctx, item) -> Trace`; learned
methods add `fit(train, val)`. The experiment code only ever sees this interface, so adding a
method never touches the runner.
"""

from __future__ import annotations

import dataclasses
from typing import Any, Callable, Protocol, Sequence, runtime_checkable

from hieramas_jax.benchmarks.data import Item
from hieramas_jax.llm.registry import PoolSetting
from hieramas_jax.mas.runtime import ChatClient, RunSettings
from hieramas_jax.mas.trace import Trace


@dataclasses.dataclass(frozen=True)
class RunContext:
  """What a method may use while solving: nothing else (no globals).

  Attributes:
    client: the run's one LLMClient.
    pool: the Table 1 setting (which models may be used, which is the strong backbone).
    seed: the run's seed (learned methods derive their keys from it).
    settings: sampling settings shared by MAS calls (temperature 0.2, max_tokens 2048).
  """

  client: ChatClient
  pool: PoolSetting
  seed: int = 0
  settings: RunSettings = RunSettings()


@runtime_checkable
class Method(Protocol):
  name: str

  async def solve(self, ctx: RunContext, item: Item) -> Trace:
    ...


class UnknownMethodError(KeyError):
  """A method name that is not registered."""

  def __str__(self) -> str:
    return f"unknown method {self.args[0]!r}; known: {', '.join(sorted(METHODS))}"


METHODS: dict[str, Callable[..., Method]] = {}


def register(name: str) -> Callable[[Callable[..., Method]], Callable[..., Method]]:
  """Class decorator: make a method constructible by name (`make_method(name)`)."""
  def deco(factory):
    if name in METHODS:
      raise ValueError(f"method {name!r} registered twice")
    METHODS[name] = factory
    return factory
  return deco


def make_method(name: str, **kwargs: Any) -> Method:
  """A method instance by its registry name, e.g. make_method("sc_cot")."""
  _load_builtin_methods()
  try:
    factory = METHODS[name]
  except KeyError:
    raise UnknownMethodError(name) from None
  return factory(**kwargs)


def check_method_names(names: Sequence[str]) -> list[str]:
  """Validates names up front (before a run starts) so a typo fails in the first second."""
  _load_builtin_methods()
  for n in names:
    if n not in METHODS:
      raise UnknownMethodError(n)
  return list(names)


def known_methods() -> list[str]:
  _load_builtin_methods()
  return sorted(METHODS)


def _load_builtin_methods() -> None:
  # Importing the modules runs their @register decorators.
  from hieramas_jax.methods import debate, self_consistency, single  # noqa: F401  pylint: disable=import-outside-toplevel,unused-import
  from hieramas_jax.methods import hieramas  # noqa: F401  pylint: disable=import-outside-toplevel,unused-import
