"""ARG-Designer: the generator's autoregressive draws (agent count, roles, edges) and their log-probability
against hand computations on tiny fixed parameters, the BCE likelihood and its gradient sign, training and
sampling reading the same distribution, the public configurations and pruning, and a tiny fit + solve +
reload on the simulated pool over real HTTP."""

from __future__ import annotations

import asyncio
import json

import jax
import jax.numpy as jnp
import numpy as np
import pytest

from hieramas_jax.benchmarks import graders
from hieramas_jax.benchmarks.data import load_items
from hieramas_jax.llm.client import LLMClient
from hieramas_jax.llm.endpoint import sim_endpoint
from hieramas_jax.llm.registry import get_pool
from hieramas_jax.methods.api import MethodError, RunContext
from hieramas_jax.methods.arg_designer import method as am
from hieramas_jax.methods.arg_designer import model as m
from hieramas_jax.methods.registry import make_method, title_of
from mas_fakes import FakeClient

D, H = 4, 8
NET = m.ARGNet(dim=D, hidden=H)


def _params(seed=0, roles=3):
  return m.init_params(NET, seed, roles, max_nodes=5)


def _table(roles=3, seed=1):
  return m.role_table(np.random.default_rng(seed).normal(size=(roles, D)).astype(np.float32))


# --- the encoding ------------------------------------------------------------------------------------


def test_a_graph_is_laid_out_in_topological_order_with_k_edge_slots_per_node():
  # 0 -> 2, 2 -> 1, 1 -> 3 and 0 -> 3 (distance 3 after relabelling): order 0, 2, 1, 3.
  g = m.Graph((5, 6, 7, 8), ((0, 2), (2, 1), (1, 3), (0, 3)))
  assert m.topological_order(4, g.edges) == [0, 2, 1, 3]
  roles, n, slots = m.encode_graph(g, max_nodes=6, slots=3)
  assert n == 4 and roles.tolist() == [5, 7, 6, 8, 0, 0]
  e, x, z = [1, 0, 0, 0], [0, 1, 0, 0], [0, 0, 0, 0]
  assert slots[0].tolist() == [z, z, z]        # node 0: no earlier node
  assert slots[1].tolist() == [e, z, z]        # old 2 <- old 0 (distance 1)
  assert slots[2].tolist() == [e, x, z]        # old 1 <- old 2 (distance 1), none from old 0 (distance 2)
  assert slots[3].tolist() == [e, x, e]        # old 3 <- old 1 (d 1), old 0 (d 3)
  # An edge longer than K is dropped, as the reference's encoding drops it.
  far = m.encode_graph(m.Graph((0,) * 5, ((0, 1), (1, 2), (2, 3), (3, 4), (0, 4))), 5, slots=3)[2]
  assert far[4].tolist() == [e, x, x]
  with pytest.raises(ValueError):
    m.topological_order(2, ((0, 1), (1, 0)))


# --- sampling by hand ----------------------------------------------------------------------------------


class _Uniforms:
  """A numpy-Generator stand-in returning fixed uniforms (and fixed integers) in order."""

  def __init__(self, uniforms, integers=()):
    self.u, self.i = list(uniforms), list(integers)

  def random(self):
    return self.u.pop(0)

  def integers(self, lo, hi):
    v = self.i.pop(0)
    assert lo <= v < hi
    return v


