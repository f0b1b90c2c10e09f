"""GDesigner's topology designer (Zhang et al. 2024, arXiv 2410.11782; public code yanweiyue/GDesigner), in JAX.

Per query, over the benchmark's N role agents:

  X   = [role-profile embedding ; query embedding]                 [N, 2D]   (`construct_new_features`)
  H   = log_softmax(GCN2(dropout(relu(GCN1(X, A)))))               [N, D]    (PyG GCNConv, hidden 16,
        A = the prompt set's role connections (`ROLE_CONNECTIONS`)            dropout 0.5 while training)
  Z   = MLP(H)                                                     [N, 16]   (16 -> relu -> 16)
  S   = min-max-normalise(Z Z^T) over all N^2 entries              [N, N]    in [-1, 1] (reference)
  p   = sigmoid(S / temperature)                                   edge probabilities (temperature 1)

The GCN (`GCNConv`, PyG's normalisation) runs over the anchor graph as a `jraph.GraphsTuple`, batched over
queries with `jraph.batch` (each query one graph of N nodes): role graphs differ in size per benchmark,
and jraph's segment sums handle any N without padding code of our own.

Edges are then sampled on the host, in the reference order (every ordered pair i -> j, i-major): a pair
whose edge would close a cycle (i reachable from j) is skipped and contributes nothing; every other pair
is drawn Bernoulli(p_ij) and contributes log p or log(1 - p) to the query's log-probability. One fresh
DAG per round (3 rounds). Training is plain REINFORCE on the 0/1 utility, as in the public code, and as
there only the GCN's parameters are optimised (its optimizer is built over `gcn.parameters()`): the MLP
stays at its seeded initialisation (`make_optimizer`, `train_params="gcn"`):

  loss = - mean_b [ u_b * sum_rounds sum_considered (s log p + (1 - s) log(1 - p)) ]

Min-max normalisation to [-1, 1] then a sigmoid at temperature 1 keeps every edge probability in
[0.27, 0.73]: a property of the reference code, kept (docs/methods.md). `edge_range="unit"` ([0, 1],
probabilities in [0.5, 0.73]) and `train_params="all"` are this suite's earlier variants.
"""

from __future__ import annotations

import functools
from typing import NamedTuple

import flax.linen as nn
import jax
import jax.numpy as jnp
import jraph
import numpy as np
import optax


class EdgeSamples(NamedTuple):
  """The host-side draws of one query: per round, which pairs were considered and which were chosen.

  Attributes:
    considered: [T, N, N] bool, pairs that were drawn (not skipped by the cycle check).
    chosen: [T, N, N] bool, the edges kept (a subset of considered).
  """

  considered: np.ndarray
  chosen: np.ndarray


# GDesigner's prompt sets' role connections (`get_role_connection`: mmlu_prompt_set.py, gsm8k_prompt_set.py,
# humaneval_prompt_set.py), (source, target), restricted to the suite's roles: MMLU-Redux's 8 roles are 8 of
# GDesigner's MMLU agents (its "Programmer" edges dropped), MATH's 3 take the gsm8k set's connections (its
# "Programming Expert" edges dropped), HumanEval+'s 5 are GDesigner's. Repeated pairs of the lists appear
# once (the reference's dense adjacency holds them once). The HumanEval list's ('Project Manager',
# 'Promgramming Expert') is a typo the reference silently drops; here it is the intended edge to
# Programming Expert.
ROLE_CONNECTIONS: dict[str, tuple[tuple[str, str], ...]] = {
    "mmlu_redux": (
        ("Knowlegable Expert", "Mathematician"), ("Knowlegable Expert", "Economist"), ("Knowlegable Expert", "Lawyer"),
        ("Knowlegable Expert", "Critic"), ("Knowlegable Expert", "Psychologist"), ("Knowlegable Expert", "Doctor"),
        ("Knowlegable Expert", "Historian"), ("Mathematician", "Critic"), ("Psychologist", "Critic"),
        ("Economist", "Lawyer"), ("Lawyer", "Critic"), ("Critic", "Psychologist"), ("Psychologist", "Doctor"),
        ("Doctor", "Historian"), ("Historian", "Knowlegable Expert"), ("Economist", "Psychologist"),
        ("Psychologist", "Knowlegable Expert"), ("Critic", "Historian"), ("Historian", "Economist"),
        ("Lawyer", "Knowlegable Expert"), ("Doctor", "Lawyer"), ("Mathematician", "Doctor"), ("Economist", "Doctor"),
        ("Psychologist", "Lawyer"), ("Historian", "Mathematician"), ("Doctor", "Psychologist"),
        ("Critic", "Economist")),
    "math": (
        ("Mathematical Analyst", "Math Solver"), ("Mathematical Analyst", "Inspector"), ("Inspector", "Math Solver"),
        ("Inspector", "Mathematical Analyst")),
    "humaneval_plus": (
        ("Project Manager", "Algorithm Designer"), ("Algorithm Designer", "Programming Expert"),
        ("Programming Expert", "Test Analyst"), ("Test Analyst", "Bug Fixer"),
        ("Algorithm Designer", "Project Manager"), ("Programming Expert", "Bug Fixer"),
        ("Bug Fixer", "Programming Expert"), ("Test Analyst", "Programming Expert"),
        ("Algorithm Designer", "Test Analyst"), ("Project Manager", "Programming Expert")),
}
ANCHORS = ("roles", "chain")


