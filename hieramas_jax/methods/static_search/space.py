"""The oracle's configuration space: what a static configuration may choose, and how candidates are drawn.

A static configuration fixes everything HieraMAS chooses per query, once for all queries: for every
role of the benchmark, W proposer positions and a synthesizer position, each one of the setting's
models or skip (the learned policy's choice space, turned into a `MASConfig` by the same
`learn.policy.choices_to_config`, skip semantics included), and one DAG from a seeded graph pool
(`learn.graph_pool.make_pool`: random DAGs of every density + chain, star, full).

Candidates come from three families, because uniform draws alone almost never skip a role and the
reward punishes cost hard (below a third of a cent per query every call counts): `uniform` (each
position uniform over models + skip, the `random_reward` distribution), `sparse` (1..R active roles,
0..W proposers each), and `structured` (every single model everywhere on chain / star / full, every
model alone in every role, strong model with W proposers); `mutate` gives a survivor's neighbours.
A configuration's identity is `config_key`: the effective MASConfig (after skips) and the sampling
settings. Evaluating configurations is `store.py`; the search over them is `search.py`.
"""

from __future__ import annotations

import dataclasses
import hashlib
import json
from typing import Any

import numpy as np

from hieramas_jax.errors import UserError
from hieramas_jax.learn.graph_pool import KIND_NAMES, make_pool
from hieramas_jax.learn.policy import choices_to_config
from hieramas_jax.llm.registry import PoolSetting, get_model
from hieramas_jax.mas import roles as roles_lib
from hieramas_jax.mas.config import MASConfig
from hieramas_jax.mas.runtime import RunSettings


class OracleError(UserError, ValueError):
  """An oracle request that cannot run (budget too small, empty split, bad sizes...).

  It lives in the package's lowest module because the space, the store and the search all raise it.
  """


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
          "models_used": models_by_price({m for n in config.nodes for m in n.models} | {config.decision_model})}


def models_by_price(models) -> list[str]:
  """Cheapest output price first; equal prices (qwen3-8b and gpt-5-nano) by name, not by the order a set
  happens to iterate in, which changes with each process's string hashing."""
  return sorted(models, key=lambda m: (get_model(m).price_out, m))