def _hand_steps(params, table, q, graph_roles, slots_of, reference=False):
  """The sampler's distributions recomputed by hand (numpy, from the parameters) along a fixed path;
  `reference`: the public sampler's node inputs (a zero-input step before node 0, no slots fed)."""
  p = jax.tree_util.tree_map(np.asarray, params)

  def dense(x, layer):
    return x @ layer["kernel"] + layer["bias"]

  def mlp(x, name):
    return dense(np.maximum(dense(x, p[name]["fc1"]), 0), p[name]["fc2"])

  def gru(name, h, x):  # flax GRUCell: r, z on input+hidden; n = tanh(W_in x + r * (W_hn h + b_hn))
    c = p[name]
    sig = lambda v: 1 / (1 + np.exp(-v))
    r = sig(dense(x, c["ir"]) + h @ c["hr"]["kernel"])
    z = sig(dense(x, c["iz"]) + h @ c["hz"]["kernel"])
    nn_ = np.tanh(dense(x, c["in"]) + r * dense(h, c["hn"]))
    return (1 - z) * nn_ + z * h

  x = dense(q, p["task_fc1"])
  mu, var = x.mean(), x.var()
  x = (x - mu) / np.sqrt(var + 1e-5) * p["task_norm"]["scale"] + p["task_norm"]["bias"]
  t = dense(np.maximum(x, 0), p["task_fc2"])
  cands = np.concatenate([table[:-2], table[-1:]])
  proc = mlp(cands, "role_processor")
  start = np.zeros(3 * 4)
  start[m.START] = 1
  h = gru("node_gru", np.zeros(H), mlp(np.concatenate([t, start]), "node_project"))
  if reference:
    h = gru("node_gru", h, mlp(np.zeros(D + 12), "node_project"))
  a = np.zeros(D)
  steps = []
  for i in range(len(graph_roles) + 1):
    logits = mlp(h, "output_node") @ proc.T
    probs = np.exp(logits - logits.max())
    steps.append({"roles": probs / probs.sum()})
    if i == len(graph_roles):
      break
    he = mlp(h, "node_to_edge")
    e = np.eye(4)[m.START]
    edge_p = []
    for j in range(min(i, 3)):
      he = gru("edge_gru", he, mlp(e, "edge_project"))
      out = mlp(he, "output_edge")
      sm = np.exp(out - out.max())
      sm = sm / sm.sum()
      edge_p.append(sm)
      e = np.eye(4)[m.EDGE if slots_of[i][j] else m.NO_EDGE]
    steps[-1]["edges"] = edge_p
    a = gru("aggregator", a, table[graph_roles[i]])
    g = 1 / (1 + np.exp(-(a @ t) / D))
    slot_part = np.zeros((3, 4))
    for j in range(min(i, 3)):
      slot_part[j, m.EDGE if slots_of[i][j] else m.NO_EDGE] = 0 if reference else 1
    h = gru("node_gru", h, mlp(np.concatenate([(1 - g) * a + g * t, slot_part.ravel()]), "node_project"))
  return steps


def test_sampling_draws_count_roles_and_edges_with_the_hand_computed_probabilities():
  params, table = _params(), _table()
  q = np.array([0.3, -1.0, 0.5, 2.0], np.float32)
  # Path: role 2, role 0 + edge to node 0 (drawn), role 1 + edges (drawn, not drawn), then END.
  path_roles, slots_of = [2, 0, 1], [[], [True], [True, False]]
  hand = _hand_steps(params, table, q, path_roles, slots_of)
  # Uniforms that pick exactly this path under the hand-computed probabilities (inverse CDF, u < p edge).
  u = []
  for i, role in enumerate(path_roles):
    probs = hand[i]["roles"].copy()
    if i < 2:  # min_nodes 2: END impossible
      probs[3] = 0
    probs /= probs.sum()
    u.append(float(np.cumsum(probs)[role] - probs[role] / 2))
    u += [hand[i]["edges"][j][m.EDGE] * (0.5 if hit else 1.0) + (0 if hit else (1 - hand[i]["edges"][j][m.EDGE]) / 2)
          for j, hit in enumerate(slots_of[i])]
  end_probs = hand[3]["roles"]
  u.append(float(1 - end_probs[3] / 2))  # the last bin: END
  s = m.sample_graph(NET, params, table, q, _Uniforms(u), min_nodes=2, max_nodes=5)
  assert s.graph.roles == (2, 0, 1) and s.graph.edges == ((0, 1), (1, 2)) and s.forced == ()
  np.testing.assert_allclose(s.role_probs[3], end_probs, rtol=1e-4)
  assert s.role_probs[0][3] == 0 and s.role_probs[1][3] == 0  # END masked before min_nodes
  np.testing.assert_allclose(s.edge_probs[2], [hand[2]["edges"][0][m.EDGE], hand[2]["edges"][1][m.EDGE]], rtol=1e-4)
  expected = (np.log(s.role_probs[0][2]) + np.log(s.role_probs[1][0]) + np.log(s.role_probs[2][1])
              + np.log(end_probs[3]) + np.log(hand[1]["edges"][0][m.EDGE]) + np.log(hand[2]["edges"][0][m.EDGE])
              + np.log(1 - hand[2]["edges"][1][m.EDGE]))
  assert s.log_prob == pytest.approx(expected, rel=1e-4)


