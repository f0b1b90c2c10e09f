"""The baselines' pieces against hand computations: GDesigner's net and loss, MASRouter's loss, AFlow's search
step, the multi-round agent runtime, Full-Graph / Random-Graph, and AFlow's sandboxed operators."""

from __future__ import annotations

import asyncio
import math

import jax
import jax.numpy as jnp
import numpy as np
import pytest

from hieramas_jax.benchmarks.data import items_by_id, load_items
from hieramas_jax.llm.registry import get_pool
from hieramas_jax.mas.rounds import RoundAgent, RoundsConfig, run_rounds, temporal_from_spatial
from hieramas_jax.methods.api import RunContext
from hieramas_jax.methods.registry import make_method
from hieramas_jax.methods.aflow import search as aflow_search
from hieramas_jax.methods.aflow.workflow import INSTRUCTIONS, Workflow, edits
from hieramas_jax.methods.gdesigner import model as gd
from hieramas_jax.methods.masrouter import model as mr
from mas_fakes import FakeClient

MMLU = load_items("mmlu_redux")[0]


# --- GDesigner ------------------------------------------------------------------------------------


def _gcn_reference(x, adj, kernel, bias):
  """PyG GCNConv by hand (adj[i, j]: edge i -> j): out_j = sum_i (A + I)[i, j] x_i W / sqrt(d_i d_j) + b, with
  d the in-degree + 1."""
  a_hat = adj + np.eye(adj.shape[0])
  d = a_hat.sum(0)
  norm = a_hat / np.sqrt(d[:, None] * d[None, :])
  return norm.T @ (x @ kernel) + bias


def _log_softmax(h):
  h = h - h.max(1, keepdims=True)
  return h - np.log(np.exp(h).sum(1, keepdims=True))


def test_gdesigner_anchor_is_the_prompt_sets_role_connections():
  roles = ("Mathematical Analyst", "Math Solver", "Inspector")
  senders, receivers = gd.anchor_edges(roles, "math")
  # gsm8k_prompt_set.py's connections among these three roles (its Programming Expert left out).
  assert sorted(zip(senders.tolist(), receivers.tolist())) == [(0, 1), (0, 2), (2, 0), (2, 1)]
  chain = gd.anchor_edges(roles, "math", "chain")
  assert sorted(zip(*map(np.ndarray.tolist, chain))) == [(0, 1), (1, 0), (1, 2), (2, 1)]
  from hieramas_jax.mas.roles import roles_for  # pylint: disable=import-outside-toplevel
  for benchmark, count in (("mmlu_redux", 27), ("math", 4), ("humaneval_plus", 10)):
    names = roles_for(benchmark)
    s, r = gd.anchor_edges(names, benchmark)
    pairs = set(zip(s.tolist(), r.tolist()))
    assert len(pairs) == len(s) == count and all(a != b for a, b in pairs), benchmark
    assert set(s.tolist()) | set(r.tolist()) == set(range(len(names))), benchmark  # every role is connected
  mmlu = roles_for("mmlu_redux")
  s, r = gd.anchor_edges(mmlu, "mmlu_redux")
  expert = mmlu.index("Knowlegable Expert")
  assert sorted(r[s == expert].tolist()) == sorted(set(range(8)) - {expert})  # the expert feeds every other role