def anchor_edges(roles: tuple[str, ...], benchmark: str | None = None,
                 anchor: str = "roles") -> tuple[np.ndarray, np.ndarray]:
  """(senders, receivers) of the anchor graph over `roles`.

  "roles" (reference): the benchmark's role connections (`ROLE_CONNECTIONS`), directed as listed;
  "chain" (this suite's earlier anchor): the roles in a chain, both directions.
  """
  if anchor not in ANCHORS:
    raise ValueError(f"gdesigner anchor must be one of {ANCHORS}, got {anchor!r}")
  index = {r: i for i, r in enumerate(roles)}
  if anchor == "chain" or benchmark is None:
    pairs = [(i, i + 1) for i in range(len(roles) - 1)]
    pairs = pairs + [(b, a) for a, b in pairs]
  else:
    pairs = [(index[a], index[b]) for a, b in ROLE_CONNECTIONS[benchmark]]
  return np.array([a for a, _ in pairs], np.int32), np.array([b for _, b in pairs], np.int32)


def query_graphs(role_emb: np.ndarray, query_emb: np.ndarray,
                 edges: tuple[np.ndarray, np.ndarray] | None = None) -> jraph.GraphsTuple:
  """One anchor graph per query, batched: node features [role ; query] ([B*N, 2D]).

  `edges` = (senders, receivers) of the anchor (`anchor_edges`; default: the chain over the N roles).
  """
  n = role_emb.shape[0]
  senders, receivers = edges if edges is not None else anchor_edges(tuple(map(str, range(n))), anchor="chain")
  graphs = []
  for q in np.asarray(query_emb, np.float32):
    nodes = np.concatenate([np.asarray(role_emb, np.float32), np.broadcast_to(q, (n, q.shape[0]))], axis=1)
    graphs.append(jraph.GraphsTuple(nodes=nodes, edges=None, senders=senders, receivers=receivers,
                                    n_node=np.array([n]), n_edge=np.array([len(senders)]), globals=None))
  return jraph.batch(graphs)


class GCNConv(nn.Module):
  """PyG's `GCNConv` (what GDesigner's `gnn/gcn.py` uses) on a jraph graph: messages flow sender -> receiver,
  self loops added, each edge weighted 1 / sqrt(deg(sender) deg(receiver)) with deg the in-degree + 1 (PyG's
  `gcn_norm` counts degrees at the target for both ends), the bias added after aggregation.
  (`jraph.GraphConvolution` normalises by the sender's out-degree and adds the bias before aggregating:
  the same on a symmetric anchor without bias, not on the reference's directed role connections.)"""

  features: int

  @nn.compact
  def __call__(self, graph: jraph.GraphsTuple) -> jax.Array:
    total = graph.nodes.shape[0]
    loops = jnp.arange(total)
    senders = jnp.concatenate([graph.senders, loops])
    receivers = jnp.concatenate([graph.receivers, loops])
    deg = jraph.segment_sum(jnp.ones_like(receivers, jnp.float32), receivers, total)
    norm = jax.lax.rsqrt(deg[senders]) * jax.lax.rsqrt(deg[receivers])
    h = nn.Dense(self.features, use_bias=False, name="kernel_map")(graph.nodes)
    out = jraph.segment_sum(h[senders] * norm[:, None], receivers, total)
    return out + self.param("bias", nn.initializers.zeros, (self.features,))