def test_a_node_without_edges_gets_one_forced_and_the_count_stays_within_the_range():
  params, table = _params(), _table()
  q = np.ones(D, np.float32)
  # Role bin 0 each time, every edge refused (u = 0.999999): node 1's forced slot is its only one (0), node 2's
  # is slot 1 (distance 2: 0 -> 2); max_nodes stops the graph without an END draw.
  s = m.sample_graph(NET, params, table, q, _Uniforms([1e-6, 1e-6, 0.999999, 1e-6, 0.999999, 0.999999], [0, 1]),
                     min_nodes=1, max_nodes=3)
  assert s.graph.roles == (0, 0, 0) and s.forced == (1, 2)
  assert s.graph.edges == ((0, 1), (0, 2))


def test_the_reference_edge_rule_draws_with_the_no_edge_channel():
  params, table = _params(), _table()
  q = np.ones(D, np.float32)
  ours = m.sample_graph(NET, params, table, q, np.random.default_rng(3), min_nodes=4, max_nodes=4)
  ref = m.sample_graph(NET, params, table, q, np.random.default_rng(3), min_nodes=4, max_nodes=4,
                       edge_rule="reference")
  hand = _hand_steps(params, table, q, [ours.graph.roles[0], ours.graph.roles[1]], [[], [False]])
  assert ours.edge_probs[1][0] == pytest.approx(hand[1]["edges"][0][m.EDGE], rel=1e-4)
  assert ref.edge_probs[1][0] == pytest.approx(hand[1]["edges"][0][m.NO_EDGE], rel=1e-4)
  with pytest.raises(ValueError):
    m.sample_graph(NET, params, table, q, np.random.default_rng(0), min_nodes=1, max_nodes=2, edge_rule="x")


def test_the_reference_node_inputs_are_one_step_apart_between_training_and_sampling():
  net_ref = m.ARGNet(dim=D, hidden=H, inputs="reference")
  params, table = _params(seed=4), _table()
  q = np.array([1.0, 0.0, -0.5, 0.2], np.float32)
  s = m.sample_graph(net_ref, params, table, q, np.random.default_rng(5), min_nodes=0, max_nodes=4)
  slots_of = [[(i - j - 1, i) in s.graph.edges for j in range(min(i, 3))] for i in range(len(s.graph.roles))]
  hand = _hand_steps(params, table, q, list(s.graph.roles), slots_of, reference=True)
  for i, probs in enumerate(s.role_probs):
    np.testing.assert_allclose(probs, hand[i]["roles"], rtol=2e-4, atol=1e-6)
  # The public training predicts node 1 from an all-zero input after the start token (x_new[0] holds no
  # history and node 0's empty slots): the very distribution its sampler uses for node 0.
  roles, n, slots = m.encode_graph(m.Graph((0, 1), ((0, 1),)), 3)
  args = (jnp.asarray(q)[None], jnp.asarray(roles)[None], jnp.asarray([n]), jnp.asarray(slots)[None],
          jnp.asarray(table))
  p_ref = np.asarray(net_ref.apply({"params": params}, *args, method=m.ARGNet.probs)[0][0])
  p_int = np.asarray(NET.apply({"params": params}, *args, method=m.ARGNet.probs)[0][0])
  renorm = lambda p: np.concatenate([p[:3], p[4:]]) / (1 - p[3])
  np.testing.assert_allclose(renorm(p_ref[1]), s.role_probs[0], rtol=2e-4)
  np.testing.assert_allclose(p_ref[0], p_int[0], rtol=1e-5)  # the start token is the same in both
  assert not np.allclose(p_ref[1], p_int[1], rtol=1e-3)


