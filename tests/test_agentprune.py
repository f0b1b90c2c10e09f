"""AgentPrune: its pruning rule, edge parameterisation and loss against hand computations (and against the
public code's `update_masks` run in torch), spatial against temporal edges, and a tiny fit + solve on the
simulated pool over real HTTP."""

from __future__ import annotations

import asyncio

import jax
import jax.numpy as jnp
import numpy as np
import optax
import pytest

from hieramas_jax.benchmarks import graders
from hieramas_jax.benchmarks.data import load_items
from hieramas_jax.llm.client import LLMClient
from hieramas_jax.llm.endpoint import sim_endpoint
from hieramas_jax.llm.registry import get_pool
from hieramas_jax.mas.rounds import run_rounds
from hieramas_jax.methods.agentprune import model as ap
from hieramas_jax.methods.api import RunContext
from hieramas_jax.methods.registry import make_method
from mas_fakes import FakeClient


# --- the pruning rule ------------------------------------------------------------------------------


def test_pruning_removes_the_lowest_logit_unmasked_edges_and_never_restores_one():
  # 3 agents, spatial mask without the diagonal (6 edges); the masked diagonal holds the lowest logits and
  # (1, 0) the highest: a masked pair's logit never matters.
  logits = np.array([[-9.0, 0.3, -0.2],
                     [9.0, -9.0, 0.1],
                     [-0.5, 0.2, -9.0]], np.float32)
  mask = ~np.eye(3, dtype=bool)
  # round(6 x 0.25) = round(1.5) = 2 (half to even, as torch.round): (2, 0) at -0.5 and (0, 2) at -0.2 go.
  first = ap.prune_mask(logits, mask, 0.25)
  assert first.tolist() == [[False, True, False], [True, False, True], [False, True, False]]
  # 4 left: round(1.0) = 1, the lowest remaining, (1, 2) at 0.1; pruned pairs stay pruned even if their
  # logit has grown since.
  logits[2, 0] = 5.0
  second = ap.prune_mask(logits, first, 0.25)
  assert second.tolist() == [[False, True, False], [True, False, False], [False, True, False]]
  # round(3 x 0.25) = round(0.75) = 1; a rate that rounds to 0 still prunes one edge.
  assert ap.prune_count(3, 0.25) == 1 and ap.prune_count(1, 0.1) == 1
  assert ap.prune_count(10, 0.25) == 2 and ap.prune_count(14, 0.25) == 4 and ap.prune_count(18, 0.25) == 4
  # Ties (untrained temporal logits, every pair 0) go in flat i-major order.
  assert ap.prune_mask(np.zeros((2, 2)), np.ones((2, 2), bool), 0.5).tolist() == [[False, False], [True, True]]


def _reference_update_masks(logits, masks, pruning_rate):
  """The public `Graph.update_masks` body (AgentPrune/graph/graph.py l. 319-327) for one edge set, in torch."""
  import torch  # pylint: disable=import-outside-toplevel
  spatial_logits = torch.tensor(np.asarray(logits, np.float32).ravel())
  spatial_masks = torch.tensor(np.asarray(masks, np.int64).ravel())
  num_edges = (spatial_masks > 0).sum()
  num_masks = (spatial_masks == 0).sum()
  prune_num_edges = torch.round(num_edges*pruning_rate) if torch.round(num_edges*pruning_rate)>0 else 1
  _edge_logits = spatial_logits.clone()
  min_edge_logit = _edge_logits.min()
  _edge_logits[spatial_masks == 0] = min_edge_logit - 1.0
  sorted_edges_idx = torch.argsort(_edge_logits)
  prune_idx = sorted_edges_idx[:int(prune_num_edges + num_masks)]
  spatial_masks[prune_idx] = 0
  return spatial_masks.numpy().reshape(np.shape(masks)) > 0


def test_pruning_matches_the_public_update_masks_on_random_logits():
  pytest.importorskip("torch")
  rng = np.random.default_rng(0)
  for n, rate in [(3, 0.25), (5, 0.25), (5, 0.5), (8, 0.1)]:
    mask = ~np.eye(n, dtype=bool)
    for _ in range(4):  # repeated pruning, distinct logits (no ties: torch's argsort is not stable)
      logits = rng.normal(size=(n, n)).astype(np.float32)
      ours = ap.prune_mask(logits, mask, rate)
      assert (ours == _reference_update_masks(logits, mask, rate)).all()
      mask = ours


# --- parameterisation and loss ---------------------------------------------------------------------


