"""Named MAS structures used by baselines, calibration and validation.

One definition each, so that the Table 1 Full-Graph row, the sim's validation of Full-Graph and
the collaboration table all run the same system:

- `full_graph`: every role of the benchmark as a supernode (W proposers + a synthesizer, the
  paper's MAS "with full graph"), every forward edge i -> j (i < j), one round, one model at every
  position, and the final decision node.
- `chain`: the first n roles as single agents in a chain, then the decision node.
- `supernode`: one role, W proposers and a synthesizer, no decision node (its synthesizer answers).
- `sparse_graph`: every role as a supernode on a seeded random DAG of a given density (the
  reference's random-DAG recipe), then the decision node; used for the cost check of the
  "w/o LLM Selection" row (the strong model at every position of a sparse learned-like graph).
"""

from __future__ import annotations

from typing import Sequence

import numpy as np

from hieramas_jax.mas import roles
from hieramas_jax.mas.config import MASConfig, Supernode


def full_graph(benchmark: str, model: str, proposers: int = 2) -> MASConfig:
  names = roles.roles_for(benchmark)
  n = len(names)
  adjacency = np.triu(np.ones((n, n), dtype=bool), k=1)
  nodes = tuple(Supernode(r, (model,) * proposers, model) for r in names)
  return MASConfig(nodes, adjacency, model)


def chain(benchmark: str, model: str, n_roles: int = 3, decision: bool = True) -> MASConfig:
  names = roles.roles_for(benchmark)[:n_roles]
  n = len(names)
  adjacency = np.eye(n, k=1, dtype=bool)
  return MASConfig(tuple(Supernode(r, (), model) for r in names), adjacency, model if decision else None)


def supernode(benchmark: str, proposers: Sequence[str], synthesizer: str, role: str | None = None) -> MASConfig:
  role = role or roles.roles_for(benchmark)[0]
  return MASConfig((Supernode(role, tuple(proposers), synthesizer),), np.zeros((1, 1), dtype=bool), None)


def sparse_graph(benchmark: str, model: str, *, proposers: int = 2, density: float = 0.3, seed: int = 0,
                 n_roles: int | None = None) -> MASConfig:
  """Roles as supernodes on a seeded random DAG: a random order, a spanning tree (each node gets an
  earlier parent), then extra forward edges up to `density` of n(n-1)/2 (the reference recipe)."""
  names = roles.roles_for(benchmark)[:n_roles]
  n = len(names)
  rng = np.random.default_rng([seed, n, 4243])
  order = rng.permutation(n)
  adjacency = np.zeros((n, n), dtype=bool)
  for pos in range(1, n):
    adjacency[order[rng.integers(pos)], order[pos]] = True
  target = max(int(round(density * n * (n - 1) / 2)), n - 1)
  free = [(order[a], order[b]) for a in range(n) for b in range(a + 1, n) if not adjacency[order[a], order[b]]]
  for k in rng.permutation(len(free))[:max(target - (n - 1), 0)]:
    adjacency[free[k]] = True
  nodes = tuple(Supernode(r, (model,) * proposers, model) for r in names)
  return MASConfig(nodes, adjacency, model)