class TopologyNet(nn.Module):
  """GCN (jraph) -> MLP -> Z Z^T -> min-max -> sigmoid: [B, N, N] edge probabilities.

  Attributes:
    num_nodes: N (static: the graphs of a batch are reshaped back to [B, N, ...]).
    gcn_hidden: first GCN layer width (reference 16).
    gcn_out: second GCN layer width (reference: the embedding width, 384).
    mlp_hidden, mlp_out: the MLP widths (reference 16, 16).
    temperature: the sigmoid's temperature (reference 1).
    dropout: dropout after the first GCN layer while training (reference 0.5).
    edge_range: "symmetric" (min-max to [-1, 1], reference) or "unit" ([0, 1]).
  """

  num_nodes: int
  gcn_hidden: int = 16
  gcn_out: int = 384
  mlp_hidden: int = 16
  mlp_out: int = 16
  temperature: float = 1.0
  dropout: float = 0.5
  edge_range: str = "symmetric"

  @nn.compact
  def __call__(self, graph: jraph.GraphsTuple, *, deterministic: bool = True) -> jax.Array:
    h = GCNConv(self.gcn_hidden, name="gcn1")(graph)
    hidden = nn.Dropout(self.dropout)(jax.nn.relu(h), deterministic=deterministic)
    # The reference GCN ends in log_softmax over each node's features (gnn/gcn.py), which the MLP then reads.
    h = jax.nn.log_softmax(GCNConv(self.gcn_out, name="gcn2")(graph._replace(nodes=hidden)), axis=-1)
    z = nn.Dense(self.mlp_out, name="mlp_out")(jax.nn.relu(nn.Dense(self.mlp_hidden, name="mlp_hidden")(h)))
    z = z.reshape(-1, self.num_nodes, self.mlp_out)
    scores = jnp.einsum("bif,bjf->bij", z, z)
    lo = scores.min(axis=(1, 2), keepdims=True)
    hi = scores.max(axis=(1, 2), keepdims=True)
    normed = (scores - lo) / jnp.maximum(hi - lo, 1e-12)
    if self.edge_range == "symmetric":
      normed = 2.0 * normed - 1.0
    return jax.nn.sigmoid(normed / self.temperature)


TRAIN_PARAMS = ("gcn", "all")
EDGE_RANGES = ("symmetric", "unit")


def make_optimizer(lr: float, train_params: str = "gcn") -> optax.GradientTransformation:
  """Adam over the GCN layers only ("gcn", the reference) or over every parameter ("all")."""
  if train_params not in TRAIN_PARAMS:
    raise ValueError(f"train_params must be one of {TRAIN_PARAMS}, got {train_params!r}")
  if train_params == "all":
    return optax.adam(lr)
  labels = lambda params: {k: ("train" if k.startswith("gcn") else "frozen") for k in params}
  return optax.multi_transform({"train": optax.adam(lr), "frozen": optax.set_to_zero()}, labels)


@functools.partial(jax.jit, static_argnames=("net",))
def edge_probs(params, graph: jraph.GraphsTuple, dropout_rng=None, *, net: TopologyNet) -> jax.Array:
  """[B, N, N] edge probabilities; with `dropout_rng` in training mode (dropout on, as the reference's
  training forward pass), else deterministic."""
  if dropout_rng is None:
    return net.apply({"params": params}, graph)
  return net.apply({"params": params}, graph, deterministic=False, rngs={"dropout": dropout_rng})