def test_training_scores_a_sampled_graph_with_the_distributions_it_was_drawn_from():
  # The intended fix of the public sampler: teacher forcing on a sampled graph (generation order ==
  # topological order here: a chain-like draw) reproduces the sampler's distributions.
  params, table = _params(seed=4), _table()
  q = np.array([1.0, 0.0, -0.5, 0.2], np.float32)
  for seed in range(40):
    s = m.sample_graph(NET, params, table, q, np.random.default_rng(seed), min_nodes=2, max_nodes=4)
    if not s.forced and m.topological_order(len(s.graph.roles), s.graph.edges) == list(range(len(s.graph.roles))):
      break
  else:
    pytest.fail("no unforced draw in topological order")
  roles, n, slots = m.encode_graph(s.graph, 5)
  p_node, p_edge = NET.apply({"params": params}, jnp.asarray(q)[None], jnp.asarray(roles)[None],
                             jnp.asarray([n]), jnp.asarray(slots)[None], jnp.asarray(table), method=m.ARGNet.probs)
  p_node, p_edge = np.asarray(p_node[0]), np.asarray(p_edge[0])
  for i in range(n + 1):
    train = np.concatenate([p_node[i, :3], p_node[i, 4:]]) / (1 - p_node[i, 3])  # START left out, renormalised
    if i < 2:
      train[3] = 0
      train /= train.sum()
    np.testing.assert_allclose(s.role_probs[i], train, rtol=2e-4, atol=1e-6)
  for i in range(n):
    np.testing.assert_allclose(s.edge_probs[i], p_edge[i, :min(i, 3), m.EDGE], rtol=2e-4)


# --- the loss --------------------------------------------------------------------------------------------


def test_the_loss_is_the_reference_bce_weighted_0_2_node_0_8_edge():
  # 2 roles (+ START, END: 4 rows), 2 nodes, K = 3; fixed softmax outputs, BCE summed by hand.
  p_node = np.full((1, 3, 4), 0.25, np.float32)
  p_node[0, 0] = [0.7, 0.1, 0.1, 0.1]
  p_edge = np.full((1, 2, 4, 4), 0.25, np.float32)
  p_edge[0, 1, 0] = [0.6, 0.2, 0.1, 0.1]
  p_edge[0, 1, 1] = [0.1, 0.1, 0.1, 0.7]
  g = m.Graph((0, 1), ((0, 1),))
  roles, n, slots = m.encode_graph(g, 2)
  loss = m.loss_from_probs(jnp.asarray(p_node), jnp.asarray(p_edge), jnp.asarray(roles)[None], jnp.asarray([n]),
                           jnp.asarray(slots)[None], 3)

  def bce(p, y):
    return -sum(np.log(pi) if yi else np.log(1 - pi) for pi, yi in zip(p, y))

  node = bce([0.7, 0.1, 0.1, 0.1], [1, 0, 0, 0]) + bce([0.25] * 4, [0, 1, 0, 0]) + bce([0.25] * 4, [0, 0, 0, 1])
  # Node 0: its edge sequence is END alone; node 1: slot 0 = EDGE, then END at position 1.
  edge = bce([0.25] * 4, [0, 0, 0, 1]) + bce([0.6, 0.2, 0.1, 0.1], [1, 0, 0, 0]) + bce([0.1, 0.1, 0.1, 0.7],
                                                                                      [0, 0, 0, 1])
  assert float(loss[0]) == pytest.approx(0.2 * node + 0.8 * edge, rel=1e-5)


