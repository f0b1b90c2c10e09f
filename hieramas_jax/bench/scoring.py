r"""Scoring K candidate graphs for a batch of queries, JAX vs PyTorch (issue 3, item 9;
`results/bench.json` key `scoring`).

Three implementations of the SAME GCN scorer (hieramas_jax.learn.gcn), with the SAME weights, on
the same machine in one run, outputs checked to agree:
  jax            one jitted call for all Q x K pairs (shared work computed once);
  torch_loop     one (query, graph) at a time, as the reference code does: build the node features,
                 normalise the adjacency, 2 GCN layers, mean pool, MLP;
  torch_batched  the best batched PyTorch version: the same shared-work tricks, batched tensors, the
                 node loop fused in place; timed eager and under torch.compile, the faster counts.
Plus `k10000_ms`: one query against K = 10,000 candidates (jax). JAX and torch are imported when a
measurement starts: importing this module costs neither.
"""

from __future__ import annotations

import os
import statistics
import time
from typing import Any, Mapping

import numpy as np

from hieramas_jax.bench.results import publish
from hieramas_jax.experiment.provenance import provenance

KEY = "scoring"


def median_ms(fn, repeats: int) -> float:
  """Median wall milliseconds of `repeats` calls of `fn` (each call timed alone)."""
  times = []
  for _ in range(repeats):
    start = time.perf_counter()
    fn()
    times.append(time.perf_counter() - start)
  return 1000.0 * statistics.median(times)


def torch_weights(params):
  """Flax scorer params -> float32 torch tensors (Dense kernels are [in, out] in both uses below)."""
  import torch
  get = lambda *path: torch.from_numpy(np.array(_dig(params, path), np.float32))
  return {"w_role": get("role_in", "kernel"), "w_query": get("query_in", "kernel"),
          "w_dir": get("direction_in", "kernel"), "b1": get("gcn1_bias"),
          "w2": get("gcn2", "kernel"), "b2": get("gcn2", "bias"),
          "w3": get("mlp_hidden", "kernel"), "b3": get("mlp_hidden", "bias"),
          "w4": get("mlp_out", "kernel"), "b4": get("mlp_out", "bias")}


def _dig(tree, path):
  for p in path:
    tree = tree[p]
  return tree


def torch_score_loop(w, query_emb, role_emb, adjacency, node_mask):
  """Reference-style: for each query, for each graph, a full forward pass on its own ([Q, K])."""
  import torch
  w_first = torch.cat([w["w_role"], w["w_query"], w["w_dir"]], dim=0)  # X = [R ; q ; dir] -> [2D + 2, H]
  num_q, num_k = query_emb.shape[0], adjacency.shape[0]
  out = torch.empty(num_q, num_k)
  with torch.no_grad():
    for qi in range(num_q):
      for k in range(num_k):
        mask = node_mask[k]
        n = int(mask.sum())
        if n == 0:
          out[qi, k] = -float("inf")
          continue
        adj = adjacency[k][:n, :n].float()  # real nodes come first in this pool
        s = adj + adj.T + torch.eye(n)
        dinv = s.sum(1).rsqrt()
        a_hat = dinv[:, None] * s * dinv[None, :]
        scale = 1.0 / max(n - 1, 1)
        direction = torch.stack([adj.sum(0) * scale, adj.sum(1) * scale], dim=1)
        x = torch.cat([role_emb[:n], query_emb[qi].expand(n, -1), direction], dim=1)
        h1 = torch.relu(a_hat @ (x @ w_first) + w["b1"])
        h2 = a_hat @ (h1 @ w["w2"]) + w["b2"]
        g = h2.mean(0)
        out[qi, k] = (torch.relu(g @ w["w3"] + w["b3"]) @ w["w4"] + w["b4"])[0]
  return out


