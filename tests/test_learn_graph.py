"""Graph pool, GCN scorer (normalisation, padding, no recompiles, K = 10,000) and stage 2."""

from __future__ import annotations

import math

import chex
import jax
import jax.numpy as jnp
import numpy as np
import pytest

from hieramas_jax.learn import gcn, graph_pool, stage2

SMALL = gcn.GCNScorer(hidden=16, mlp_hidden=8, dropout_rate=0.1)
N, D = 4, 8


def _emb(rows, seed):
  x = np.random.default_rng(seed).normal(size=(rows, D)).astype(np.float32)
  return jnp.asarray(x / np.linalg.norm(x, axis=-1, keepdims=True))


@pytest.fixture(scope="module")
def pool():
  return graph_pool.make_pool(0, N, 27)  # 27 random + chain, star, full = 30 graphs


def test_pool_is_seeded_acyclic_connected_and_spread(pool):
  again = graph_pool.make_pool(0, N, 27)
  other = graph_pool.make_pool(1, N, 27)
  np.testing.assert_array_equal(pool.adjacency, again.adjacency)
  assert not np.array_equal(pool.adjacency, other.adjacency)
  assert pool.num_graphs == 30 and pool.adjacency.shape == (30, N, N)
  assert all(graph_pool.is_dag(a) and graph_pool.is_weakly_connected(a) for a in pool.adjacency)
  np.testing.assert_array_equal(pool.kind[-3:], [graph_pool.KIND_CHAIN, graph_pool.KIND_STAR, graph_pool.KIND_FULL])
  random_density = pool.density[:27]
  # A spanning tree on 4 nodes has density 3/6; the bands still reach medium and full density.
  assert random_density.min() == pytest.approx(0.5) and random_density.max() == pytest.approx(1.0)
  assert len(np.unique(random_density)) == 4  # 3, 4, 5 and 6 edges all occur
  padded = graph_pool.pad_pool(pool, 32)
  assert padded.num_graphs == 32 and not padded.graph_mask[30:].any() and not padded.node_mask[30:].any()


def test_random_dag_density_hits_its_target():
  n = 8
  targets = jnp.linspace(0.0, 1.0, 50)
  adj = np.asarray(graph_pool.random_dags(jax.random.key(0), targets, targets, num_nodes=n))
  edges = adj.sum((1, 2))
  expected = np.clip(np.round(np.asarray(targets) * 28), n - 1, 28)
  np.testing.assert_array_equal(edges, expected)
  assert all(graph_pool.is_dag(a) and graph_pool.is_weakly_connected(a) for a in adj)


def test_compiled_random_dags_at_equals_the_eager_call():
  key = jax.random.key(7)
  for n, count, fold, lo, hi in [(4, 1, 0, 0.3, 0.7), (6, 64, 19, 0.3, 1.0), (9, 5, 2**32 - 1, 0.0, 0.0)]:
    eager = graph_pool.random_dags(jax.random.fold_in(key, fold), jnp.full((count,), lo, jnp.float32),
                                   jnp.full((count,), hi, jnp.float32), num_nodes=n)
    compiled = graph_pool.random_dags_at(key, np.uint32(fold), np.float32(lo), np.float32(hi), count=count,
                                         num_nodes=n)
    np.testing.assert_array_equal(np.asarray(compiled), np.asarray(eager))


def test_normalisation_on_a_hand_computed_3_node_graph():
  # Chain 0 -> 1 -> 2, plus a padding node 3 with (ignored) edges to and from it.
  adj = np.zeros((4, 4), bool)
  adj[0, 1] = adj[1, 2] = adj[3, 0] = adj[2, 3] = True
  mask = np.array([True, True, True, False])
  a_hat = np.asarray(gcn.normalized_adjacency(adj, mask))
  # S = A + A^T + I on real nodes: degrees 2, 3, 2.
  r6 = 1 / math.sqrt(6)
  expected = np.array([[1 / 2, r6, 0, 0], [r6, 1 / 3, r6, 0], [0, r6, 1 / 2, 0], [0, 0, 0, 0]])
  np.testing.assert_allclose(a_hat, expected, atol=1e-6)
  prepared = gcn.prepare_pool(adj[None], mask[None])
  np.testing.assert_allclose(prepared.pool_weight[0], expected.sum(0) / 3, atol=1e-6)
  np.testing.assert_allclose(prepared.direction[0], [[0, 0.5], [0.5, 0.5], [0.5, 0], [0, 0]])


