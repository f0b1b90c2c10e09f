"""ARG-Designer's autoregressive topology generator (Li et al., AAAI 2026, arXiv 2507.18224; public code
Shiy-Li/ARG-Designer, `experiment/model.py`), in Flax.

A GraphRNN-style pair of GRUs conditioned on the query. A graph of n agents is a sequence of nodes in
topological order; node v carries a role (one of the R roles of the benchmark's pool) and K = 3 edge slots
(`max_prev_node`, set by `process_dataset.load_graph_dataset`): slot d says whether the earlier node
v - d - 1 sends to v. Each slot is a 4-channel vector (`utils.get_attributes_len`: one edge label + 3):

  EDGE (0) = the edge exists, NO_EDGE (1) = a valid slot without edge, START (2), END (3) tokens;
  an invalid slot (d >= v) is all zeros (`BFS_Graph_to_Adj_Matrix._process_edges_binary`, l. 205-239).

Per query (q: the query's sentence embedding, D dims), step i of the node-level GRU (hidden 256) reads

  u_0 = [task(q) ; START in slot 0]                                       (`forward`, l. 468-470)
  u_i = [(1 - g_i) a_i + g_i task(q) ; slots of node i-1],  i >= 1       (l. 442-462, 632-645)
        a_i = the aggregator GRU's state after the role embeddings of nodes 0..i-1 (the sampler's
              history; training's x_new is one role behind, below),
        g_i = sigmoid(<a_i, task(q)> / D)                                 (the gate, l. 450, 639)

and its output o_i gives node i's role distribution, softmax(output_node(o_i) . role_processor(E)^T) over
the role embeddings E (the R role-profile embeddings, then START and END as zero vectors, l. 387-399; a
learned role is its sentence embedding, not a free vector); END stops the graph. Node i's edges come from
the edge-level GRU (hidden 256) started at node_to_edge(o_i): step j reads START (j = 0) or slot j-1 and
outputs softmax(output_edge(.)) over the 4 channels (l. 486-511).

Training (`forward` l. 547-566, `train_ARGDesigner.train`): maximum likelihood of successful graphs written
as the reference writes it, binary cross-entropy between those softmax outputs and the one-hot targets,
summed over every channel and position (node positions 0..n, n's target END; edge positions 0..min(v, K),
the last one's target END), loss = 0.2 x node + 0.8 x edge per graph, mean over the batch
(`loss_from_probs`, `batch_loss`).

Sampling (`ARGDesigner.sample`, l. 568-778; `sample_graph` here): step by step, the role from the
softmax over the roles and END (START left out), END impossible before `min_nodes`, at most `max_nodes`
nodes; node i's min(i, K) slots each Bernoulli; a node i > 0 that drew no edge gets one to a uniformly
drawn slot (l. 710-715). Two defects of the public `sample` are not copied (docs/methods.md, ARG-Designer):
  * it draws "edge exists" with the probability of channel 1 (`HAS_EDGE_TOKEN = 1`), which training
    uses for NO_EDGE, and feeds the drawn channel back (`edge_rule="reference"` reproduces it);
    here the edge's probability is channel 0's, and the token fed back is EDGE or NO_EDGE as drawn;
  * its node-level inputs are not the ones training feeds: an extra zero-input GRU step before node 0,
    no slots of the previous node, and a history of roles 0..i-1 where training's holds 0..i-2 (l. 442-467
    against l. 626-656). Here one `_node_input` serves both passes, so the sampler draws from exactly the
    distribution the loss fits (checked in the tests): training's step count and slots, the sampler's
    history (the generator sees the role it has just chosen). `ARGNet(inputs="reference")` reproduces
    each pass as the public code feeds it.
"""

from __future__ import annotations

import dataclasses
import functools
from typing import Sequence

import flax.linen as nn
import jax
import jax.numpy as jnp
import numpy as np
import optax

EDGE, NO_EDGE, START, END = 0, 1, 2, 3
EDGE_VEC = 4
ALPHA = 0.2  # the node term's weight (`forward`, l. 560)
EDGE_RULES = ("intended", "reference")
INPUT_RULES = ("intended", "reference")
# `torch.nn.functional.binary_cross_entropy` clamps its logs at -100.
_LOG_FLOOR = -100.0