def test_a_saturated_softmax_keeps_the_loss_floored_and_its_gradient_finite():
  # torch's BCE floors each log at -100; an output at exactly 0 or 1 (float32 saturation) must not give NaN.
  roles, n, slots = m.encode_graph(m.Graph((0,), ()), 1)
  p_node = jnp.asarray([[[0.0, 0.0, 0.0, 1.0], [1.0, 0.0, 0.0, 0.0]]])  # both positions wrong with certainty
  p_edge = jnp.full((1, 1, 4, 4), 0.25)
  f = lambda pn: m.loss_from_probs(pn, p_edge, jnp.asarray(roles)[None], jnp.asarray([n]), jnp.asarray(slots)[None],
                                   3)[0]
  edge = -np.log(0.25) - 3 * np.log(0.75)
  assert float(f(p_node)) == pytest.approx(0.2 * 4 * 100 + 0.8 * edge, rel=1e-5)
  assert np.isfinite(np.asarray(jax.grad(f)(p_node))).all()


def test_an_update_raises_the_likelihood_of_the_training_graph():
  params, table = _params(), jnp.asarray(_table())
  g = m.Graph((1, 2, 0), ((0, 1), (1, 2)))
  roles, n, slots = m.encode_graph(g, 3)
  batch = (jnp.ones((1, D)), jnp.asarray(roles)[None], jnp.asarray([n]), jnp.asarray(slots)[None])
  w = jnp.ones(1)
  before = float(m.eval_loss(params, batch, table, w, net=NET))
  grads = jax.jit(jax.grad(m.batch_loss), static_argnames="net")(params, batch, table, w, net=NET)
  # The loss is a negative log-likelihood: a small step against its gradient lowers it.
  stepped = jax.tree_util.tree_map(lambda p, g_: p - 1e-3 * g_, params, grads)
  assert float(m.eval_loss(stepped, batch, table, w, net=NET)) < before
  state = {"params": params, "opt_state": m.make_optimizer(1e-2).init(params)}
  for i in range(5):
    state, _ = m.train_step(state, batch, table, w, jax.random.key(i), net=NET, lr=1e-2)
  assert float(m.eval_loss(state["params"], batch, table, w, net=NET)) < before
  # A padding graph (weight 0) changes nothing.
  pad = jax.tree_util.tree_map(lambda x: jnp.concatenate([x, x]), batch)
  assert float(m.eval_loss(params, pad, table, jnp.array([1.0, 0.0]), net=NET)) == pytest.approx(before, rel=1e-6)


# --- the public configurations -------------------------------------------------------------------------


def test_configurations_topologies_and_pruning_follow_the_public_scripts():
  assert am.cold_configs(6) == [("FullConnected", 3), ("FullConnected", 4), ("Mesh", 4), ("FullConnected", 5),
                                ("Mesh", 5), ("FullConnected", 6), ("Mesh", 6)]
  assert am.simple_configs(4) == [("Chain", 2), ("Chain", 3), ("Star", 3), ("Chain", 4), ("Star", 4),
                                  ("Layered", 4)]
  rng = np.random.default_rng(0)
  assert am.dag_from_mask(am.spatial_mask("FullConnected", 3, rng)) == [(0, 1), (0, 2), (1, 2)]
  assert am.dag_from_mask(am.spatial_mask("Mesh", 4, rng)) == am.dag_from_mask(am.spatial_mask("FullConnected", 4, rng))
  assert am.dag_from_mask(am.spatial_mask("Chain", 4, rng)) == [(0, 1), (1, 2), (2, 3)]
  assert am.dag_from_mask(am.spatial_mask("Star", 4, rng)) == [(0, 1), (0, 2), (0, 3)]
  layered = am.spatial_mask("Layered", 5, rng)
  assert layered.sum() == 6 and not np.diag(layered).any()  # 3 x 2 layers, every node of one to every of the next
  assert am.dag_from_mask(am.spatial_mask("Mesh", 9, rng))[:3] == [(0, 1), (0, 3), (1, 2)]
  # Pruning: int(3 x 0.25) = 0 edges go; of 6, int(1.5) = 1 goes and the graph stays weakly connected.
  full = m.Graph((0,) * 3, ((0, 1), (0, 2), (1, 2)))
  assert am.prune_graph(full, 0.25, np.random.default_rng(0)) == full
  chain = m.Graph((0,) * 4, ((0, 1), (1, 2), (2, 3), (0, 2), (0, 3), (1, 3)))
  for seed in range(5):
    pruned = am.prune_graph(chain, 0.25, np.random.default_rng(seed))
    assert len(pruned.edges) == 5 and len(am.weak_components(4, pruned.edges)) == 1
  star = m.Graph((0,) * 4, ((0, 1), (0, 2), (0, 3), (1, 2)))
  pruned = am.prune_graph(star, 0.5, np.random.default_rng(1))
  assert len(am.weak_components(4, pruned.edges)) == 1 and len(pruned.edges) in (3, 4)


