"""A concrete multi-agent system: which LLMs sit in which supernode, and the DAG between them.

Both the learned policy (hieramas_jax/learn) and the hand-written baselines produce a `MASConfig`;
the runtime (hieramas_jax/mas/runtime.py) only ever executes one. Skips are resolved before a config
exists: a skipped proposer is simply absent, a skipped synthesizer removes the node and its edges
(`drop_nodes`).
"""

from __future__ import annotations

import dataclasses

import numpy as np

from hieramas_jax.errors import UserError
from hieramas_jax.llm.registry import SKIP


class ConfigError(UserError, ValueError):
  """A MAS configuration that cannot run (cycle, bad shapes, empty supernode...)."""


@dataclasses.dataclass(frozen=True)
class Supernode:
  """One functional role: W proposers called in parallel, one synthesizer merging them.

  With zero proposers the synthesizer answers alone (a plain agent).
  """

  role: str
  proposers: tuple[str, ...]
  synthesizer: str

  def __post_init__(self):
    if self.synthesizer == SKIP:
      raise ConfigError(f"supernode {self.role!r}: a skipped synthesizer removes the node; drop it instead")
    if SKIP in self.proposers:
      raise ConfigError(f"supernode {self.role!r}: skipped proposers must be left out, not listed")

  @property
  def models(self) -> tuple[str, ...]:
    return self.proposers + (self.synthesizer,)


@dataclasses.dataclass(frozen=True, eq=False)
class MASConfig:
  """Supernodes, a DAG over them (adjacency[i, j] = output of i is an input of j), a decider.

  `decision_model=None` means no final decision call: the DAG must then have exactly one sink,
  whose output is the system's answer (used where a graph already ends in one node, e.g. the
  executor benchmark's DAG, whose critical path the issue counts without a decision call).
  """

  nodes: tuple[Supernode, ...]
  adjacency: np.ndarray
  decision_model: str | None

  def __post_init__(self):
    adj = np.asarray(self.adjacency, dtype=bool)
    n = len(self.nodes)
    if adj.shape != (n, n):
      raise ConfigError(f"adjacency shape {adj.shape} does not match {n} nodes")
    if np.any(np.diag(adj)):
      raise ConfigError("self-loops are not allowed")
    object.__setattr__(self, "adjacency", adj)
    self.topological_order()  # raises on a cycle
    if self.decision_model is None and len(self.sinks()) != 1:
      raise ConfigError(f"without a decision model the DAG needs exactly one sink, got {len(self.sinks())}")

  def predecessors(self, j: int) -> list[int]:
    return [int(i) for i in np.flatnonzero(self.adjacency[:, j])]

  def topological_order(self) -> list[int]:
    indeg = self.adjacency.sum(axis=0).astype(int)
    ready = [i for i in range(len(self.nodes)) if indeg[i] == 0]
    order = []
    while ready:
      i = ready.pop(0)
      order.append(i)
      for j in np.flatnonzero(self.adjacency[i]):
        indeg[j] -= 1
        if indeg[j] == 0:
          ready.append(int(j))
    if len(order) != len(self.nodes):
      raise ConfigError("adjacency has a cycle: a MAS graph must be a DAG")
    return order

  def sinks(self) -> list[int]:
    return [i for i in range(len(self.nodes)) if not self.adjacency[i].any()]

  def depth(self) -> int:
    """Longest path, counted in nodes (a lone node has depth 1)."""
    level = [1] * len(self.nodes)
    for i in self.topological_order():
      for j in np.flatnonzero(self.adjacency[i]):
        level[j] = max(level[j], level[i] + 1)
    return max(level, default=0)

  def drop_nodes(self, keep: list[int] | np.ndarray) -> "MASConfig":
    """The config restricted to `keep` (e.g. roles whose synthesizer was not skipped)."""
    keep = [int(k) for k in keep]
    return MASConfig(tuple(self.nodes[k] for k in keep), self.adjacency[np.ix_(keep, keep)],
                     self.decision_model)

  def to_json(self) -> dict:
    return {"nodes": [dataclasses.asdict(s) for s in self.nodes],
            "edges": [[int(i), int(j)] for i, j in zip(*np.nonzero(self.adjacency))],
            "decision_model": self.decision_model}
