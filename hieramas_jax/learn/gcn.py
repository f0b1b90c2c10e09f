"""GCN graph classifier f_G (paper Sec. 3.4): scores (query, candidate DAG) pairs.

Model, for a query q [D], role embeddings R [N, D], and candidate k with adjacency A_k:

  A_hat_k = D^-1/2 S D^-1/2,   S = (A_k + A_k^T) restricted to real nodes, + I on real nodes
  X_k     = [R ; q 1^T]  (+ direction features F_k = [in-degree, out-degree] / (n - 1))
  H1      = relu(A_hat_k X_k W1 + b1)                        (layer 1)
  H2      = A_hat_k H1 W2 + b2                               (layer 2, linear as in Kipf & Welling)
  g       = masked mean over real nodes of H2
  s_k     = w3^T relu(W_mlp g + b_mlp) + b3                  (logit; sigmoid gives the probability)

Why symmetrise: a GCN over the directed adjacency only lets information flow forward, so a source
node's representation never sees the rest of the graph, and the Kipf-Welling normalisation is defined
for a symmetric S. Symmetrising loses edge direction, which matters in a MAS (who speaks first), so
each node also gets its normalised in/out degree as features: sources, sinks and hubs stay
distinguishable (the paper's own analysis of learned graphs is in those terms). A DAG has no
2-cycles, so A + A^T is still 0/1.

Shared work, computed once instead of per (query, graph) pair:
  - the first layer's linear map splits: X_k W1 = R W1_r (+ F_k W1_f) + 1 (q W1_q), so
    A_hat_k X_k W1 = A_hat_k (R W1_r + F_k W1_f)  [K, N, H, no query]  + rowsum(A_hat_k) (q W1_q)  [Q, H];
  - layer 2 is linear before the mean pool, so pool(A_hat H1 W2 + b2) = (p_k^T H1) W2 + b2 with
    p_k = column means of A_hat_k over real rows: a weighted node sum, then ONE [H, H] matmul per pair
    instead of one per node;
  - A_hat, p, row sums and degree features depend only on the pool (`prepare_pool`, once per pool).
The only [Q, K, N, H] work left is relu(...) then the weighted node sum, done node by node.
"""

from __future__ import annotations

import functools
from typing import NamedTuple

import flax.linen as nn
import jax
import jax.numpy as jnp


class PreparedPool(NamedTuple):
  """Everything about a candidate pool that does not depend on queries or parameters.

  Attributes:
    a_hat: [K, N, N] Kipf-Welling normalised symmetrised adjacency (zero rows/cols on padding).
    row_sum: [K, N] sum_j a_hat[k, i, j] (how much of the query term node i receives).
    pool_weight: [K, N] p[k, j] = (1/n_k) sum_{real i} a_hat[k, i, j] (layer 2 + mean pool).
    direction: [K, N, 2] in/out degree / (n_k - 1) of the directed graph (0 on padding).
    node_mask: [K, N] real nodes.
    graph_mask: [K] real graphs (at least one real node).
  """

  a_hat: jax.Array
  row_sum: jax.Array
  pool_weight: jax.Array
  direction: jax.Array
  node_mask: jax.Array
  graph_mask: jax.Array


def normalized_adjacency(adjacency, node_mask):
  """D^-1/2 (A + A^T + I) D^-1/2 over real nodes; [..., N, N] bool, [..., N] bool -> [..., N, N] f32."""
  mask = jnp.asarray(node_mask, bool)
  pair = mask[..., :, None] & mask[..., None, :]
  adj = jnp.asarray(adjacency, bool)
  sym = (adj | jnp.swapaxes(adj, -1, -2)) & pair
  eye = jnp.eye(adj.shape[-1], dtype=bool)
  s = (sym | (eye & pair)).astype(jnp.float32)
  deg = s.sum(-1)
  dinv = jnp.where(deg > 0, jax.lax.rsqrt(jnp.maximum(deg, 1e-12)), 0.0)
  return dinv[..., :, None] * s * dinv[..., None, :]


@jax.jit
def prepare_pool(adjacency, node_mask) -> PreparedPool:
  """Per-pool precomputation ([K, N, N] bool, [K, N] bool); call once per pool, reuse for all queries."""
  mask = jnp.asarray(node_mask, bool)
  adj = jnp.asarray(adjacency, bool) & mask[..., :, None] & mask[..., None, :]
  a_hat = normalized_adjacency(adj, mask)
  n = mask.sum(-1).astype(jnp.float32)
  pool_weight = a_hat.sum(-2) / jnp.maximum(n, 1.0)[..., None]
  scale = 1.0 / jnp.maximum(n - 1.0, 1.0)[..., None]
  direction = jnp.stack([adj.sum(-2) * scale, adj.sum(-1) * scale], axis=-1).astype(jnp.float32)
  return PreparedPool(a_hat, a_hat.sum(-1), pool_weight, direction, mask, mask.any(-1))