def test_gdesigner_edge_probabilities_match_a_hand_written_gcn():
  rng = np.random.default_rng(0)
  role = rng.normal(size=(3, 4)).astype(np.float32)
  query = rng.normal(size=(1, 4)).astype(np.float32)
  net = gd.TopologyNet(num_nodes=3, gcn_hidden=5, gcn_out=4, mlp_hidden=3, mlp_out=2)
  params = gd.init_params(jax.random.key(1), net, role, 4)
  params = jax.tree_util.tree_map(lambda a: a + 0.1, params)  # nonzero biases, so their placement is tested
  roles = ("Mathematical Analyst", "Math Solver", "Inspector")
  edges = gd.anchor_edges(roles, "math")
  probs = np.asarray(gd.edge_probs(params, gd.query_graphs(role, query, edges), net=net))[0]
  p = jax.tree_util.tree_map(np.asarray, params)
  anchor = np.zeros((3, 3))
  anchor[edges[0], edges[1]] = 1  # directed: 0 -> 1, 0 -> 2, 2 -> 0, 2 -> 1
  x = np.concatenate([role, np.repeat(query, 3, 0)], 1)
  h = np.maximum(_gcn_reference(x, anchor, p["gcn1"]["kernel_map"]["kernel"], p["gcn1"]["bias"]), 0)
  h = _log_softmax(_gcn_reference(h, anchor, p["gcn2"]["kernel_map"]["kernel"], p["gcn2"]["bias"]))
  z = np.maximum(h @ p["mlp_hidden"]["kernel"] + p["mlp_hidden"]["bias"], 0)
  z = z @ p["mlp_out"]["kernel"] + p["mlp_out"]["bias"]
  s = z @ z.T
  unit = (s - s.min()) / (s.max() - s.min())
  expected = 1 / (1 + np.exp(-(2 * unit - 1)))  # the reference's min-max to [-1, 1]
  np.testing.assert_allclose(probs, expected, rtol=1e-5, atol=1e-6)
  top = 1 / (1 + math.exp(-1))
  assert probs.min() == pytest.approx(1 - top, rel=1e-5) and probs.max() == pytest.approx(top, rel=1e-5)  # [0.27, 0.73]
  unit_net = gd.TopologyNet(num_nodes=3, gcn_hidden=5, gcn_out=4, mlp_hidden=3, mlp_out=2, edge_range="unit")
  np.testing.assert_allclose(gd.edge_probs(params, gd.query_graphs(role, query, edges), net=unit_net)[0],
                             1 / (1 + np.exp(-unit)), rtol=1e-5, atol=1e-6)
  # Training mode drops GCN features (reference dropout 0.5): other probabilities, the same for the same key.
  key = jax.random.key(7)
  train = np.asarray(gd.edge_probs(params, gd.query_graphs(role, query, edges), key, net=net))
  assert not np.allclose(train[0], probs)
  np.testing.assert_array_equal(train, gd.edge_probs(params, gd.query_graphs(role, query, edges), key, net=net))


def test_gdesigner_trains_only_the_gcn_as_the_reference_optimizer_does():
  rng = np.random.default_rng(0)
  role, query = rng.normal(size=(3, 4)).astype(np.float32), rng.normal(size=(2, 4)).astype(np.float32)
  net = gd.TopologyNet(num_nodes=3, gcn_hidden=5, gcn_out=4, mlp_hidden=3, mlp_out=2)
  graph = gd.query_graphs(role, query)
  params = gd.init_params(jax.random.key(1), net, role, 4)
  considered = jnp.ones((2, 1, 3, 3), bool)
  chosen = jnp.asarray(rng.random((2, 1, 3, 3)) < 0.5)
  for train_params, moved in (("gcn", {"gcn1", "gcn2"}), ("all", {"gcn1", "gcn2", "mlp_hidden", "mlp_out"})):
    state = {"params": params, "opt_state": gd.make_optimizer(0.1, train_params).init(params), "step": jnp.int32(0)}
    new, _ = gd.train_step(state, graph, considered, chosen, jnp.array([1.0, 1.0]), jax.random.key(2), net=net,
                           lr=0.1, train_params=train_params)
    changed = {k for k in params if not all(np.array_equal(a, b) for a, b in zip(
        jax.tree_util.tree_leaves(params[k]), jax.tree_util.tree_leaves(new["params"][k])))}
    assert changed == moved, train_params


def test_a_gdesigner_fit_reports_each_update_for_the_live_display(tmp_path):
  # The table's live display shows a fitting cell's step, rate and ETA only from these reports (the
  # GDesigner row was blank: no step, rate or ETA for its whole fit).
  reports = []
  ctx = RunContext(FakeClient(), get_pool("gpt-5-mini"), seed=0, state_dir=tmp_path,
                   report=lambda stage, done, total: reports.append((stage, done, total)))
  method = make_method("gdesigner", benchmark="mmlu_redux", pool="gpt-5-mini", iterations=2, batch_size=2)
  asyncio.run(method.fit(load_items("mmlu_redux")[:4], [], ctx))
  assert reports == [("reinforce", 0, 2), ("reinforce", 1, 2), ("reinforce", 2, 2)]