def test_edges_start_at_probability_one_half_and_reinforce_moves_chosen_edges_up_only_when_solved():
  params = ap.init_params(2)
  assert float(params["spatial"][0, 1]) == 0.0 and ap.init_logit(0.8) == pytest.approx(np.log(4.0))
  # One query, one round, 2 agents: pair (0, 1) drawn and kept; (1, 0) then closes a cycle, not drawn.
  z = np.zeros((1, 1, 2, 2), bool)
  cons, chosen = z.copy(), z.copy()
  cons[0, 0, 0, 1] = chosen[0, 0, 0, 1] = True
  draws = ap.Draws(jnp.asarray(cons), jnp.asarray(chosen), jnp.asarray(z), jnp.asarray(z))
  # log P = log sigmoid(0) = log 0.5; loss = -u log P; d loss / d logit_01 = -u (1 - p) = -0.5 u.
  for u, want in ((1.0, -0.5), (0.0, 0.0)):
    loss, grads = jax.value_and_grad(ap.loss_fn)(params, draws, jnp.asarray([u]))
    assert float(loss) == pytest.approx(u * np.log(2.0), abs=1e-6)
    assert float(grads["spatial"][0, 1]) == pytest.approx(want, abs=1e-6)
    assert float(jnp.abs(grads["spatial"]).sum() - abs(want)) == pytest.approx(0.0, abs=1e-6)
    assert float(jnp.abs(grads["temporal"]).sum()) == 0.0
  # A drawn but dropped pair: d/dl [-log(1 - p)] = p = 0.5 (pushed down when solved).
  dropped = ap.Draws(jnp.asarray(cons), jnp.asarray(z), jnp.asarray(z), jnp.asarray(z))
  assert float(jax.grad(ap.loss_fn)(params, dropped, jnp.asarray([1.0]))["spatial"][0, 1]) == pytest.approx(0.5)
  # Adam's first step moves a logit by lr against its gradient's sign: the kept edge of a solved query up.
  state = {"params": params, "opt_state": optax.adam(0.1).init(params), "step": jnp.int32(0)}
  new, _ = ap.train_step(state, draws, jnp.asarray([1.0]), lr=0.1)
  assert float(new["params"]["spatial"][0, 1]) == pytest.approx(0.1, abs=1e-6)
  assert float(new["params"]["spatial"][1, 0]) == 0.0 and int(new["step"]) == 1


def test_temporal_draws_count_in_the_loss_and_the_batch_mean_weights_each_query():
  params = ap.init_params(2)
  params["temporal"] = jnp.full((2, 2), np.log(3.0), jnp.float32)  # p = 0.75
  z = np.zeros((2, 2, 2, 2), bool)
  t_cons, t_chosen = z.copy(), z.copy()
  t_cons[:, 1] = True  # round 1: every temporal pair drawn, for both queries
  t_chosen[0, 1, 1, 1] = True  # query 0 kept 1 -> 1 (a self pair)
  draws = ap.Draws(jnp.asarray(z), jnp.asarray(z), jnp.asarray(t_cons), jnp.asarray(t_chosen))
  # query 0: log 0.75 + 3 log 0.25; query 1 (u = 0) contributes nothing; mean over the batch of 2.
  want = -(np.log(0.75) + 3 * np.log(0.25)) / 2
  assert float(ap.loss_fn(params, draws, jnp.asarray([1.0, 0.0]))) == pytest.approx(want, rel=1e-5)


# --- spatial against temporal edges ----------------------------------------------------------------


def test_spatial_edges_form_a_masked_dag_and_temporal_edges_are_masked_pairs_of_later_rounds_only():
  n = 4
  sure = {"spatial": np.full((n, n), 30.0), "temporal": np.full((n, n), 30.0)}  # p ~ 1
  masks = ap.initial_masks(n)
  assert masks["spatial"].sum() == 12 and masks["temporal"].sum() == 16  # FullConnected: self pairs temporal only
  masks["spatial"][0, 3] = False
  masks["temporal"][2, 2] = False
  spatial, temporal, draws = ap.sample_rounds(sure, masks, 3, np.random.default_rng(0))
  for s in spatial:
    # i-major order with every drawn edge kept: the forward pairs, less the masked (0, 3); back pairs close
    # cycles and are never drawn.
    assert s.tolist() == (np.triu(np.ones((n, n), bool), 1) & masks["spatial"]).tolist()
  assert not temporal[0].any() and not draws.temporal_considered[0].any()  # round 0: no previous round
  for t in temporal[1:]:
    assert t.tolist() == masks["temporal"].tolist()  # no cycle check: back pairs and self pairs too
  assert (draws.spatial_considered[:, 0, 3] == 0).all() and (draws.spatial_chosen <= draws.spatial_considered).all()