def _naive_scores(params, query_emb, role_emb, adjacency, node_mask):
  """Per (query, graph) forward pass in numpy, straight from the formulas (no shared-work tricks)."""
  p = jax.tree_util.tree_map(np.asarray, params)
  w1 = np.concatenate([p["role_in"]["kernel"], p["query_in"]["kernel"], p["direction_in"]["kernel"]])
  out = np.zeros((len(query_emb), len(adjacency)), np.float32)
  for qi, q in enumerate(np.asarray(query_emb)):
    for k, (a, m) in enumerate(zip(adjacency, node_mask)):
      idx = np.flatnonzero(m)
      a = a[np.ix_(idx, idx)].astype(np.float32)
      n = len(idx)
      s = a + a.T + np.eye(n)
      d = 1 / np.sqrt(s.sum(1))
      a_hat = d[:, None] * s * d[None]
      direction = np.stack([a.sum(0), a.sum(1)], 1) / max(n - 1, 1)
      x = np.concatenate([np.asarray(role_emb)[idx], np.repeat(q[None], n, 0), direction], 1)
      h1 = np.maximum(a_hat @ x @ w1 + p["gcn1_bias"], 0)
      g = (a_hat @ h1 @ p["gcn2"]["kernel"] + p["gcn2"]["bias"]).mean(0)
      z = np.maximum(g @ p["mlp_hidden"]["kernel"] + p["mlp_hidden"]["bias"], 0)
      out[qi, k] = (z @ p["mlp_out"]["kernel"] + p["mlp_out"]["bias"])[0]
  return out


def test_scores_match_naive_gcn_and_padding_changes_nothing(pool):
  queries, roles = _emb(3, 1), _emb(N, 2)
  params = gcn.init_params(jax.random.key(0), queries, roles, pool.adjacency, pool.node_mask, SMALL)
  scores = np.asarray(gcn.score_candidates(params, queries, roles, pool.adjacency, pool.node_mask, net=SMALL))
  assert scores.shape == (3, 30)
  np.testing.assert_allclose(scores[:, :6], _naive_scores(params, queries, roles, pool.adjacency[:6],
                                                         pool.node_mask[:6]), atol=1e-5)
  np.testing.assert_allclose(scores[:, -3:], _naive_scores(params, queries, roles, pool.adjacency[-3:],
                                                          pool.node_mask[-3:]), atol=1e-5)
  # Pad to 6 nodes with garbage role rows and garbage edges on padding, and to 32 graphs.
  rng = np.random.default_rng(5)
  adj = rng.random((32, 6, 6)) < 0.5
  adj[:30, :N, :N] = pool.adjacency
  mask = np.zeros((32, 6), bool)
  mask[:30, :N] = True
  padded_roles = jnp.concatenate([roles, _emb(2, 9) * 100])
  padded = np.asarray(gcn.score_candidates(params, queries, padded_roles, adj, mask, net=SMALL))
  np.testing.assert_allclose(padded[:, :30], scores, atol=1e-5)
  assert np.all(padded[:, 30:] == -np.inf)
  np.testing.assert_array_equal(gcn.best_graph(padded), gcn.best_graph(scores))


def test_one_trace_for_new_queries_and_pools_and_same_seed_same_scores(pool):
  roles = _emb(N, 2)
  params = gcn.init_params(jax.random.key(0), _emb(1, 1), roles, pool.adjacency, pool.node_mask, SMALL)
  again = gcn.init_params(jax.random.key(0), _emb(1, 1), roles, pool.adjacency, pool.node_mask, SMALL)
  scorer = jax.jit(chex.assert_max_traces(gcn.score_candidates_impl, n=1), static_argnums=5)
  other = graph_pool.make_pool(7, N, 27)
  first = scorer(params, _emb(4, 1), roles, pool.adjacency, pool.node_mask, SMALL)
  for seed, p in ((3, other), (4, pool)):
    scorer(params, _emb(4, seed), roles, p.adjacency, p.node_mask, SMALL)  # would raise on a retrace
  np.testing.assert_array_equal(first, scorer(again, _emb(4, 1), roles, pool.adjacency, pool.node_mask, SMALL))
  # The module-level jitted scorer keeps one compiled version across new queries and pools too.
  gcn.score_candidates(params, _emb(4, 1), roles, pool.adjacency, pool.node_mask, net=SMALL)
  size = gcn.score_candidates._cache_size()
  gcn.score_candidates(params, _emb(4, 8), roles, other.adjacency, other.node_mask, net=SMALL)
  assert gcn.score_candidates._cache_size() == size