def test_gdesigner_sampling_skips_cycle_closing_pairs_and_the_loss_is_reinforce():
  # Probability 1 everywhere: every pair that does not close a cycle is kept, in i-major order.
  adj, considered, chosen = gd.sample_dag(np.ones((3, 3)), np.random.default_rng(0))
  np.testing.assert_array_equal(adj, np.triu(np.ones((3, 3), bool), 1))
  np.testing.assert_array_equal(considered, adj)  # 1->0, 2->0, 2->1 would close cycles: never drawn
  # Hand-computed loss: query 0 kept edge (0,1) at p = 0.6 and dropped (1,0) at p = 0.7; query 1 kept (0,1) at
  # p = 0.5; utilities 1 and 0. loss = -(1 * (log 0.6 + log 0.3) + 0 * log 0.5) / 2.
  probs = jnp.array([[[0.5, 0.6], [0.7, 0.5]], [[0.5, 0.5], [0.5, 0.5]]])
  considered = jnp.array([[[[False, True], [True, False]]], [[[False, True], [False, False]]]])
  chosen = jnp.array([[[[False, True], [False, False]]], [[[False, True], [False, False]]]])
  loss = gd.reinforce_loss(probs, considered, chosen, jnp.array([1.0, 0.0]))
  assert float(loss) == pytest.approx(-(math.log(0.6) + math.log(0.3)) / 2, rel=1e-6)


# --- MASRouter ------------------------------------------------------------------------------------


def test_masrouter_loss_terms_against_hand_computed_values():
  # Multinomial: n = 2.4 agents, counts (2, 0, 1), probabilities (0.5, 0.3, 0.2).
  lp = mr.multinomial_log_prob(jnp.array([2.4]), jnp.array([[2.0, 0.0, 1.0]]), jnp.array([[0.5, 0.3, 0.2]]))
  expected = math.lgamma(3.4) - (math.lgamma(3) + math.lgamma(1) + math.lgamma(2)) + 2 * math.log(0.5) + math.log(0.2)
  assert float(lp[0]) == pytest.approx(expected, rel=1e-6)
  # Task loss: cross-entropy over already-softmaxed scores (the reference's quirk).
  probs = jnp.array([[0.7, 0.2, 0.1]])
  ce = -(0.7 - math.log(math.exp(0.7) + math.exp(0.2) + math.exp(0.1)))
  assert float(mr.task_loss(probs, jnp.array([0]))) == pytest.approx(ce, rel=1e-6)
  # VAE: MSE + KL to N(0, 0.1^2), by hand on two numbers.
  x, x_hat, mu, log_var = jnp.array([1.0, 2.0]), jnp.array([1.5, 2.0]), jnp.array([0.1, -0.2]), jnp.array([0.0, -1.0])
  mse = (0.25 + 0.0) / 2
  kld = -0.5 * np.mean([1 - math.log(0.01) + lv - (m * m + math.exp(lv)) / 0.01
                        for m, lv in ((0.1, 0.0), (-0.2, -1.0))])
  assert float(mr.vae_loss(x_hat, x, mu, log_var)) == pytest.approx(mse + kld, rel=1e-6)
  # The whole loss: CE + mean(-u log P) + 0.001 VAE.
  out = mr.RouterOut(None, jnp.array([-2.0, -1.0]), jnp.array([[0.7, 0.2, 0.1], [0.7, 0.2, 0.1]]), None,
                     jnp.array(3.0), None, None, None)
  total = mr.router_loss(out, jnp.array([0, 0]), jnp.array([0.5, -1.0]))
  assert float(total) == pytest.approx(ce + (2.0 * 0.5 + 1.0 * -1.0) / 2 + 0.003, rel=1e-6)