def test_training_batches_pad_to_one_shape_and_drop_the_last_partial_batch_only_when_pretraining(monkeypatch):
  method = make_method("arg_designer", benchmark="math", pool="gpt-5-mini", hidden=8, batch_size=4)
  roles = method.roles
  records = [{"question": f"q{i}", "roles": [roles[i % 3], roles[(i + 1) % 3]], "edges": [[0, 1]]} for i in range(7)]
  q_rows = np.random.default_rng(0).normal(size=(7, 384)).astype(np.float32)
  calls = []
  real = m.train_step

  def counting(state, batch, table, weights, rng, **kw):
    calls.append((float(weights.sum()), tuple(batch[1].shape)))
    return real(state, batch, table, weights, rng, **kw)

  monkeypatch.setattr(am.model, "train_step", counting)
  params = m.init_params(method.net, 0, len(roles))
  before = real._cache_size()  # pylint: disable=protected-access
  train = method._train_sync  # pylint: disable=protected-access
  # Pretraining: int(7 x 0.9) = 6 train graphs -> one batch of 4 per epoch, 2 dropped (`drop_last=True`).
  _, info = train(records, q_rows, params, stage=1, lr=1e-3, epochs=2, validate_on_train=False)
  assert calls == [(4.0, (4, am.PAD_NODES))] * 2 and (info["train"], info["validate"]) == (6, 1)
  # Finetuning keeps the partial batch (4 + 3) and validates on its own data.
  calls.clear()
  _, info = train(records, q_rows, params, stage=3, lr=1e-3, epochs=1, validate_on_train=True)
  assert calls == [(4.0, (4, am.PAD_NODES)), (3.0, (4, am.PAD_NODES))] and info["validate"] == 7
  # Fewer graphs than one batch: trained on as one batch (deviation 3), not skipped.
  calls.clear()
  best, info = train(records[:3], q_rows[:3], params, stage=1, lr=1e-3, epochs=1, validate_on_train=False)
  assert calls == [(2.0, (4, am.PAD_NODES))] and info["best_val_loss"] is not None
  # Every batch had one shape: one compile for the three fits.
  assert real._cache_size() - before == 1  # pylint: disable=protected-access
  # The weights kept are the epoch's with the lowest validation loss (here the only epoch's, not the start).
  leaves = zip(jax.tree_util.tree_leaves(best), jax.tree_util.tree_leaves(params))
  assert any(not np.allclose(x, y) for x, y in leaves)


def test_the_method_seats_the_reference_roles_sorted_and_takes_the_benchmarks_budget():
  method = make_method("arg_designer", benchmark="mmlu_redux", pool="gpt-5-mini")
  assert title_of("arg_designer") == "ARG-Designer"
  assert method.roles == ("Critic", "Doctor", "Historian", "Knowlegable Expert", "Mathematician", "Psychologist")
  d = method.describe()
  assert (d["batch_size"], d["pretrain_lr"], d["finetune_lr"], d["max_agents"]) == (64, 1e-4, 5e-5, 6)
  d = make_method("arg_designer", benchmark="math", pool="qwen3-80b").describe()
  assert (d["batch_size"], d["finetune_epochs"], d["max_agents"]) == (32, 200, 4)
  assert len(make_method("arg_designer", benchmark="mmlu_redux", pool="gpt-5-mini", role_pool="suite").roles) == 8
  with pytest.raises(ValueError):
    make_method("arg_designer", benchmark="math", pool="gpt-5-mini", edge_rule="nope")
  with pytest.raises(ValueError):
    make_method("arg_designer", benchmark="math", pool="gpt-5-mini", node_inputs="nope")