# Slow (a 10,000-graph batch); batched scoring of a query's pool is in the fast tier at small K.
@pytest.mark.slow
def test_k_10000_candidates_in_one_call():
  roles, query = _emb(8, 2), _emb(1, 1)
  base = graph_pool.make_pool(3, 8, 97)  # tile a 100-graph pool to 10,000 (scoring, not generation, is tested)
  adj, mask = np.tile(base.adjacency, (100, 1, 1)), np.tile(base.node_mask, (100, 1))
  params = gcn.init_params(jax.random.key(0), query, roles, adj[:1], mask[:1])  # default sizes: H = 128
  scores = np.asarray(gcn.score_candidates(params, query, roles, adj, mask))
  assert scores.shape == (1, 10_000) and np.isfinite(scores).all()
  np.testing.assert_allclose(scores[0, :100], scores[0, 9900:], atol=1e-5)


def test_contrastive_labels_by_hand():
  rewards = np.array([[0.5, 0.5, 0.5, -1.0, -2.5],    # three-way tie at the top: all positive
                      [0.9, 0.2, 0.7, 0.5, -1.0],     # plain top 2
                      [-1.0, -1.2, -2.5, -1.0, -1.1],  # nothing > 0: no positive
                      [0.6, -1.0, -1.0, -1.0, -1.0]])  # only one positive with reward > 0
  labels = stage2.contrastive_labels(rewards, top_k=2)
  np.testing.assert_array_equal(labels, [[1, 1, 1, 0, 0], [1, 0, 1, 0, 0], [0, 0, 0, 0, 0], [1, 0, 0, 0, 0]])
  assert stage2.positive_weight(labels, np.ones_like(labels, bool)) == pytest.approx(14 / 6)
  with pytest.raises(stage2.Stage2Error, match="no positive"):
    stage2.positive_weight(labels[2:3], np.ones((1, 5), bool))
  train, val = stage2.split_by_query(10, 0.2, seed=0)
  assert len(train) == 8 and len(val) == 2 and not set(train) & set(val)


# Slow (a convergence run); the fast tier checks the scorer against a naive GCN and by hand.
@pytest.mark.slow
def test_stage2_learns_which_graphs_are_good():
  # Synthetic ground truth: queries with a positive first feature want dense graphs, others sparse.
  num_q, per_q = 120, 5
  rng = np.random.default_rng(0)
  q = rng.normal(size=(num_q, D)).astype(np.float32)
  q[:, 0] = np.sign(q[:, 0]) * 2
  roles = np.asarray(_emb(N, 2))
  cand = graph_pool.make_pool(1, N, num_q * per_q, include_reference=False)
  order = rng.permutation(num_q * per_q)
  adj = cand.adjacency[order].reshape(num_q, per_q, N, N)
  mask = cand.node_mask[order].reshape(num_q, per_q, N)
  density = cand.density[order].reshape(num_q, per_q)
  reward = np.where(q[:, :1] > 0, density, 1 - density) - 0.3
  labels = stage2.contrastive_labels(reward, top_k=2)
  data = stage2.Stage2Batch(q, roles, adj, mask, labels, np.ones((num_q, per_q), bool), np.float32(1))
  config = stage2.Stage2Config(learning_rate=2e-2, weight_decay=1e-5, epochs=12, batch_size=16, patience=12,
                               val_fraction=0.2)
  params, history = stage2.fit(data, jax.random.key(0), config, net=SMALL)
  first, best = history[0], min(history, key=lambda h: h["val_loss"])
  assert best["val_loss"] < 0.8 * first["val_loss"], history
  assert best["val_top1_hit"] >= 0.9, history