def test_masrouter_log_prob_is_the_log_of_its_own_decision_probabilities():
  rng = np.random.default_rng(0)
  x = mr.RouterInputs(*(jnp.asarray(rng.normal(size=(n, 8)), jnp.float32) for n in (3, 3, 6, 4, 5)))
  net = mr.RouterNet(max_agents=6, hidden=6)
  params = mr.init_params(jax.random.key(0), x, net=net)
  out = mr.sample(params, x, jax.random.key(7), net=net)
  c = out.choices
  for b in range(3):
    n = int(c.agents[b])
    assert 1 <= n <= 6
    expected = math.log(float(out.mode_probs[b, c.mode[b]]))
    expected += sum(math.log(float(out.role_probs[b, j, c.roles[b, j]])) for j in range(n))
    counts = np.bincount(np.asarray(c.llms[b, :n]), minlength=5)
    expected += (math.lgamma(float(out.agents_float[b]) + 1) - sum(math.lgamma(k + 1) for k in counts)
                 + sum(k * math.log(float(out.llm_probs[b, l])) for l, k in enumerate(counts)))
    assert float(out.log_prob[b]) == pytest.approx(expected, rel=1e-4, abs=1e-4)
  # The loss pass replays the sampled choices with the same key: the same log-probabilities.
  again = mr.replay(params, x, jax.random.key(7), c, net=net)
  np.testing.assert_allclose(np.asarray(again.log_prob), np.asarray(out.log_prob), rtol=1e-6)
  # Padded role and LLM tables (one compiled program for every benchmark and pool): padding is never
  # chosen and has probability 0.
  padded = x._replace(roles=jnp.concatenate([x.roles, jnp.ones((4, 8))]),
                      llms=jnp.concatenate([x.llms, jnp.ones((3, 8))]), role_mask=jnp.arange(8) < 4,
                      llm_mask=jnp.arange(8) < 5)
  outp = mr.sample(params, padded, jax.random.key(7), net=net)
  assert int(outp.choices.roles.max()) < 4 and int(outp.choices.llms.max()) < 5
  assert float(outp.role_probs[..., 4:].max()) == 0.0 and float(outp.llm_probs[:, 5:].max()) == 0.0


# --- AFlow ----------------------------------------------------------------------------------------


def test_aflow_selection_probabilities_by_hand():
  # Scores 0.5 and 0.7 -> 50 and 70; softmax(0.2 * (s - 70)) = (1, e^-4) / (1 + e^-4); mixed with 0.3 uniform.
  p = aflow_search.mixed_probabilities([0.7, 0.5])
  soft = np.array([1.0, math.exp(-4)]) / (1 + math.exp(-4))
  np.testing.assert_allclose(p, 0.3 / 2 + 0.7 * soft, rtol=1e-12)
  assert p[0] == pytest.approx(0.837410, abs=1e-6) and p[1] == pytest.approx(0.162590, abs=1e-6)


def test_aflow_search_step_modifies_a_selected_parent_once_per_edit_and_records_it():
  evaluated = []

  async def evaluate(workflow):
    evaluated.append(workflow)
    return 0.1 * workflow.samples + 0.05 * workflow.reviews, 0.01

  root = aflow_search.Round(1, Workflow(), None, None, 0.5, 0.0)
  rounds = [root]
  # With one round, the parent is round 1 and the child one of its edits, drawn by the round's own generator.
  child = asyncio.run(aflow_search.search_step(rounds, evaluate, "mmlu_redux", seed=0))
  rng = np.random.default_rng([0, aflow_search._STREAM, 2])  # pylint: disable=protected-access
  assert int(rng.choice(1, p=[1.0])) == 0
  options = edits(Workflow(), "mmlu_redux")
  assert (child.modification, child.workflow) == options[int(rng.integers(len(options)))]
  assert child.round == 2 and child.parent == 1 and evaluated == [child.workflow]
  assert child.score == pytest.approx(0.1 * child.workflow.samples + 0.05 * child.workflow.reviews)
  # Resumable: the same rounds give the same step.
  assert asyncio.run(aflow_search.search_step(rounds, evaluate, "mmlu_redux", seed=0)) == child
  # An edit tried from a parent is never tried again from it; once all are tried, nothing is left.
  rounds = [root]
  while (nxt := asyncio.run(aflow_search.search_step(rounds, evaluate, "mmlu_redux", seed=0))) is not None:
    rounds.append(nxt)
  from_root = [r.modification for r in rounds if r.parent == 1]
  assert len(from_root) == len(set(from_root))
  assert len({r.workflow.key for r in rounds}) == len(rounds)
  assert aflow_search.best_round(rounds).score == max(r.score for r in rounds)


