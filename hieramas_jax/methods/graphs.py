"""Fixed-topology multi-agent baselines of Table 1: Full-Graph and Random-Graph.

As the reference runs them (`experiments_v2/*/run_stage2_inference_baseline.py`, `aggregator_only`):
one agent per role of the benchmark's reference role set (`mas.roles.ROLE_SETS`), no proposers
(num_proposers = 0: the node answers alone), the setting's strong model everywhere, one round through the
supernode runtime (`runtime.run_mas`), ending with the decision node (strong model, reading every agent):

- Full-Graph: `mas.structures.full_graph`, every forward edge i -> j, i < j (the paper's MAS "with full
  graph", "enabling all agents to communicate");
- Random-Graph: the same agents on ONE seeded random DAG for the whole test split (the reference draws
  one graph per run), drawn with the graph pool's recipe (`learn.graph_pool.random_dags`: random order,
  spanning tree, extra forward edges) at a density ~ U[0.3, 0.7], key = fold_in(seed, 0);
  `per_query=True` draws one per query instead (key = fold_in(seed, crc32(item id))).

num_proposers = 2 gives the earlier supernode variants (W = 2 strong proposers + a strong synthesizer per
role), which is also the structure the simulator's Full-Graph validation runs (`experiment/calibration.py`).
"""

from __future__ import annotations

import dataclasses

import jax
import numpy as np

from hieramas_jax.benchmarks.data import Item
from hieramas_jax.learn import graph_pool
from hieramas_jax.mas import structures
from hieramas_jax.mas.config import MASConfig
from hieramas_jax.mas.runtime import run_mas
from hieramas_jax.mas.trace import Trace
from hieramas_jax.methods.api import RunContext, Untrained
from hieramas_jax.methods.digest import item_fold


@dataclasses.dataclass(frozen=True)
class FullGraph(Untrained):
  """Every role, every forward edge, one round, the strong model everywhere.

  Attributes:
    num_proposers: W, proposers per role (reference: 0, one agent per role).
  """

  name = "full_graph"
  num_proposers: int = 0

  async def solve(self, ctx: RunContext, item: Item) -> Trace:
    config = structures.full_graph(item.benchmark, ctx.pool.strong, proposers=self.num_proposers)
    return await run_mas(ctx.client, item, config, ctx.settings, method=self.name)


@dataclasses.dataclass(frozen=True)
class RandomGraph(Untrained):
  """One seeded random DAG over every role (per query with `per_query`), the strong model everywhere.

  Attributes:
    num_proposers: W, proposers per role (reference: 0, one agent per role).
    min_density, max_density: the range the graph's target density is drawn from.
    per_query: a new graph per query instead of one for the whole test split (the reference).
  """

  name = "random_graph"
  num_proposers: int = 0
  min_density: float = 0.3
  max_density: float = 0.7
  per_query: bool = False

  def __post_init__(self):
    if not 0.0 <= self.min_density <= self.max_density <= 1.0:
      raise ValueError(f"need 0 <= min_density <= max_density <= 1, got {self.min_density}, {self.max_density}")

  def graph_for(self, seed: int, item: Item, num_roles: int) -> np.ndarray:
    """The query's DAG: a pure function of the seed (and, per_query, the item id), whatever the order."""
    fold = item_fold(item.id) if self.per_query else 0
    adj = graph_pool.random_dags_at(jax.random.key(seed), np.uint32(fold),
                                    np.float32(self.min_density), np.float32(self.max_density), count=1,
                                    num_nodes=num_roles)
    return np.asarray(adj[0], bool)

  async def solve(self, ctx: RunContext, item: Item) -> Trace:
    nodes = structures.full_graph(item.benchmark, ctx.pool.strong, proposers=self.num_proposers).nodes
    adj = self.graph_for(ctx.seed, item, len(nodes))
    trace = await run_mas(ctx.client, item, MASConfig(nodes, adj, ctx.pool.strong), ctx.settings, method=self.name)
    trace.extra["graph_density"] = float(graph_pool.edge_density(adj[None], np.ones((1, len(nodes)), bool))[0])
    return trace


def make_full_graph(**kwargs) -> FullGraph:
  return FullGraph(**kwargs)


def make_random_graph(**kwargs) -> RandomGraph:
  return RandomGraph(**kwargs)
