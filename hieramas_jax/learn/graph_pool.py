"""The graph candidate pool: K seeded random DAGs over the role nodes (+ chain, star, full).

Reference recipe for one random DAG over N nodes at density d:
  1. a random node order (a permutation);
  2. a random spanning tree: every node after the first gets one parent drawn uniformly among the
     nodes before it in the order (so the graph is weakly connected);
  3. extra forward edges (earlier -> later in the order), chosen uniformly, until the graph has
     max(N - 1, round(d * N(N-1)/2)) edges.
Everything is drawn with jax.random from one key and vmapped over K, so the same seed gives the
same pool on any machine.

Densities are spread over sparse / medium / dense: the [min, max] range is cut in three equal
bands and K is split evenly across them (d ~ U[band] inside each), instead of one U[min, max].
Note that a spanning tree already has density 2/N, so for small N (MATH: 3 roles) sparse graphs
are trees.

`make_pool` is one pool shared by a whole test split; `per_query_pool` draws one query's K (the
reference's inference). The pool is one padded batch: adjacency [K, Nmax, Nmax] bool (adjacency[k, i, j]:
i's output goes to j), node_mask [K, Nmax], graph_mask [K] (False for padding graphs and masked
duplicates), density [K], kind [K] (0 random, 1 chain, 2 star, 3 full).
"""

from __future__ import annotations

import functools
from typing import NamedTuple

import jax
import jax.numpy as jnp
import numpy as np

KIND_RANDOM, KIND_CHAIN, KIND_STAR, KIND_FULL = 0, 1, 2, 3
KIND_NAMES = ("random", "chain", "star", "full")


class GraphPoolError(ValueError):
  """Bad pool request (sizes, densities)."""


class GraphPool(NamedTuple):
  """K candidate DAGs as one padded batch (numpy arrays, host side)."""

  adjacency: np.ndarray   # [K, Nmax, Nmax] bool
  node_mask: np.ndarray   # [K, Nmax] bool
  graph_mask: np.ndarray  # [K] bool
  density: np.ndarray     # [K] float32, edges / (n(n-1)/2) over real nodes
  kind: np.ndarray        # [K] int8

  @property
  def num_graphs(self) -> int:
    return int(self.adjacency.shape[0])


@functools.partial(jax.jit, static_argnames=("num_nodes",))
def random_dags(key: jax.Array, min_density: jax.Array, max_density: jax.Array, *, num_nodes: int) -> jax.Array:
  """[K, N, N] bool random DAGs, graph k at a target density ~ U[min_density[k], max_density[k]].

  All randomness comes from ONE uniform draw [K, 1 + 2N + N^2] (density, node order, tree parents,
  extra-edge scores): cheaper to compile than K vmapped permutation/threefry calls, same recipe.
  """
  num_graphs = min_density.shape[0]
  n = num_nodes
  u = jax.random.uniform(key, (num_graphs, 1 + 2 * n + n * n))
  density = min_density + u[:, 0] * (max_density - min_density)
  perm = jnp.argsort(u[:, 1:1 + n], axis=-1)  # uniform random order: perm[k, i] = node at position i
  idx = jnp.arange(n)
  # Spanning tree in order space: position j >= 1 gets parent floor(u * j) in [0, j).
  parent = jnp.floor(u[:, 1 + n:1 + 2 * n] * idx).astype(jnp.int32)  # [K, N]
  tree = (idx[None, :, None] == parent[:, None, :]) & (idx[None, None, :] >= 1)  # tree[k, i, j]: i -> j
  forward = idx[:, None] < idx[None, :]
  max_edges = n * (n - 1) // 2
  target = jnp.clip(jnp.round(density * max_edges).astype(jnp.int32), n - 1, max_edges)
  extra_needed = target - (n - 1)
  # Uniform choice of `extra_needed` non-tree forward pairs: those with the smallest random scores
  # (a sort, then a threshold; ties have probability zero).
  candidate = forward[None] & ~tree
  scores = jnp.where(candidate, u[:, 1 + 2 * n:].reshape(-1, n, n), 2.0)
  sorted_scores = jnp.sort(scores.reshape(num_graphs, -1), axis=-1)
  threshold = jnp.take_along_axis(sorted_scores, jnp.maximum(extra_needed - 1, 0)[:, None], axis=-1)
  extra = candidate & (scores <= threshold[:, :, None]) & (extra_needed > 0)[:, None, None]
  ordered = tree | extra
  # Node perm[i] sits at position i of the order: adjacency[a, b] = ordered[pos[a], pos[b]].
  pos = jnp.argsort(perm, axis=-1)
  return jax.vmap(lambda o, p: o[p[:, None], p[None, :]])(ordered, pos)