def test_aflow_operators_only_where_the_benchmark_supports_them():
  labels = {label for label, _ in edits(Workflow(), "math")}
  assert "+ Programmer" in labels and "+ Test" not in labels
  assert "+ Test" in {label for label, _ in edits(Workflow(), "humaneval_plus")}
  # AFlow's run script offers no Review/Revise on these benchmarks; the option brings them back.
  for b in ("math", "humaneval_plus", "mmlu_redux"):
    assert not any("Review" in label for label, _ in edits(Workflow(), b))
    assert "+ Review/Revise" in {label for label, _ in edits(Workflow(), b, review_revise=True)}
  # The initial workflow is one Custom call with an empty instruction: the prompt is the question alone.
  assert Workflow().instruction == "empty" and INSTRUCTIONS["empty"] == ""
  with pytest.raises(ValueError, match="Programmer operator is for MATH"):
    Workflow(programmer=True).check("mmlu_redux")


def test_aflow_test_operator_runs_public_examples_in_the_sandbox():
  from hieramas_jax.benchmarks.humaneval import assemble_program
  from hieramas_jax.methods.aflow import execute
  item = items_by_id("humaneval_plus")["HumanEval/0"]
  examples = execute.public_examples(item)
  assert examples and all(call.startswith("has_close_elements(") for call, _ in examples)
  good = asyncio.run(execute.run_examples(item, assemble_program(item, item.answer)))
  wrong = asyncio.run(execute.run_examples(item, assemble_program(item, "    return True\n")))
  assert good == (True, "") and wrong[0] is False and "should be" in wrong[1]
  assert asyncio.run(execute.run_solve("def solve():\n    return 6 * 7\n")) == (True, "42")
  assert asyncio.run(execute.run_solve("def solve():\n    return 1 / 0\n"))[0] is False


# --- Multi-round agents, Full-Graph, Random-Graph -------------------------------------------------


def test_rounds_show_spatial_and_previous_round_outputs_and_the_decision_reads_everyone():
  client = FakeClient(lambda model, messages, s: f"{model} says The answer is (A)")
  agents = (RoundAgent("Knowlegable Expert", "qwen3-8b"), RoundAgent("Critic", "llama-8b", reflect=True))
  spatial = np.array([[False, True], [False, False]])
  temporal = temporal_from_spatial(spatial)
  # 1 is spatially reachable from 0, so 1's previous output is not shown to 0 (the reference's cycle check);
  # 0's previous output is shown to 1.
  assert temporal.tolist() == [[False, True], [False, False]]
  config = RoundsConfig(agents, (spatial, spatial), (np.zeros((2, 2), bool), temporal), "gpt-5-mini")
  trace = asyncio.run(run_rounds(client, MMLU, config))
  assert len(trace.calls) == config.calls_per_query() == 2 * 3 + 1
  by_position = {(c.node, c.position): c for c in trace.calls}
  second = [c for c in client.calls if c["model"] == "llama-8b" and "At the same time" in c["messages"][1]["content"]]
  assert second, "the Critic reads the expert's round output"
  assert not any("In the last round of dialogue" in c["messages"][1]["content"] for c in client.calls
                 if c["model"] == "qwen3-8b")
  round1_critic = next(c for c in client.calls if c["model"] == "llama-8b"
                       and "In the last round of dialogue" in c["messages"][1]["content"])
  assert "Agent 1, role is Knowlegable Expert" in round1_critic["messages"][1]["content"].split("In the last round")[1]
  assert by_position[(-1, "decision")].model == "gpt-5-mini"
  decision = client.calls[-1]["messages"][1]["content"]
  assert "Agent 1, role is Knowlegable Expert" in decision and "Agent 2, role is Critic" in decision
  assert any(c.position == "round1:reflect" for c in trace.calls)