def torch_score_batched(w, query_emb, role_emb, adjacency, node_mask):
  """The same shared-work decomposition as the JAX scorer, in batched PyTorch ([Q, K])."""
  import torch
  with torch.no_grad():
    mask = node_mask
    pair = mask[:, :, None] & mask[:, None, :]
    adj = adjacency & pair
    eye = torch.eye(adj.shape[-1], dtype=torch.bool)
    s = ((adj | adj.transpose(1, 2)) | (eye & pair)).float()
    deg = s.sum(-1)
    dinv = torch.where(deg > 0, deg.clamp_min(1e-12).rsqrt(), torch.zeros_like(deg))
    a_hat = dinv[:, :, None] * s * dinv[:, None, :]
    n = mask.sum(-1).float()
    pool_weight = a_hat.sum(-2) / n.clamp_min(1.0)[:, None]
    row_sum = a_hat.sum(-1)
    scale = 1.0 / (n - 1.0).clamp_min(1.0)[:, None]
    adj_f = adj.float()
    direction = torch.stack([adj_f.sum(-2) * scale, adj_f.sum(-1) * scale], dim=-1)
    node_part = (role_emb @ w["w_role"])[None] + direction @ w["w_dir"]  # [K, N, H]
    graph_part = torch.bmm(a_hat, node_part)  # [K, N, H]
    query_part = query_emb @ w["w_query"]  # [Q, H]
    # Node by node, accumulating the p-weighted sum in place: never materialises [Q, K, N, H].
    # Measured on this CPU: ~15x faster than building [Q, K, N, H] and reducing it with einsum,
    # matmul or sum (those variants are what a first batched port would do).
    graph_part = graph_part + w["b1"]
    pooled = torch.zeros(query_emb.shape[0], adj.shape[0], graph_part.shape[-1])
    for j in range(adj.shape[1]):
      h1_j = torch.addcmul(graph_part[None, :, j, :], row_sum[None, :, j, None], query_part[:, None, :]).relu_()
      pooled.addcmul_(pool_weight[None, :, j, None], h1_j)
    g = pooled @ w["w2"] + w["b2"]
    score = (torch.relu(g @ w["w3"] + w["b3"]) @ w["w4"] + w["b4"])[..., 0]
    return torch.where(mask.any(-1)[None], score, torch.full_like(score, -float("inf")))