@functools.partial(jax.jit, static_argnames=("count", "num_nodes"))
def random_dags_at(key: jax.Array, data: jax.Array, min_density: jax.Array, max_density: jax.Array, *, count: int,
                   num_nodes: int) -> jax.Array:
  """`random_dags(fold_in(key, data), full(count, min_density), full(count, max_density))`, compiled.

  What the training loops and the Random-Graph baseline call once per step or query: run eagerly, the
  op-by-op dispatch cost ~20 ms of event-loop time each; compiled, well under a millisecond. Same numbers as
  the eager call (tests/test_learn_graph.py).
  """
  return random_dags(jax.random.fold_in(key, data), jnp.full((count,), min_density, jnp.float32),
                     jnp.full((count,), max_density, jnp.float32), num_nodes=num_nodes)


def chain(num_nodes: int) -> np.ndarray:
  """0 -> 1 -> ... -> N-1."""
  return np.eye(num_nodes, k=1, dtype=bool)


def star(num_nodes: int) -> np.ndarray:
  """Node 0 broadcasts to every other node (hub first, as a planner would)."""
  adj = np.zeros((num_nodes, num_nodes), bool)
  adj[0, 1:] = True
  return adj


def full(num_nodes: int) -> np.ndarray:
  """Every forward edge i -> j, i < j (the densest DAG in role order)."""
  return np.triu(np.ones((num_nodes, num_nodes), bool), k=1)


def edge_density(adjacency: np.ndarray, node_mask: np.ndarray) -> np.ndarray:
  """Edges / (n(n-1)/2) per graph over its real nodes ([..., N, N] -> [...]); 0 for n < 2."""
  n = node_mask.sum(-1)
  pairs = n * (n - 1) / 2
  edges = adjacency.sum((-1, -2))
  return np.where(pairs > 0, edges / np.maximum(pairs, 1), 0.0).astype(np.float32)


def make_pool(seed: int, num_nodes: int, num_random: int, *, min_density: float = 0.0,
              max_density: float = 1.0, include_reference: bool = True,
              max_nodes: int | None = None) -> GraphPool:
  """The candidate pool for a benchmark with `num_nodes` roles.

  Args:
    seed: pool seed (the pool is a pure function of its arguments).
    num_nodes: N, the benchmark's number of roles.
    num_random: random DAGs, split evenly over sparse / medium / dense bands of [min, max].
    min_density, max_density: range of target densities (clamped below by the spanning tree).
    include_reference: append chain, star and full (K = num_random + 3).
    max_nodes: pad nodes to this Nmax (default N).
  """
  if num_nodes < 1:
    raise GraphPoolError(f"num_nodes must be >= 1, got {num_nodes}")
  if num_random < 0:
    raise GraphPoolError(f"num_random must be >= 0, got {num_random}")
  if not 0.0 <= min_density <= max_density <= 1.0:
    raise GraphPoolError(f"need 0 <= min_density <= max_density <= 1, got {min_density}, {max_density}")
  max_nodes = num_nodes if max_nodes is None else max_nodes
  if max_nodes < num_nodes:
    raise GraphPoolError(f"max_nodes {max_nodes} < num_nodes {num_nodes}")
  edges = np.linspace(min_density, max_density, 4)
  band = np.arange(num_random) * 3 // max(num_random, 1)  # 0,0,..,1,1,..,2,2: even split
  graphs = []
  if num_random:
    graphs.append(np.asarray(random_dags(jax.random.key(seed), jnp.asarray(edges[band], jnp.float32),
                                         jnp.asarray(edges[band + 1], jnp.float32), num_nodes=num_nodes)))
  kinds = [np.full(num_random, KIND_RANDOM, np.int8)]
  if include_reference:
    graphs.append(np.stack([chain(num_nodes), star(num_nodes), full(num_nodes)]))
    kinds.append(np.array([KIND_CHAIN, KIND_STAR, KIND_FULL], np.int8))
  adj = np.concatenate(graphs) if graphs else np.zeros((0, num_nodes, num_nodes), bool)
  kind = np.concatenate(kinds)
  padded = np.zeros((adj.shape[0], max_nodes, max_nodes), bool)
  padded[:, :num_nodes, :num_nodes] = adj
  node_mask = np.zeros((adj.shape[0], max_nodes), bool)
  node_mask[:, :num_nodes] = True
  return GraphPool(padded, node_mask, np.ones(adj.shape[0], bool), edge_density(padded, node_mask), kind)