def test_full_graph_and_random_graph_use_every_role_with_the_strong_model():
  client = FakeClient()
  ctx = RunContext(client, get_pool("qwen3-80b"), seed=3)
  full = asyncio.run(make_method("full_graph").solve(ctx, MMLU))
  # The reference's baselines: one agent per role (no proposers), the backbone everywhere, then the decision.
  assert len(full.calls) == 8 + 1 and {c.model for c in full.calls} == {"qwen3-80b"}
  assert {c.position for c in full.calls} == {"solo", "decision"}
  assert len(full.extra["config"]["edges"]) == 8 * 7 // 2
  random_graph = make_method("random_graph")
  a = random_graph.graph_for(3, MMLU, 8)
  assert np.array_equal(a, random_graph.graph_for(3, MMLU, 8))
  assert not np.array_equal(a, random_graph.graph_for(4, MMLU, 8))
  other = next(it for it in load_items("mmlu_redux") if it.id != MMLU.id)
  assert np.array_equal(a, random_graph.graph_for(3, other, 8))  # one graph for the whole test split
  per_query = make_method("random_graph", per_query=True)
  assert not np.array_equal(per_query.graph_for(3, MMLU, 8), per_query.graph_for(3, other, 8))
  trace = asyncio.run(random_graph.solve(ctx, MMLU))
  assert len(trace.calls) == 8 + 1 and 0.25 <= trace.extra["graph_density"] <= 0.75
  supernodes = asyncio.run(make_method("full_graph", num_proposers=2).solve(ctx, MMLU))
  assert len(supernodes.calls) == 8 * 3 + 1  # the earlier variant: 8 supernodes of 2 proposers + synthesizer


def test_the_encoder_lock_serves_waiters_in_arrival_order():
  import threading
  import time
  from hieramas_jax.methods.common import FairLock
  lock, order = FairLock(), []
  lock.acquire()

  def wait_then_record(name):
    with lock:
      order.append(name)

  threads = []
  for name in ("first", "second"):
    threads.append(threading.Thread(target=wait_then_record, args=(name,)))
    threads[-1].start()
    while len(lock._waiters) < len(threads):  # pylint: disable=protected-access
      time.sleep(0.001)
  lock.release()
  wait_then_record("holder again")  # a releasing thread that re-acquires queues behind the waiters
  for t in threads:
    t.join()
  assert order == ["first", "second", "holder again"]


def test_masrouter_samples_its_agents_at_the_public_codes_temperature():
  client = FakeClient()
  ctx = RunContext(client, get_pool("gpt-5-mini"), seed=0)
  router = make_method("masrouter", benchmark="mmlu_redux", pool="gpt-5-mini", seed=0)
  router.params = router._fresh_state()["params"]  # pylint: disable=protected-access
  trace = asyncio.run(router.solve(ctx, MMLU))
  assert trace.calls and {c["temperature"] for c in client.calls} == {1.0}
  client = FakeClient()
  cooler = make_method("masrouter", benchmark="mmlu_redux", pool="gpt-5-mini", seed=0, temperature=0.2)
  cooler.params = router.params
  asyncio.run(cooler.solve(RunContext(client, get_pool("gpt-5-mini"), seed=0), MMLU))
  assert {c["temperature"] for c in client.calls} == {0.2}


def _coding_chain(wrong: str, right: str, agents: tuple):
  """A Project Manager -> Programming Expert -> Test Analyst chain whose PM writes `wrong` code and whose
  Expert writes `right` code (everyone else: no code): the fake answer function and the rounds config."""
  def answer(model, messages, s):
    system = messages[0]["content"]
    return wrong if "Project Manager" in system else right if "Programming Expert" in system else "no code here"
  spatial = np.array([[0, 1, 0], [0, 0, 1], [0, 0, 0]], bool)
  return answer, RoundsConfig(agents, (spatial,), (np.zeros((3, 3), bool),), "gpt-5-mini")


