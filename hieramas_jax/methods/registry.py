"""The one name -> factory table of methods: what `--methods` names and the runner builds.

The arrows run one way: this module imports every method, every method imports `api.py` (the
interface), and `api.py` imports no method. Adding a method is one row here. The learned methods are
imported inside their rows' factories (JAX models, the sentence encoder), so looking a name up or
building `base` stays cheap.
"""

from __future__ import annotations

import dataclasses
from typing import Any, Callable, Sequence

from hieramas_jax.methods import debate, graphs, self_consistency, single
from hieramas_jax.methods.api import Method, UnknownMethodError

# pylint: disable=import-outside-toplevel


def _aflow(**kwargs) -> Method:
  from hieramas_jax.methods.aflow import method
  return method.make(**kwargs)


def _agentprune(**kwargs) -> Method:
  from hieramas_jax.methods.agentprune import method
  return method.make(**kwargs)


def _maas(**kwargs) -> Method:
  from hieramas_jax.methods.maas import method
  return method.make(**kwargs)


def _arg_designer(**kwargs) -> Method:
  from hieramas_jax.methods.arg_designer import method
  return method.make(**kwargs)


def _gdesigner(**kwargs) -> Method:
  from hieramas_jax.methods.gdesigner import method
  return method.make(**kwargs)


def _masrouter(**kwargs) -> Method:
  from hieramas_jax.methods.masrouter import method
  return method.make(**kwargs)


def _hieramas(**kwargs) -> Method:
  from hieramas_jax.methods.hieramas import method
  return method.make(**kwargs)


def _hieramas_total_cost(**kwargs) -> Method:
  from hieramas_jax.methods.hieramas import method
  return method.make_total_cost(**kwargs)


def _static_search(**kwargs) -> Method:
  from hieramas_jax.methods.static_search import method
  return method.make(**kwargs)


def _random_config(**kwargs) -> Method:
  from hieramas_jax.methods.static_search import method
  return method.RandomConfig(**kwargs)


# Keyword arguments the runner passes to every factory: which cell the method is built for.
CELL_ARGS = ("benchmark", "pool", "seed")


@dataclasses.dataclass(frozen=True)
class Entry:
  """One row of the table.

  Attributes:
    factory: builds the method from its options.
    title: the method's name in tables, figures and W&B job types (the paper's spelling).
    per_cell: the factory needs the cell (`benchmark`, `pool`, `seed` keywords): learned methods and
      anything whose structure depends on the benchmark's roles. Others never see them.
  """

  factory: Callable[..., Method]
  title: str
  per_cell: bool = False


METHODS: dict[str, Entry] = {
    "base": Entry(single.make_base, "Base"),
    "cot": Entry(single.make_cot, "CoT"),
    "sc": Entry(self_consistency.make_sc, "Self-Consistency"),
    "sc_cot": Entry(self_consistency.make_sc_cot, "Self-Consistency+CoT"),
    "debate": Entry(debate.make_debate, "LLM-Debate"),
    "full_graph": Entry(graphs.make_full_graph, "Full-Graph"),
    "random_graph": Entry(graphs.make_random_graph, "Random-Graph"),
    "gdesigner": Entry(_gdesigner, "GDesigner", per_cell=True),
    "masrouter": Entry(_masrouter, "MASRouter", per_cell=True),
    "aflow": Entry(_aflow, "AFlow", per_cell=True),
    "agentprune": Entry(_agentprune, "AgentPrune", per_cell=True),
    "maas": Entry(_maas, "MaAS", per_cell=True),
    "arg_designer": Entry(_arg_designer, "ARG-Designer", per_cell=True),
    "hieramas": Entry(_hieramas, "HieraMAS", per_cell=True),
    "hieramas_total_cost": Entry(_hieramas_total_cost, "HieraMAS (total-cost reward; beyond the paper)",
                                 per_cell=True),
    "static_search": Entry(_static_search, "Best static configuration (search)", per_cell=True),
    "random_config": Entry(_random_config, "Random static configuration"),
}


def make_method(name: str, **kwargs: Any) -> Method:
  """A method instance by its registry name.

  E.g. `make_method("sc_cot")` or `make_method("gdesigner", benchmark="math", pool="gpt-5-mini", seed=0,
  iterations=4)`. Cell keywords reach only the factories that take them, so the runner can pass them to
  every method alike.
  """
  try:
    entry = METHODS[name]
  except KeyError:
    raise UnknownMethodError(name, METHODS) from None
  if not entry.per_cell:
    kwargs = {k: v for k, v in kwargs.items() if k not in CELL_ARGS}
  return entry.factory(**kwargs)


def check_method_names(names: Sequence[str]) -> list[str]:
  """Validates names up front (before a run starts) so a typo fails in the first second."""
  for n in names:
    if n not in METHODS:
      raise UnknownMethodError(n, METHODS)
  return list(names)


def title_of(name: str) -> str:
  """A method's title ("hieramas" -> "HieraMAS"); a name not in the table is its own title."""
  entry = METHODS.get(name)
  return entry.title if entry else name


def known_methods() -> list[str]:
  return sorted(METHODS)