def per_query_pool(key: jax.Array, fold: int, num_graphs: int, num_nodes: int, *, min_density: float,
                   max_density: float) -> GraphPool:
  """K random DAGs for one query (the reference's inference: K graphs drawn per test query).

  Graph k has a target density ~ U[min_density, max_density] (no bands, no chain/star/full), drawn from
  `fold_in(key, fold)` by the compiled `random_dags_at`, so the shape [K, N, N] and its one compiled
  executable are the same for every query. The reference keeps only distinct graphs (it redraws a
  duplicate); here a graph equal to an earlier one stays in place with its node mask cleared, so it is
  padding (the scorer gives it -inf) and K stays fixed. With few roles (MATH: 3) most of the K are such
  duplicates: every distinct DAG of that density range is among the candidates.

  Args:
    key: the inference key (the caller folds in its stage tag).
    fold: the query's fold (a hash of its item id), so the same (seed, item) gives the same candidates.
    num_graphs: K.
    num_nodes: N, the benchmark's number of roles.
    min_density, max_density: the target density range.
  """
  if num_graphs < 1:
    raise GraphPoolError(f"num_graphs must be >= 1, got {num_graphs}")
  if not 0.0 <= min_density <= max_density <= 1.0:
    raise GraphPoolError(f"need 0 <= min_density <= max_density <= 1, got {min_density}, {max_density}")
  adj = np.asarray(random_dags_at(key, np.uint32(fold), np.float32(min_density), np.float32(max_density),
                                  count=num_graphs, num_nodes=num_nodes))
  _, first = np.unique(adj.reshape(num_graphs, -1), axis=0, return_index=True)
  distinct = np.zeros(num_graphs, bool)
  distinct[first] = True
  node_mask = np.broadcast_to(distinct[:, None], (num_graphs, num_nodes)).copy()
  density = edge_density(adj, np.ones((num_graphs, num_nodes), bool))
  return GraphPool(adj, node_mask, distinct, density, np.full(num_graphs, KIND_RANDOM, np.int8))


def pad_pool(pool: GraphPool, num_graphs: int) -> GraphPool:
  """Pads the pool to exactly `num_graphs` graphs (a fixed budget, so shapes never change)."""
  k = pool.num_graphs
  if num_graphs < k:
    raise GraphPoolError(f"cannot pad {k} graphs down to {num_graphs}")
  extra = num_graphs - k
  def pad(x):
    return np.concatenate([x, np.zeros((extra,) + x.shape[1:], x.dtype)])
  return GraphPool(*(pad(x) for x in pool))


def is_dag(adjacency: np.ndarray) -> bool:
  """True if the [N, N] adjacency has no directed cycle (repeated removal of sources)."""
  adj = np.asarray(adjacency, bool).copy()
  alive = np.ones(adj.shape[0], bool)
  while alive.any():
    sources = alive & ~(adj[alive].any(axis=0))
    if not sources.any():
      return False
    alive &= ~sources
    adj[sources] = False
  return True


def is_weakly_connected(adjacency: np.ndarray) -> bool:
  sym = np.asarray(adjacency, bool) | np.asarray(adjacency, bool).T
  seen = np.zeros(sym.shape[0], bool)
  seen[0] = True
  for _ in range(sym.shape[0]):
    seen = seen | sym[seen].any(axis=0)
  return bool(seen.all())