def test_gdesigner_humaneval_tools_run_code_on_the_docstring_examples_and_tell_the_readers():
  from hieramas_jax.methods.code_tools import docstring_check
  item = items_by_id("humaneval_plus")["HumanEval/0"]
  wrong = "```python\ndef has_close_elements(numbers, threshold):\n    return True\n```"
  right = "```python\n" + item.question + item.answer + "\n```"

  answer, config = _coding_chain(
      wrong, right, tuple(RoundAgent(r, "gpt-5-mini") for r in ("Project Manager", "Programming Expert", "Test Analyst")))
  client = FakeClient(answer)
  trace = asyncio.run(run_rounds(client, item, config, code_check=docstring_check(item)))
  # PM's failing code reaches the Programming Expert with its result; the Test Analyst reads passing code
  # and returns it without a call (the reference's shortcut); the decision sees both results.
  expert = next(c for c in client.calls if "Programming Expert" in c["messages"][0]["content"])
  assert "Whether it passes internal testing? False." in expert["messages"][1]["content"]
  assert "should be" in expert["messages"][1]["content"]
  assert len(client.calls) == 3 and trace.node_texts[2] == right and trace.extra["code_shortcuts"] == [
      {"round": 0, "node": 2}]
  decision = client.calls[-1]["messages"]
  assert "passed internal testing" in decision[0]["content"]
  assert "Whether it passes internal testing? True." in decision[1]["content"]
  assert "Whether it passes internal testing? False." in decision[1]["content"]
  # Without the tools nothing runs, every agent calls, and the decision prompt does not speak of tests.
  plain = FakeClient(answer)
  asyncio.run(run_rounds(plain, item, config))
  assert len(plain.calls) == 4 and "internal testing" not in "".join(
      m["content"] for c in plain.calls for m in c["messages"])
  # Only HumanEval+ items with docstring examples get a check; text that is not one code block is not run.
  assert docstring_check(MMLU) is None
  assert asyncio.run(docstring_check(item)("no code here")) is None
  assert asyncio.run(docstring_check(item)(right)) == (True, "")


def test_masrouter_inner_test_passes_code_that_passes_the_examples_on_without_a_call():
  """MASRouter's HumanEval tools (`MAR/Agent/agent.py`, `MAR/Prompts/message_aggregation.py`,
  `post_process.py`): an agent's spatial inputs, then temporal ones, are run on the docstring examples; the
  first whose ```python``` span passes is the agent's output, no call and no reflection; otherwise code in
  an input is followed by "The code is (not) solved." and the feedback, and a Programming Expert's own code
  output gets that note."""
  from hieramas_jax.mas.rounds import InnerTest
  from hieramas_jax.methods.code_tools import docstring_check
  from hieramas_jax.methods.masrouter.method import NOTE_ROLES
  item = items_by_id("humaneval_plus")["HumanEval/0"]
  wrong = "My plan:\n```python\ndef has_close_elements(numbers, threshold):\n    return True\n```\nDone."
  right = "Here it is:\n```python\n" + item.question + item.answer + "\n```\nThat passes."

  answer, config = _coding_chain(wrong, right, (
      RoundAgent("Project Manager", "gpt-5-mini"), RoundAgent("Programming Expert", "gpt-5-mini"),
      RoundAgent("Test Analyst", "gpt-5-mini", reflect=True)))
  client = FakeClient(answer)
  check = docstring_check(item, detect="contains")
  trace = asyncio.run(run_rounds(client, item, config, inner_test=InnerTest(check, NOTE_ROLES)))
  # The expert reads the failing code with its note and calls; its own passing code gets the post-process
  # note; the Test Analyst reads it (prose around the block) and returns it: no call, no reflection.
  expert = client.calls[1]["messages"][1]["content"]
  assert "The code is not solved.\nhas_close_elements(" in expert and "should be" in expert
  noted = right + "\n\nThe code is solved.\nevery docstring example passed"
  assert len(client.calls) == 3 and trace.node_texts == {0: wrong, 1: noted, 2: noted}
  assert trace.extra["code_shortcuts"] == [{"round": 0, "node": 2}]
  assert sorted(t["passed"] for t in trace.extra["code_tests"]) == [False, True, True]
  assert "internal testing" not in "".join(m["content"] for c in client.calls for m in c["messages"])
  # GDesigner's detection needs the whole output to be one block: the same text is not code for it.
  assert asyncio.run(docstring_check(item)(right)) is None
  assert asyncio.run(check(right)) == (True, "") and asyncio.run(check("no code here")) is None
  with pytest.raises(ValueError):
    asyncio.run(run_rounds(client, item, config, code_check=check, inner_test=InnerTest(check)))
  with pytest.raises(ValueError):
    docstring_check(item, detect="anywhere")
  # MASRouter turns it on for HumanEval+ only (no examples elsewhere); the option turns it off.
  router = make_method("masrouter", benchmark="humaneval_plus", pool="gpt-5-mini", seed=0)
  assert router._inner_test(item) is not None and router.describe()["inner_test"] is True  # pylint: disable=protected-access
  off = make_method("masrouter", benchmark="humaneval_plus", pool="gpt-5-mini", seed=0, inner_test=False)
  assert off._inner_test(item) is None  # pylint: disable=protected-access
  mmlu = make_method("masrouter", benchmark="mmlu_redux", pool="gpt-5-mini", seed=0)
  assert mmlu._inner_test(MMLU) is None and "inner_test" not in mmlu.describe()  # pylint: disable=protected-access