def test_a_temporal_self_edge_shows_an_agent_its_own_previous_answer():
  item = load_items("math")[0]
  roles = ("Math Solver", "Mathematical Analyst", "Inspector")
  method = make_method("agentprune", benchmark="math", pool="gpt-5-mini", iterations=0, rounds=2)
  method._set(method._fresh_state())  # pylint: disable=protected-access
  spatial = [np.zeros((3, 3), bool)] * 2
  temporal = [np.zeros((3, 3), bool), np.eye(3, dtype=bool) & np.array([[1], [0], [0]], bool)]  # 0 -> 0 only
  config = method._rounds_config(spatial, temporal, "gpt-5-mini")  # pylint: disable=protected-access
  client = FakeClient(lambda m, msgs, s: f"answer of {msgs[0]['content'][:30]}")
  asyncio.run(run_rounds(client, item, config))
  round1 = [c for c in client.calls if "In the last round" in c["messages"][1]["content"]]
  assert len(client.calls) == 7 and len(round1) == 1 and roles[0] in round1[0]["messages"][0]["content"]
  assert "Agent 1, role is Math Solver" in round1[0]["messages"][1]["content"]


def test_the_reference_agents_answer_at_the_api_default_temperature():
  # run_mmlu.py: 5 AnalyzeAgents, the mmlu prompt set's first 5 roles, 1 round; calls at the API's default
  # temperature (the public `achat` sends none).
  method = make_method("agentprune", benchmark="mmlu_redux", pool="qwen3-80b", iterations=0)
  assert method.roles == ("Knowlegable Expert", "Critic", "Mathematician", "Psychologist", "Historian")
  client = FakeClient()
  trace = asyncio.run(method.solve(RunContext(client, get_pool("qwen3-80b")), load_items("mmlu_redux")[0]))
  assert len(client.calls) == 5 + 1 and {c["temperature"] for c in client.calls} == {1.0}
  assert {c["model"] for c in client.calls} == {"qwen3-80b"} and trace.extra["temporal_edges_per_round"] == [0]
  assert make_method("agentprune", benchmark="humaneval_plus", pool="qwen3-80b").describe()["rounds"] == 2


# --- end to end on the simulated pool --------------------------------------------------------------


def test_a_tiny_fit_prunes_on_schedule_and_the_fitted_graph_solves_and_reloads(session_sim, tmp_path):
  items = load_items("math")
  train, test = items[:4], items[-2:]
  options = dict(benchmark="math", pool="gpt-5-mini", seed=0, iterations=2, batch_size=2, imp_per_iterations=1,
                 rounds=2)

  async def go():
    endpoint = sim_endpoint(session_sim.base_url)
    async with LLMClient(endpoint) as client:
      ctx = RunContext(client, get_pool("gpt-5-mini"), seed=0, state_dir=tmp_path / "state")
      method = make_method("agentprune", **options)
      summary = await method.fit(train, [], ctx)
      traces = [await method.solve(ctx, it) for it in test]
      grades = [(await graders.grade_async(it, t.final_text)).correct for it, t in zip(test, traces)]
      again = make_method("agentprune", **options)
      again.load(tmp_path / "state")
      return summary, traces, grades, method, again

  summary, traces, grades, method, again = asyncio.run(go())
  # 3 agents: spatial 6 edges -> round(1.5) = 2 pruned -> 4 -> round(1.0) = 1 -> 3; temporal 9 -> 7 -> 5.
  assert [h["agentprune/spatial_edges"] for h in summary["history"]] == [4.0, 3.0]
  assert [h["agentprune/temporal_edges"] for h in summary["history"]] == [7.0, 5.0]
  assert np.asarray(summary["spatial_mask"]).sum() == 3 and np.diag(summary["spatial_mask"]).sum() == 0
  # Recorded for the learning evidence: the trained edge probabilities (3 x 3) and the initial one (0.5).
  assert np.asarray(summary["edge_probability"]["spatial"]).shape == (3, 3)
  assert summary["initial_probability"] == {"spatial": 0.5, "temporal": 0.5}
  for t in traces:
    assert len(t.calls) == 2 * 3 + 1 and t.extra["unmasked_edges"] == {"spatial": 3, "temporal": 5}
    assert t.extra["temporal_edges_per_round"][0] == 0
  assert all(isinstance(g, bool) for g in grades)
  assert all((again.masks[k] == method.masks[k]).all() and np.allclose(again.params[k], method.params[k])
             for k in ("spatial", "temporal"))