def measure(*, num_graphs: int, num_queries: int, num_nodes: int, dim: int, hidden: int, repeats: int,
            loop_repeats: int, big_k: int, seed: int, torch_compile: bool) -> dict:
  """All three timings plus the large-pool one; returns the `scoring` record (without provenance)."""
  import jax
  import jax.numpy as jnp
  import torch

  from hieramas_jax.learn import gcn, graph_pool

  load_before = os.getloadavg()
  rng = np.random.default_rng(seed)
  unit = lambda x: (x / np.linalg.norm(x, axis=-1, keepdims=True)).astype(np.float32)
  query_np = unit(rng.normal(size=(num_queries, dim)))
  role_np = unit(rng.normal(size=(num_nodes, dim)))
  pool = graph_pool.make_pool(seed, num_nodes, num_graphs - 3)
  net = gcn.GCNScorer(hidden=hidden)
  params = gcn.init_params(jax.random.key(seed), jnp.asarray(query_np[:1]), jnp.asarray(role_np),
                           pool.adjacency, pool.node_mask, net)

  q_j, r_j = jnp.asarray(query_np), jnp.asarray(role_np)
  adj_j, mask_j = jnp.asarray(pool.adjacency), jnp.asarray(pool.node_mask)
  jax_fn = lambda: gcn.score_candidates(params, q_j, r_j, adj_j, mask_j, net=net).block_until_ready()
  jax_scores = np.asarray(jax_fn())  # warm-up (compile)
  jax_fn()

  w = torch_weights(params)
  q_t, r_t = torch.from_numpy(query_np), torch.from_numpy(role_np)
  adj_t, mask_t = torch.from_numpy(pool.adjacency), torch.from_numpy(pool.node_mask)
  batched_scores = torch_score_batched(w, q_t, r_t, adj_t, mask_t).numpy()  # warm-up
  torch_score_batched(w, q_t, r_t, adj_t, mask_t)
  compiled = None
  if torch_compile:
    # torch.compile (inductor, C++ codegen) fuses the node loop as XLA does: the strongest torch peer.
    compiled = torch.compile(torch_score_batched)
    compiled_scores = compiled(w, q_t, r_t, adj_t, mask_t).numpy()  # compile + warm-up
    compiled(w, q_t, r_t, adj_t, mask_t)
  loop_scores = torch_score_loop(w, q_t[:2], r_t, adj_t, mask_t).numpy()  # warm-up on 2 queries
  loop_scores = torch_score_loop(w, q_t, r_t, adj_t, mask_t).numpy()

  diff_batched = float(np.max(np.abs(jax_scores - batched_scores)))
  diff_compiled = float(np.max(np.abs(jax_scores - compiled_scores))) if compiled else None
  diff_loop = float(np.max(np.abs(jax_scores - loop_scores)))
  scale = float(np.max(np.abs(jax_scores)))

  jax_ms = median_ms(jax_fn, repeats)
  eager_ms = median_ms(lambda: torch_score_batched(w, q_t, r_t, adj_t, mask_t), repeats)
  compiled_ms = median_ms(lambda: compiled(w, q_t, r_t, adj_t, mask_t), repeats) if compiled else None
  batched_ms = min(eager_ms, compiled_ms) if compiled else eager_ms
  loop_ms = median_ms(lambda: torch_score_loop(w, q_t, r_t, adj_t, mask_t), loop_repeats)

  big = graph_pool.make_pool(seed + 1, num_nodes, big_k - 3)
  big_adj, big_mask = jnp.asarray(big.adjacency), jnp.asarray(big.node_mask)
  big_fn = lambda: gcn.score_candidates(params, q_j[:1], r_j, big_adj, big_mask, net=net).block_until_ready()
  big_scores = np.asarray(big_fn())
  big_ms = median_ms(big_fn, max(3, repeats // 3))
  prepared = gcn.prepare_pool(big_adj, big_mask)
  big_prep_fn = lambda: gcn.score_prepared(params, q_j[:1], r_j, prepared, net=net).block_until_ready()
  big_prep_fn()
  big_prep_ms = median_ms(big_prep_fn, max(3, repeats // 3))

  return {
      "speedup_vs_torch_loop": loop_ms / jax_ms,
      "speedup_vs_torch_batched": batched_ms / jax_ms,
      "k10000_ms": big_ms,
      "k10000_prepared_pool_ms": big_prep_ms,
      "median_ms": {"jax": jax_ms, "torch_loop": loop_ms, "torch_batched": batched_ms,
                    "torch_batched_eager": eager_ms, "torch_batched_compiled": compiled_ms},
      "repeats": {"jax": repeats, "torch_batched": repeats, "torch_loop": loop_repeats,
                  "k10000": max(3, repeats // 3)},
      "max_abs_diff_vs_jax": {"torch_batched_eager": diff_batched, "torch_batched_compiled": diff_compiled,
                              "torch_loop": diff_loop},
      "max_abs_score": scale,
      "outputs_agree_1e-4": bool(max(diff_batched, diff_loop, diff_compiled or 0.0) <= 1e-4 * max(1.0, scale)),
      "k10000_all_finite": bool(np.isfinite(big_scores).all()),
      "sizes": {"num_graphs": num_graphs, "num_queries": num_queries, "num_nodes": num_nodes, "dim": dim,
                "hidden": hidden, "k_large": big_k},
      "threads": {"torch": torch.get_num_threads(), "os_cpu_count": os.cpu_count(),
                  "jax_backend": jax.default_backend(), "jax_devices": [str(d) for d in jax.devices()]},
      "versions": {"jax": jax.__version__, "torch": torch.__version__},
      # The machine may be shared: a high load average makes every timing (the loop most) noisier.
      "load_average_1m": {"before": load_before[0], "after": os.getloadavg()[0]},
      "notes": ("all three compute the same function with the same weights; jax and torch_batched "
                "include adjacency normalisation in the timed call; torch_loop re-normalises per graph "
                "as the reference code does; warm-up calls precede timing"),
  }


def run(*, num_graphs: int, num_queries: int, num_nodes: int, dim: int, hidden: int, repeats: int,
        loop_repeats: int, big_k: int, seed: int, torch_compile: bool, out: str, flags: Mapping[str, Any]) -> dict:
  """Measures, writes key `scoring` of `out` (provenance: `flags`) and prints the headline figures."""
  record = measure(num_graphs=num_graphs, num_queries=num_queries, num_nodes=num_nodes, dim=dim, hidden=hidden,
                   repeats=repeats, loop_repeats=loop_repeats, big_k=big_k, seed=seed, torch_compile=torch_compile)
  record["provenance"] = provenance(seed=seed, flags=flags)
  publish(out, KEY, record)
  print({k: record[k] for k in ("speedup_vs_torch_loop", "speedup_vs_torch_batched", "k10000_ms",
                                "median_ms", "max_abs_diff_vs_jax")})
  print(f"wrote key 'scoring' of {out}")
  return record