class GCNScorer(nn.Module):
  """Scores [Q, K] for Q queries against K prepared candidates (logits; -inf on padding graphs).

  Attributes:
    hidden: GCN width H (reference: 128).
    mlp_hidden: MLP width (reference: 64).
    dropout_rate: dropout on H1 and the MLP hidden layer in training (reference: 0.5).
    direction_features: add in/out-degree features (see module docstring).
  """

  hidden: int = 128
  mlp_hidden: int = 64
  dropout_rate: float = 0.5
  direction_features: bool = True

  @nn.compact
  def __call__(self, query_emb, role_emb, pool: PreparedPool, *, deterministic: bool = True):
    """Scores [Q, K].

    `pool` is either shared by all queries (arrays [K, ...], from `prepare_pool` on [K, N, N]) or
    paired, one set of graphs per query (arrays [Q, K, ...], from `prepare_pool` on [Q, K, N, N]:
    stage-2 training, where each query has its own candidates).
    """
    if pool.a_hat.ndim == 3:  # shared pool: a leading axis of 1 broadcasts against the queries
      pool = PreparedPool(*(x[None] for x in pool))
    dense = functools.partial(nn.Dense, self.hidden, use_bias=False)
    role_part = dense(name="role_in")(role_emb)  # [N, H], shared by all graphs and queries
    query_part = dense(name="query_in")(query_emb)  # [Q, H], shared by all nodes and graphs
    node_part = jnp.broadcast_to(role_part, pool.direction.shape[:-1] + (self.hidden,))
    if self.direction_features:
      node_part = node_part + dense(name="direction_in")(pool.direction)  # [1 or Q, K, N, H]
    graph_part = jnp.einsum("pkij,pkjh->pkih", pool.a_hat, node_part)  # no query term
    b1 = self.param("gcn1_bias", nn.initializers.zeros, (self.hidden,))
    # H1 node by node, accumulating p-weighted sums: N is small and static, and this unrolled form
    # keeps XLA from materialising [Q, K, N, H] and reducing over a middle axis (measured ~50x faster
    # on CPU than jnp.sum(..., axis=2)).
    num_queries, num_graphs, num_nodes = query_emb.shape[0], pool.a_hat.shape[1], pool.a_hat.shape[-1]
    use_dropout = not deterministic and self.dropout_rate > 0
    if use_dropout:
      # One mask draw for all nodes (one PRNG call instead of N: much faster to compile).
      keep = jax.random.bernoulli(self.make_rng("dropout"), 1.0 - self.dropout_rate,
                                  (num_queries, num_graphs, num_nodes, self.hidden))
    pooled_h1 = 0.0
    for j in range(num_nodes):
      h1_j = jax.nn.relu(graph_part[:, :, j, :] + pool.row_sum[:, :, j, None] * query_part[:, None, :] + b1)
      if use_dropout:
        h1_j = jnp.where(keep[:, :, j], h1_j / (1.0 - self.dropout_rate), 0.0)
      pooled_h1 = pooled_h1 + pool.pool_weight[:, :, j, None] * h1_j  # [Q, K, H]
    g = nn.Dense(self.hidden, name="gcn2")(pooled_h1)
    z = jax.nn.relu(nn.Dense(self.mlp_hidden, name="mlp_hidden")(g))
    if use_dropout:
      z = jnp.where(jax.random.bernoulli(self.make_rng("dropout"), 1.0 - self.dropout_rate, z.shape),
                    z / (1.0 - self.dropout_rate), 0.0)
    score = nn.Dense(1, name="mlp_out")(z)[..., 0]
    return jnp.where(pool.graph_mask, score, -jnp.inf)


DEFAULT_SCORER = GCNScorer()


def init_params(rng: jax.Array, query_emb, role_emb, adjacency, node_mask, net: GCNScorer = DEFAULT_SCORER):
  """Fresh parameters (shapes from one example; Q and K may differ later)."""
  return _jit_init(net, rng, query_emb, role_emb, prepare_pool(adjacency, node_mask))["params"]


@functools.partial(jax.jit, static_argnums=0)
def _jit_init(net, rng, query_emb, role_emb, pool):
  # Jitted: eager Flax init compiles op by op (~15 s on a busy 2-core CPU).
  return net.init(rng, query_emb, role_emb, pool)


@functools.partial(jax.jit, static_argnames=("net",))
def score_prepared(params, query_emb, role_emb, pool: PreparedPool, *, net: GCNScorer = DEFAULT_SCORER):
  """[Q, K] scores for a pool already passed through `prepare_pool` (the fast path at inference)."""
  return net.apply({"params": params}, query_emb, role_emb, pool)


def _score_candidates(params, query_emb, role_emb, adjacency, node_mask, net):
  return net.apply({"params": params}, query_emb, role_emb, prepare_pool(adjacency, node_mask))


score_candidates_impl = _score_candidates  # un-jitted, for `chex.assert_max_traces` in tests


@functools.partial(jax.jit, static_argnames=("net",))
def score_candidates(params, query_emb, role_emb, adjacency, node_mask, *, net: GCNScorer = DEFAULT_SCORER):
  """Scores all K candidates for Q queries in ONE jitted call.

  Args:
    params: scorer parameters.
    query_emb: [Q, D] query embeddings.
    role_emb: [N, D] role-description embeddings (padding rows are ignored).
    adjacency: [K, N, N] bool DAGs (graph_pool.GraphPool.adjacency).
    node_mask: [K, N] bool real nodes; a graph with no real node is padding and scores -inf.

  Returns:
    [Q, K] float32 logits. Shapes are fixed by the caller's padding, so repeated calls with new
    queries or a new pool of the same shape never recompile.
  """
  return _score_candidates(params, query_emb, role_emb, adjacency, node_mask, net)


def best_graph(scores) -> jax.Array:
  """G* = argmax_k s_k per query ([Q, K] -> [Q])."""
  return jnp.argmax(scores, axis=-1)