def test_a_graph_runs_its_agents_once_in_topological_order_then_the_decision_agent():
  method = make_method("arg_designer", benchmark="math", pool="qwen3-80b")
  client = FakeClient(lambda mdl, msgs, s: f"answer of {msgs[0]['content'][:20]}")
  item = load_items("math")[0]
  ctx = RunContext(client, get_pool("qwen3-80b"))
  run = method._run  # pylint: disable=protected-access
  trace = asyncio.run(run(ctx, item, ["Inspector", "Math Solver", "Inspector"], [(0, 2), (1, 2)]))
  assert len(client.calls) == 3 + 1 and {c["model"] for c in client.calls} == {"qwen3-80b"}
  assert {c["temperature"] for c in client.calls} == {0.2}  # the public achat's default
  last_agent = client.calls[2]["messages"][1]["content"]
  assert "Agent 1, role is Inspector" in last_agent and "Agent 2, role is Math Solver" in last_agent
  assert "Agent" not in client.calls[0]["messages"][1]["content"]
  assert trace.final_text


# --- end to end on the simulated pool --------------------------------------------------------------


def test_a_tiny_fit_runs_the_four_stages_and_the_fitted_generator_solves_and_reloads(session_sim, tmp_path):
  items = load_items("math")
  train, test = items[:5], items[-2:]
  options = dict(benchmark="math", pool="gpt-5-mini", seed=0, train_queries=5, hidden=16, max_agents=3,
                 pretrain_epochs=2, finetune_epochs=2, batch_size=4)

  async def go():
    endpoint = sim_endpoint(session_sim.base_url)
    async with LLMClient(endpoint) as client:
      ctx = RunContext(client, get_pool("gpt-5-mini"), seed=0, state_dir=tmp_path / "state")
      method = make_method("arg_designer", **options)
      with pytest.raises(MethodError):
        await method.solve(ctx, test[0])
      summary = await method.fit(train, [], ctx)
      traces = [await method.solve(ctx, it) for it in test]
      grades = [(await graders.grade_async(it, t.final_text)).correct for it, t in zip(test, traces)]
      again = make_method("arg_designer", **options)
      again.load(tmp_path / "state")
      again_traces = [await again.solve(ctx, it) for it in test]
      return summary, traces, grades, method, again, again_traces

  summary, traces, grades, method, again, again_traces = asyncio.run(go())
  # 5 queries: int(0.4 x 5) = 2 base x 1 cold configuration (FullConnected 3); 3 finetune queries x (1 pruned
  # + Chain 2, Chain 3, Star 3).
  assert summary["cold_rollouts"] == 2 and summary["pruned_rollouts"] == 3 and summary["simple_rollouts"] == 9
  # Each stage's per-epoch curve is kept (2 epochs each) for the learning evidence.
  for stage in ("pretrain", "finetune"):
    if "skipped" not in summary[stage]:
      assert len(summary[stage]["curve"]["train_loss"]) == len(summary[stage]["curve"]["val_loss"]) == 2
  records = json.loads((tmp_path / "state" / am.GRAPHS_FILE).read_text())
  assert all(r["mode"] == "FullConnected" and len(r["roles"]) == 3 for r in records["cold"])
  lo, hi = summary["node_range"]
  for t in traces:
    assert lo <= len(t.extra["agents"]) <= hi and len(t.calls) == len(t.extra["agents"]) + 1
  assert all(isinstance(g, bool) for g in grades)
  assert [t.extra["edges"] for t in again_traces] == [t.extra["edges"] for t in traces]
  assert again.node_range == method.node_range