def init_params(rng: jax.Array, net: TopologyNet, role_emb: np.ndarray, query_dim: int):
  return _jit_init(net, rng, query_graphs(role_emb, np.zeros((1, query_dim), np.float32)))["params"]


@functools.partial(jax.jit, static_argnums=0)
def _jit_init(net, rng, graph):
  # Jitted: eager Flax init compiles op by op (seconds each time on 2 cores).
  return net.init(rng, graph)


def sample_dag(probs: np.ndarray, rng: np.random.Generator,
               allowed: np.ndarray | None = None) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
  """One round's DAG drawn in the reference order; returns (adjacency, considered, chosen), [N, N] bool.

  Pair (i, j) is skipped when adding i -> j would close a cycle, i.e. when i is reachable from j along
  the edges kept so far (GDesigner's `check_cycle(in_node, {out_node})`), and, with `allowed` ([N, N]
  bool), when the pair is not allowed (the GPTSwarm-family `spatial_masks`: AgentPrune's pruned edges).
  A skipped pair draws no random number.
  """
  n = probs.shape[0]
  adj = np.zeros((n, n), bool)
  considered = np.zeros((n, n), bool)
  reach = np.eye(n, dtype=bool)  # reach[a, b]: b reachable from a
  for i in range(n):
    for j in range(n):
      if i == j or reach[j, i] or (allowed is not None and not allowed[i, j]):
        continue
      considered[i, j] = True
      if rng.random() < probs[i, j]:
        adj[i, j] = True
        # Everything that reaches i now reaches everything j reaches.
        reach[reach[:, i]] |= reach[j]
  return adj, considered, adj.copy()


def sample_rounds(probs: np.ndarray, rounds: int, rng: np.random.Generator) -> tuple[list[np.ndarray], EdgeSamples]:
  """`rounds` independent DAGs from one query's probabilities (GDesigner draws the spatial graph each round)."""
  adjs, cons, chos = [], [], []
  for _ in range(rounds):
    adj, considered, chosen = sample_dag(probs, rng)
    adjs.append(adj)
    cons.append(considered)
    chos.append(chosen)
  return adjs, EdgeSamples(np.stack(cons), np.stack(chos))


def log_prob(probs: jax.Array, considered: jax.Array, chosen: jax.Array) -> jax.Array:
  """[B] log-probability of each query's draws under [B, N, N] probabilities (draws [B, T, N, N])."""
  p = jnp.clip(probs[:, None], 1e-6, 1 - 1e-6)
  terms = jnp.where(chosen, jnp.log(p), jnp.log1p(-p))
  return jnp.sum(jnp.where(considered, terms, 0.0), axis=(1, 2, 3))


def reinforce_loss(probs: jax.Array, considered: jax.Array, chosen: jax.Array, utility: jax.Array) -> jax.Array:
  """- mean_b u_b log P_b (the public code's loss: utility 1 for a solved query, 0 otherwise)."""
  return -jnp.mean(utility * log_prob(probs, considered, chosen))


def loss_fn(params, graph, considered, chosen, utility, dropout_rng, *, net: TopologyNet):
  return reinforce_loss(edge_probs(params, graph, dropout_rng, net=net), considered, chosen, utility)


@functools.partial(jax.jit, static_argnames=("net", "lr", "train_params"))
def train_step(state, graph, considered, chosen, utility, dropout_rng, *, net: TopologyNet, lr: float,
               train_params: str = "gcn"):
  """One Adam update of {"params", "opt_state", "step"} on a batch's draws; returns (state, loss).

  Pass the `dropout_rng` the draws were sampled with (`edge_probs(..., dropout_rng)`): the loss then sees
  the same dropout mask, as the reference's one training-mode forward pass does."""
  loss, grads = jax.value_and_grad(loss_fn)(state["params"], graph, considered, chosen, utility, dropout_rng, net=net)
  updates, opt_state = make_optimizer(lr, train_params).update(grads, state["opt_state"], state["params"])
  return {"params": optax.apply_updates(state["params"], updates), "opt_state": opt_state,
          "step": state["step"] + 1}, loss
