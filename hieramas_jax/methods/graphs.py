"""Fixed-topology multi-agent baselines of Table 1: Full-Graph and Random-Graph.

Both put every role of the benchmark's reference role set (`mas.roles.ROLE_SETS`) in a supernode of W
proposers and a synthesizer, the setting's strong model at every position, run one round through the
supernode runtime (`runtime.run_mas`) and end with the decision node (strong model, reading every
agent's output):

- Full-Graph: `mas.structures.full_graph`, every forward edge i -> j, i < j (the paper's MAS "with full
  graph", "enabling all agents to communicate"); the sim's validation of the published Full-Graph
  average runs this same structure;
- Random-Graph: the same supernodes on a seeded random DAG per query, drawn with the graph pool's
  recipe (`learn.graph_pool.random_dags`: random order, spanning tree, extra forward edges) at a density
  ~ U[0.3, 0.7] (the reference code's stage-1 training range), key = fold_in(seed, crc32(item id)).
"""

from __future__ import annotations

import dataclasses
import zlib

import jax
import numpy as np

from hieramas_jax.benchmarks.data import Item
from hieramas_jax.learn import graph_pool
from hieramas_jax.mas import structures
from hieramas_jax.mas.config import MASConfig
from hieramas_jax.mas.runtime import run_mas
from hieramas_jax.mas.trace import Trace
from hieramas_jax.methods.api import RunContext, Untrained, register


@dataclasses.dataclass(frozen=True)
class FullGraph(Untrained):
  """Every role, every forward edge, one round, the strong model everywhere.

  Attributes:
    num_proposers: W, proposers per supernode (the paper's MAS: 2).
  """

  name = "full_graph"
  num_proposers: int = 2

  async def solve(self, ctx: RunContext, item: Item) -> Trace:
    config = structures.full_graph(item.benchmark, ctx.pool.strong, proposers=self.num_proposers)
    return await run_mas(ctx.client, item, config, ctx.settings, method=self.name)


@dataclasses.dataclass(frozen=True)
class RandomGraph(Untrained):
  """A seeded random DAG per query over every role's supernode, the strong model everywhere.

  Attributes:
    num_proposers: W, proposers per supernode.
    min_density, max_density: the range the query's target density is drawn from.
  """

  name = "random_graph"
  num_proposers: int = 2
  min_density: float = 0.3
  max_density: float = 0.7

  def __post_init__(self):
    if not 0.0 <= self.min_density <= self.max_density <= 1.0:
      raise ValueError(f"need 0 <= min_density <= max_density <= 1, got {self.min_density}, {self.max_density}")

  def graph_for(self, seed: int, item: Item, num_roles: int) -> np.ndarray:
    """The query's DAG: a pure function of (seed, item id), whatever order queries run in."""
    adj = graph_pool.random_dags_at(jax.random.key(seed), np.uint32(zlib.crc32(item.id.encode())),
                                    np.float32(self.min_density), np.float32(self.max_density), count=1,
                                    num_nodes=num_roles)
    return np.asarray(adj[0], bool)

  async def solve(self, ctx: RunContext, item: Item) -> Trace:
    nodes = structures.full_graph(item.benchmark, ctx.pool.strong, proposers=self.num_proposers).nodes
    adj = self.graph_for(ctx.seed, item, len(nodes))
    trace = await run_mas(ctx.client, item, MASConfig(nodes, adj, ctx.pool.strong), ctx.settings, method=self.name)
    trace.extra["graph_density"] = float(graph_pool.edge_density(adj[None], np.ones((1, len(nodes)), bool))[0])
    return trace


@register("full_graph")
def make_full_graph(**kwargs) -> FullGraph:
  return FullGraph(**kwargs)


@register("random_graph")
def make_random_graph(**kwargs) -> RandomGraph:
  return RandomGraph(**kwargs)