def test_informative_queries_drop_all_tied_queries():
  rewards = np.array([[0.5, 0.5, 0.5], [0.5, -1.0, 0.5], [-2.5, -2.5, -2.5], [0.9, 0.2, 0.2]])
  np.testing.assert_array_equal(stage2.informative_queries(rewards), [False, True, False, True])
  valid = np.array([[1, 1, 1], [1, 0, 1], [1, 1, 1], [0, 0, 0]], bool)
  np.testing.assert_array_equal(stage2.informative_queries(rewards, valid), [False, False, False, False])


def test_per_query_pool_is_seeded_by_the_query_and_in_the_density_range():
  key = jax.random.key(3)
  n, k = 8, 200
  a = graph_pool.per_query_pool(key, 11, k, n, min_density=0.3, max_density=0.7)
  again = graph_pool.per_query_pool(key, 11, k, n, min_density=0.3, max_density=0.7)
  other_query = graph_pool.per_query_pool(key, 12, k, n, min_density=0.3, max_density=0.7)
  other_seed = graph_pool.per_query_pool(jax.random.key(4), 11, k, n, min_density=0.3, max_density=0.7)
  np.testing.assert_array_equal(a.adjacency, again.adjacency)
  assert not np.array_equal(a.adjacency, other_query.adjacency)
  assert not np.array_equal(a.adjacency, other_seed.adjacency)
  assert a.adjacency.shape == (k, n, n) and (a.kind == graph_pool.KIND_RANDOM).all()
  assert all(graph_pool.is_dag(g) and graph_pool.is_weakly_connected(g) for g in a.adjacency)
  # Target densities U[0.3, 0.7] of 28 pairs, rounded: 8 to 20 edges (a tree alone has 7).
  edges = a.adjacency.sum((1, 2))
  assert edges.min() >= round(0.3 * 28) and edges.max() <= round(0.7 * 28)
  assert ((a.density >= 0.28) & (a.density <= 0.72)).all()
  np.testing.assert_allclose(a.density, edges / 28)


def test_per_query_pool_masks_duplicates_but_keeps_every_distinct_graph():
  # 3 roles at density 0.3-0.7: spanning trees only, paths and out-stars (a tree gives each node one parent,
  # so no collider a -> c <- b): 9 graphs, so most of the 100 draws repeat.
  pool = graph_pool.per_query_pool(jax.random.key(0), 5, 100, 3, min_density=0.3, max_density=0.7)
  flat = pool.adjacency.reshape(100, -1)
  distinct = {tuple(r) for r in flat}
  assert pool.graph_mask.sum() == len(distinct) == 9
  kept = [tuple(r) for r in flat[pool.graph_mask]]
  assert len(set(kept)) == len(kept)  # each distinct graph once, at its first occurrence
  first = {}
  for i, r in enumerate(map(tuple, flat)):
    first.setdefault(r, i)
  np.testing.assert_array_equal(np.flatnonzero(pool.graph_mask), sorted(first.values()))
  np.testing.assert_array_equal(pool.node_mask.any(-1), pool.graph_mask)


def test_batched_scores_of_a_query_pool_equal_per_graph_scores_and_argmax_is_the_best():
  pool = graph_pool.per_query_pool(jax.random.key(1), 2, 40, N, min_density=0.3, max_density=0.7)
  q, r = _emb(1, 0), _emb(N, 1)
  params = gcn.init_params(jax.random.key(0), q, r, pool.adjacency, pool.node_mask, net=SMALL)
  batched = np.asarray(gcn.score_candidates(params, q, r, pool.adjacency, pool.node_mask, net=SMALL))[0]
  single = np.full(pool.num_graphs, -np.inf, np.float32)
  for k in np.flatnonzero(pool.graph_mask):
    single[k] = np.asarray(gcn.score_candidates(params, q, r, pool.adjacency[k:k + 1], pool.node_mask[k:k + 1],
                                                net=SMALL))[0, 0]
  np.testing.assert_allclose(batched, single, rtol=1e-5, atol=1e-5)
  assert np.isneginf(batched[~pool.graph_mask]).all()
  assert int(gcn.best_graph(batched[None])[0]) == int(np.argmax(single)) and pool.graph_mask[np.argmax(batched)]