def test_masrouter_mode_instructions_are_the_public_codes_word_for_word():
  from hieramas_jax.mas.rounds import REFLECT_SYSTEM, agent_messages
  from hieramas_jax.methods.masrouter.method import MODES
  expected = {  # MAR/Prompts/reasoning.py, reasoning_prompt
      "IO": "", "CoT": "Please give step by step answers to the questions.", "Chain": "", "FullConnected": "",
      "Debate": "Please try your best to give answers that are different or opposite to those of other agents.",
      "Reflection": ""}
  router = make_method("masrouter", benchmark="mmlu_redux", pool="gpt-5-mini", seed=0)
  for m, (name, _) in enumerate(MODES):
    choices = mr.Choices(*(jnp.asarray([v]) for v in (m, 2)), jnp.zeros((1, 6), jnp.int32),
                         jnp.zeros((1, 6), jnp.int32))
    mode, config = router.system(choices, 0)
    assert mode == name and config.reasoning == expected[name] and not config.cot
    system, user = (msg["content"] for msg in agent_messages(MMLU, config.agents[0], [], [], cot=config.cot,
                                                              reasoning=config.reasoning))
    assert system == "\n".join(filter(None, [system.split("\n")[0], expected[name]]))
    assert "Let's think step by step." not in user
  assert dict(MODES)["Debate"].startswith("In multi-agent debate reasoning, multiple agents engage in a structured")
  assert REFLECT_SYSTEM.endswith("no errors in your previous answers that will affect the results, there is no "
                                 "need to correct them.")


def test_docstring_example_results_are_cached_and_a_tampered_entry_is_rerun(tmp_path, monkeypatch):
  from hieramas_jax.benchmarks import sandbox
  from hieramas_jax.benchmarks.humaneval import assemble_program
  from hieramas_jax.methods.aflow import execute
  monkeypatch.setattr(execute, "cache_dir", lambda: tmp_path)
  item = items_by_id("humaneval_plus")["HumanEval/0"]
  program = assemble_program(item, "    return True\n")
  first = asyncio.run(execute.run_examples(item, program))
  path = execute._examples_cache_path(item, program, sandbox.isolation().mode)  # pylint: disable=protected-access
  assert first[0] is False and path.exists()
  runs = []
  real = execute._run_examples  # pylint: disable=protected-access
  monkeypatch.setattr(execute, "_run_examples", lambda *a: runs.append(a) or real(*a))
  assert asyncio.run(execute.run_examples(item, program)) == first and not runs  # replayed
  path.write_text(path.read_text().replace('"passed": false', '"passed": true'))
  assert asyncio.run(execute.run_examples(item, program)) == first and len(runs) == 1  # tampered: rerun