# MLP_Basic's Linear weights: xavier_uniform with gain calculate_gain('relu') = sqrt(2) (l. 254-257).
_XAVIER_RELU = nn.initializers.variance_scaling(2.0, "fan_avg", "uniform")


class MLPBasic(nn.Module):
  """`MLP_Basic`: Linear -> ReLU -> (Dropout 0) -> Linear."""

  hidden: int
  out: int

  @nn.compact
  def __call__(self, x):
    x = jax.nn.relu(nn.Dense(self.hidden, kernel_init=_XAVIER_RELU, name="fc1")(x))
    return nn.Dense(self.out, kernel_init=_XAVIER_RELU, name="fc2")(x)


class ARGNet(nn.Module):
  """The generator's parameters and its per-step pieces (module docstring).

  Attributes:
    dim: D, the sentence embedding's width (`embedding_dim`, 384 for all-MiniLM-L6-v2).
    hidden: the node- and edge-level GRUs' widths and their input/output MLPs' (`args.py`: all 256).
    slots: K, the edge slots per node (`max_prev_node` 3).
    inputs: the node-level inputs, "intended" (one rule for training and sampling, module docstring) or
      "reference" (each pass as the public code feeds it: `_reference_history`, `sample_graph`).
  """

  dim: int = 384
  hidden: int = 256
  slots: int = 3
  inputs: str = "intended"

  def setup(self):
    d, h = self.dim, self.hidden
    self.task_fc1 = nn.Dense(d)
    self.task_norm = nn.LayerNorm(epsilon=1e-5)  # torch's default eps
    self.task_drop = nn.Dropout(0.1)
    self.task_fc2 = nn.Dense(d)
    self.aggregator = nn.GRUCell(d)
    self.node_gru = nn.GRUCell(h)
    self.edge_gru = nn.GRUCell(h)
    self.node_project = MLPBasic(h, h)
    self.edge_project = MLPBasic(h, h)
    self.node_to_edge = MLPBasic(h, h)
    self.output_node = MLPBasic(h, d)
    self.output_edge = MLPBasic(h, EDGE_VEC)
    self.role_processor = MLPBasic(d // 2, d)

  def task(self, q, deterministic: bool = True):
    """`task_processor`: Linear -> LayerNorm -> ReLU -> Dropout(0.1) -> Linear."""
    x = jax.nn.relu(self.task_norm(self.task_fc1(q)))
    return self.task_fc2(self.task_drop(x, deterministic=deterministic))

  def aggregate(self, carry, role_emb):
    return self.aggregator(carry, role_emb)[0]

  def node_step(self, carry, u):
    return self.node_gru(carry, self.node_project(u))

  def node_logits(self, o, table):
    """[..., rows] scores of node outputs o against the role-embedding rows `table`."""
    return self.output_node(o) @ self.role_processor(table).T

  def edge_init(self, o):
    return self.node_to_edge(o)

  def edge_step(self, carry, e):
    """One edge-level step: (carry, the 4-channel softmax)."""
    carry, out = self.edge_gru(carry, self.edge_project(e))
    return carry, jax.nn.softmax(self.output_edge(out), axis=-1)

  def probs(self, q, roles, n, slots, table, deterministic: bool = True):
    """Teacher-forced distributions: node [B, N + 1, R + 2] and edge [B, N, K + 1, 4] softmaxes.

    Args:
      q: [B, D] query embeddings. roles: [B, N] role ids (padding anything). n: [B] node counts (unused
        here: the GRUs are causal, so padding never reaches a position <= n).
      slots: [B, N, K, 4] edge slots (`encode_graph`). table: [R + 2, D] role embeddings, START, END.
    """
    del n
    b, num, k = roles.shape[0], roles.shape[1], self.slots
    t = self.task(q, deterministic)
    remb = table[roles]
    a = jnp.zeros((b, self.dim), t.dtype)
    inputs = [_node_input(t, None, _start_slots(b, k))]
    if self.inputs == "reference":
      inputs += self._reference_history(t, remb, slots)
    else:
      for i in range(num):
        a = self.aggregate(a, remb[:, i])
        inputs.append(_node_input(t, a, slots[:, i].reshape(b, k * EDGE_VEC)))
    carry = jnp.zeros((b, self.hidden), t.dtype)
    outs = []
    for u in inputs:
      carry, o = self.node_step(carry, u)
      outs.append(o)
    o = jnp.stack(outs, axis=1)  # [B, N + 1, H]
    p_node = jax.nn.softmax(self.node_logits(o, table), axis=-1)
    h_edge = self.edge_init(o[:, :num]).reshape(b * num, self.hidden)
    flat = slots.reshape(b * num, k, EDGE_VEC)
    e_inputs = [jnp.broadcast_to(jax.nn.one_hot(START, EDGE_VEC), (b * num, EDGE_VEC))]
    e_inputs += [flat[:, j] for j in range(k)]
    p_edge = []
    for e in e_inputs:
      h_edge, p = self.edge_step(h_edge, e)
      p_edge.append(p)
    return p_node, jnp.stack(p_edge, axis=1).reshape(b, num, k + 1, EDGE_VEC)

  def _reference_history(self, t, remb, slots):
    """The public `forward`'s inputs after the start token (l. 442-467): x_new[i] = [history of roles
    0..i-1 ; slots of node i], the history zeros (not gated) for node 0. The input that predicts node i + 1
    thus holds the roles of nodes 0..i-1 only: the role of node i is missing."""
    b, num, k = slots.shape[0], slots.shape[1], self.slots
    a = jnp.zeros((b, self.dim), t.dtype)
    out = [jnp.concatenate([jnp.zeros_like(t), slots[:, 0].reshape(b, k * EDGE_VEC)], axis=-1)]
    for i in range(1, num):
      a = self.aggregate(a, remb[:, i - 1])
      out.append(_node_input(t, a, slots[:, i].reshape(b, k * EDGE_VEC)))
    return out

  def __call__(self, q, roles, n, slots, table, deterministic: bool = True):
    """Per-graph loss, 0.2 x node BCE + 0.8 x edge BCE: [B] (arguments as `probs`)."""
    p_node, p_edge = self.probs(q, roles, n, slots, table, deterministic)
    return loss_from_probs(p_node, p_edge, roles, n, slots, self.slots)


def loss_from_probs(p_node, p_edge, roles, n, slots, k: int):
  """The reference's BCE terms (`forward`, l. 518-561) from the teacher-forced softmaxes: [B].

  Node positions 0..n: target the node's role one-hot, END at n. Node v's edge positions 0..min(v, K):
  target its slots, END at min(v, K). Every channel of every such position counts (BCE, not cross-entropy).
  """
  b, num = roles.shape
  rows = p_node.shape[-1]
  pos = jnp.arange(num + 1)
  target = jnp.where((pos[None] < n[:, None])[..., None], jax.nn.one_hot(jnp.pad(roles, ((0, 0), (0, 1))), rows),
                     jax.nn.one_hot(jnp.full((b, num + 1), rows - 1), rows))
  node_mask = (pos[None] <= n[:, None]).astype(p_node.dtype)
  node_loss = jnp.sum(_bce(p_node, target).sum(-1) * node_mask, axis=1)
  end_pos = jnp.minimum(jnp.arange(num), k)  # node v's edge sequence ends at position min(v, K)
  end_hot = jax.nn.one_hot(end_pos, k + 1)[None, :, :, None] * jax.nn.one_hot(END, EDGE_VEC)
  e_target = jnp.concatenate([slots, jnp.zeros((b, num, 1, EDGE_VEC), slots.dtype)], axis=2) + end_hot
  e_mask = ((jnp.arange(k + 1)[None, :] <= end_pos[:, None])[None]
            & (jnp.arange(num)[None, :] < n[:, None])[:, :, None]).astype(p_edge.dtype)
  edge_loss = jnp.sum(_bce(p_edge, e_target).sum(-1) * e_mask, axis=(1, 2))
  return ALPHA * node_loss + (1.0 - ALPHA) * edge_loss


def _safe_log(x):
  """log x floored at -100 (torch's BCE), with a zero gradient where x underflowed to 0: a float32 softmax
  saturates within a few dozen epochs, and log(0)'s infinite slope times the floor's zero would be NaN."""
  ok = x > 0
  return jnp.where(ok, jnp.maximum(jnp.log(jnp.where(ok, x, 1.0)), _LOG_FLOOR), _LOG_FLOOR)


def _bce(p, y):
  return -(y * _safe_log(p) + (1.0 - y) * _safe_log(1.0 - p))


def _start_slots(b: int, k: int):
  """The start token's slot part: START in slot 0 (`embedding_dim + len_edge_vec - 2`, l. 470)."""
  return jnp.zeros((b, k * EDGE_VEC)).at[:, START].set(1.0)


def _node_input(t, a, slot_part):
  """u_0 = [task ; START] (a None) or u_i = [gated history ; slots of node i-1] (module docstring)."""
  if a is None:
    return jnp.concatenate([t, slot_part], axis=-1)
  gate = jax.nn.sigmoid(jnp.sum(a * t, axis=-1, keepdims=True) / t.shape[-1])
  return jnp.concatenate([(1.0 - gate) * a + gate * t, slot_part], axis=-1)


# --- graphs as the model reads them ------------------------------------------------------------------


@dataclasses.dataclass(frozen=True)
class Graph:
  """One agent graph: role ids per node and directed edges (u, v) between node indices."""

  roles: tuple[int, ...]
  edges: tuple[tuple[int, int], ...]

  def adjacency(self) -> np.ndarray:
    adj = np.zeros((len(self.roles), len(self.roles)), bool)
    for u, v in self.edges:
      adj[u, v] = True
    return adj


def topological_order(n: int, edges: Sequence[tuple[int, int]]) -> list[int]:
  """networkx's `topological_sort` order (generation by generation, each in discovery order), the order
  `BFS_Graph_to_Adj_Matrix` lays a DAG out in (`is_dag`, l. 131-133)."""
  succ: dict[int, list[int]] = {i: [] for i in range(n)}
  indeg = [0] * n
  for u, v in edges:
    if v not in succ[u]:
      succ[u].append(v)
      indeg[v] += 1
  gen = [i for i in range(n) if indeg[i] == 0]
  order = []
  while gen:
    order.extend(gen)
    nxt = []
    for u in gen:
      for v in succ[u]:
        indeg[v] -= 1
        if indeg[v] == 0:
          nxt.append(v)
    gen = nxt
  if len(order) != n:
    raise ValueError("the graph has a cycle")
  return order


def encode_graph(graph: Graph, max_nodes: int, slots: int = 3) -> tuple[np.ndarray, int, np.ndarray]:
  """(roles [max_nodes], n, slots [max_nodes, K, 4]) of a graph in topological order; edges longer than K
  are dropped, as the reference's encoding drops them (`v - u <= max_prev_node`)."""
  n = len(graph.roles)
  if n > max_nodes:
    raise ValueError(f"a graph of {n} nodes does not fit the padded size {max_nodes}")
  order = topological_order(n, graph.edges)
  pos = {node: i for i, node in enumerate(order)}
  roles = np.zeros(max_nodes, np.int32)
  roles[:n] = [graph.roles[node] for node in order]
  out = np.zeros((max_nodes, slots, EDGE_VEC), np.float32)
  for v in range(n):
    out[v, :min(v, slots), NO_EDGE] = 1.0
  for u, v in graph.edges:
    pu, pv = pos[u], pos[v]
    if pu < pv and pv - pu <= slots:
      out[pv, pv - pu - 1] = 0.0
      out[pv, pv - pu - 1, EDGE] = 1.0
  return roles, n, out


def role_table(role_embeddings: np.ndarray) -> np.ndarray:
  """[R + 2, D]: the roles' sentence embeddings, then START and END as zero rows (l. 395-398)."""
  r = np.asarray(role_embeddings, np.float32)
  return np.concatenate([r, np.zeros((2, r.shape[1]), np.float32)])


# --- training ----------------------------------------------------------------------------------------


def init_params(net: ARGNet, seed: int, num_roles: int, max_nodes: int = 2):
  q = jnp.zeros((1, net.dim))
  table = jnp.zeros((num_roles + 2, net.dim))
  return _jit_init(net, jax.random.key(seed), q, jnp.zeros((1, max_nodes), jnp.int32), jnp.ones((1,), jnp.int32),
                   jnp.zeros((1, max_nodes, net.slots, EDGE_VEC)), table)["params"]


@functools.partial(jax.jit, static_argnums=0)
def _jit_init(net, rng, q, roles, n, slots, table):
  return net.init(rng, q, roles, n, slots, table)


def make_optimizer(lr: float, clip: float = 1.0) -> optax.GradientTransformation:
  """`clip_grad_norm_(params, 1.0)` then Adam (torch's defaults, optax's)."""
  return optax.chain(optax.clip_by_global_norm(clip), optax.adam(lr))


def batch_loss(params, batch, table, weights, dropout_rng=None, *, net: ARGNet):
  """The weighted mean of the per-graph losses (`-torch.mean(log_ll)`); padding graphs have weight 0."""
  q, roles, n, slots = batch
  if dropout_rng is None:
    per = net.apply({"params": params}, q, roles, n, slots, table)
  else:
    per = net.apply({"params": params}, q, roles, n, slots, table, deterministic=False, rngs={"dropout": dropout_rng})
  return jnp.sum(per * weights) / jnp.maximum(jnp.sum(weights), 1.0)


@functools.partial(jax.jit, static_argnames=("net", "lr", "clip"))
def train_step(state, batch, table, weights, dropout_rng, *, net: ARGNet, lr: float, clip: float = 1.0):
  """One update of {"params", "opt_state"} on a padded batch (dropout on, as `model.train()`)."""
  loss, grads = jax.value_and_grad(batch_loss)(state["params"], batch, table, weights, dropout_rng, net=net)
  updates, opt_state = make_optimizer(lr, clip).update(grads, state["opt_state"], state["params"])
  return {"params": optax.apply_updates(state["params"], updates), "opt_state": opt_state}, loss


@functools.partial(jax.jit, static_argnames=("net",))
def eval_loss(params, batch, table, weights, *, net: ARGNet):
  """The batch's loss in eval mode (`validate`: `model.eval()`, no dropout)."""
  return batch_loss(params, batch, table, weights, net=net)


# --- sampling ----------------------------------------------------------------------------------------


@functools.partial(jax.jit, static_argnames=("net",))
def _start(params, q, *, net: ARGNet):
  t = net.apply({"params": params}, q[None], method=ARGNet.task)
  u = _node_input(t, None, _start_slots(1, net.slots))
  carry, o = net.apply({"params": params}, jnp.zeros((1, net.hidden)), u, method=ARGNet.node_step)
  return t, carry, o


@functools.partial(jax.jit, static_argnames=("net",))
def _zero_step(params, carry, *, net: ARGNet):
  """The public sampler's step before node 0: an all-zero input (l. 632, 655-656)."""
  return net.apply({"params": params}, carry, jnp.zeros((1, net.dim + net.slots * EDGE_VEC)), method=ARGNet.node_step)


@functools.partial(jax.jit, static_argnames=("net",))
def _advance(params, t, agg, carry, role_emb, slot_part, *, net: ARGNet):
  agg = net.apply({"params": params}, agg, role_emb[None], method=ARGNet.aggregate)
  u = _node_input(t, agg, slot_part[None])
  carry, o = net.apply({"params": params}, carry, u, method=ARGNet.node_step)
  return agg, carry, o


@functools.partial(jax.jit, static_argnames=("net",))
def _role_probs(params, o, candidates, *, net: ARGNet):
  return jax.nn.softmax(net.apply({"params": params}, o, candidates, method=ARGNet.node_logits), axis=-1)[0]


@functools.partial(jax.jit, static_argnames=("net",))
def _edge_init(params, o, *, net: ARGNet):
  return net.apply({"params": params}, o, method=ARGNet.edge_init)


@functools.partial(jax.jit, static_argnames=("net",))
def _edge_step(params, carry, e, *, net: ARGNet):
  carry, p = net.apply({"params": params}, carry, e[None], method=ARGNet.edge_step)
  return carry, p[0]


@dataclasses.dataclass(frozen=True)
class Sample:
  """A sampled graph and how it was drawn.

  Attributes:
    graph: roles (ids) in generation order and edges (u, v), u < v.
    log_prob: log-probability of the draws (roles, END, every Bernoulli), forced edges not included.
    forced: nodes whose edge was forced (they drew none).
    role_probs: per step, the distribution the role (or END) was drawn from (START left out: R + 1).
    edge_probs: per node, per slot, the probability the edge draw used.
  """

  graph: Graph
  log_prob: float
  forced: tuple[int, ...]
  role_probs: tuple[np.ndarray, ...]
  edge_probs: tuple[tuple[float, ...], ...]


def sample_graph(net: ARGNet, params, table: np.ndarray, q: np.ndarray, rng: np.random.Generator, *,
                 min_nodes: int, max_nodes: int, edge_rule: str = "intended") -> Sample:
  """One graph for query embedding q (the public `sample(num_samples=1, batch_size=1)`), drawn with `rng`.

  Order of draws per step: the role (inverse CDF of one uniform), then node i's min(i, K) edges (one
  uniform each), then, for i > 0 without an edge, the forced slot (`integers(0, min(i, K))`).
  """
  if edge_rule not in EDGE_RULES:
    raise ValueError(f"edge_rule must be one of {EDGE_RULES}, got {edge_rule!r}")
  num_roles = table.shape[0] - 2
  table = jnp.asarray(table)
  candidates = jnp.concatenate([table[:num_roles], table[num_roles + 1:]])  # roles and END (l. 575-577)
  t, carry, o = _start(params, jnp.asarray(q, jnp.float32), net=net)
  reference_inputs = net.inputs == "reference"
  if reference_inputs:  # the start token's output is dropped; node 0 comes from a zero-input step
    carry, o = _zero_step(params, carry, net=net)
  agg = jnp.zeros((1, net.dim))
  k = net.slots
  roles, edges, forced, role_probs, edge_probs = [], [], [], [], []
  log_prob = 0.0
  for i in range(max_nodes):
    probs = np.asarray(_role_probs(params, o, candidates, net=net), np.float64)
    if i < min_nodes:
      probs[num_roles] = 0.0
    probs = probs / (probs.sum() + 1e-9)
    role_probs.append(probs)
    choice = int(min(np.searchsorted(np.cumsum(probs), rng.random(), side="right"), num_roles))
    log_prob += float(np.log(probs[choice]))
    if choice == num_roles:
      break
    roles.append(choice)
    slot_part = np.zeros((k, EDGE_VEC), np.float32)
    slot_part[:min(i, k), NO_EDGE] = 1.0
    h_edge = _edge_init(params, o, net=net)
    e = jax.nn.one_hot(START, EDGE_VEC)
    drawn, node_probs = [], []
    for j in range(min(k, i)):
      h_edge, p = _edge_step(params, h_edge, e, net=net)
      p = np.asarray(p, np.float64)
      p_draw = p[EDGE] if edge_rule == "intended" else p[NO_EDGE]
      hit = bool(rng.random() < p_draw)
      log_prob += float(np.log(p_draw if hit else 1.0 - p_draw))
      node_probs.append(float(p_draw))
      drawn.append(hit)
      # Fed back: the drawn token (intended: EDGE or NO_EDGE; reference: channel `exists`, 1 or 0).
      fed = (EDGE if hit else NO_EDGE) if edge_rule == "intended" else int(hit)
      e = jax.nn.one_hot(fed, EDGE_VEC)
    if i > 0 and not any(drawn):
      drawn[int(rng.integers(0, min(i, k)))] = True
      forced.append(i)
    for j, hit in enumerate(drawn):
      if hit:
        edges.append((i - j - 1, i))
        slot_part[j] = 0.0
        slot_part[j, EDGE] = 1.0
    edge_probs.append(tuple(node_probs))
    if reference_inputs:  # the public sampler feeds the history only, never the node's slots (l. 632-645)
      slot_part[:] = 0.0
    agg, carry, o = _advance(params, t, agg, carry, table[choice], jnp.asarray(slot_part.ravel()), net=net)
  graph = Graph(tuple(roles), tuple(sorted(edges)))
  return Sample(graph, log_prob, tuple(forced), tuple(role_probs), tuple(edge_probs))
