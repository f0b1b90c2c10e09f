"""MaAS's distinctive parts against hand computations: the controller's probabilities, the threshold sampling
and layer-0 rules, the cost-aware REINFORCE loss and its gradient sign, the supernet's execution (and the
public code's CoT-template crash), and one tiny fit + solve on the simulated pool over real HTTP."""

from __future__ import annotations

import asyncio
import math

import jax
import jax.numpy as jnp
import numpy as np
import pytest

from hieramas_jax.benchmarks.data import load_items
from hieramas_jax.llm.registry import get_pool
from hieramas_jax.mas.runtime import RunSettings
from hieramas_jax.methods.api import RunContext
from hieramas_jax.methods.maas import controller as C
from hieramas_jax.methods.maas import supernet
from hieramas_jax.methods.registry import METHODS, make_method
from mas_fakes import FakeClient

MATH_OPS = supernet.OPERATORS["math"]  # Generate, GenerateCoT, MultiGenerateCoT, ScEnsemble, Programmer, SelfRefine,
#                                        EarlyStop


class ScriptedRng:
  """Stands in for np.random.Generator in `sample_operators`: returns scripted positions, records each p."""

  def __init__(self, picks):
    self.picks, self.seen = list(picks), []

  def choice(self, n, p):
    self.seen.append(np.asarray(p, np.float64))
    assert len(p) == n
    return self.picks.pop(0)


def _softmax(x):
  e = np.exp(x - x.max(-1, keepdims=True))
  return e / e.sum(-1, keepdims=True)


def _unit(x):
  return x / np.maximum(np.linalg.norm(x, axis=-1, keepdims=True), 1e-12)


# --- sampling ---------------------------------------------------------------------------------------


def test_sample_operators_draws_without_replacement_until_the_mass_reaches_the_threshold():
  probs = np.array([0.1, 0.15, 0.25, 0.5])
  rng = ScriptedRng([0, 0, 1])  # positions among the remaining operators
  # Draw 0 (mass 0.1 < 0.3), then 1 (0.25 < 0.3), then 3 (0.75 >= 0.3): stop.
  assert C.sample_operators(probs, rng, 0.3) == [0, 1, 3]
  np.testing.assert_allclose(rng.seen[0], probs)
  np.testing.assert_allclose(rng.seen[1], np.array([0.15, 0.25, 0.5]) / 0.9)  # torch.multinomial renormalises
  np.testing.assert_allclose(rng.seen[2], np.array([0.25, 0.5]) / 0.75)
  # One operator holding >= 0.3 alone ends the layer at once.
  assert C.sample_operators(probs, ScriptedRng([3]), 0.3) == [3]


def test_layer_sizes_have_the_hand_computed_frequencies():
  # probs (0.4, 0.3, 0.2, 0.1), threshold 0.35. One operator iff the first draw is 0: P1 = 0.4. Two: first 1
  # (0.3) then anything (>= 0.4); first 2 (0.2) then 0 or 1 (p 0.7 / 0.8; 3 gives 0.3 < 0.35); first 3
  # (0.1) then 0 or 1 (p 0.7 / 0.9). Three: the rest.
  probs = np.array([0.4, 0.3, 0.2, 0.1])
  rng = np.random.default_rng(0)
  sizes = np.array([len(C.sample_operators(probs, rng, 0.35)) for _ in range(20000)])
  p_two = 0.3 + 0.2 * 0.7 / 0.8 + 0.1 * 0.7 / 0.9
  np.testing.assert_allclose([(sizes == n).mean() for n in (1, 2, 3)], [0.4, p_two, 0.6 - p_two], atol=0.015)


def _peaked(index, k=7):
  p = np.zeros(k)
  p[index] = 1.0
  return p


def test_layer0_rules_and_early_exit():
  k = len(MATH_OPS)
  later = np.tile(_peaked(MATH_OPS.index("SelfRefine")), (3, k, 1))
  # EarlyStop in layer 0: replaced by [Generate], penalty, and the architecture ends there.
  arch = C.sample_architecture(_peaked(6), later, MATH_OPS, np.random.default_rng(0))
  assert arch.names(MATH_OPS) == [["Generate"]] and arch.early_stop_at_0
  # No generate-type operator: [Generate], no penalty; later layers run (here SelfRefine until the last).
  arch = C.sample_architecture(_peaked(MATH_OPS.index("ScEnsemble")), later, MATH_OPS, np.random.default_rng(0))
  assert arch.names(MATH_OPS) == [["Generate"], ["SelfRefine"], ["SelfRefine"], ["SelfRefine"]]
  assert not arch.early_stop_at_0
  # ScEnsemble drawn first, then GenerateCoT: the generate-type operator moves to the front, so it is the
  # "previous operator" that conditions layer 1; layer 1 (row GenerateCoT) draws EarlyStop and ends it.
  first = np.zeros(k)
  first[MATH_OPS.index("ScEnsemble")], first[MATH_OPS.index("GenerateCoT")] = 0.2, 0.15
  later = np.tile(_peaked(MATH_OPS.index("SelfRefine")), (3, k, 1))
  later[0, MATH_OPS.index("GenerateCoT")] = _peaked(6)
  # Positions among the operators of nonzero probability: ScEnsemble (2nd of {GenerateCoT, ScEnsemble}), then
  # GenerateCoT (the only one left), then layer 1's EarlyStop.
  rng = ScriptedRng([1, 0, 0])
  rng.choice = _nonzero(rng.choice)
  arch = C.sample_architecture(first, later, MATH_OPS, rng)
  assert arch.names(MATH_OPS) == [["GenerateCoT", "ScEnsemble"], ["EarlyStop"]] and not arch.early_stop_at_0


def _nonzero(choice):
  """Scripted positions counted among the remaining operators with nonzero probability."""
  def pick(n, p):
    pos = choice(n, p)
    return int(np.flatnonzero(np.asarray(p) > 0)[pos])
  return pick


# --- controller, loss, gradient ---------------------------------------------------------------------------


def _tiny():
  rng = np.random.default_rng(0)
  op_emb = rng.normal(size=(len(MATH_OPS), 6)).astype(np.float32)
  query = rng.normal(size=(2, 6)).astype(np.float32)
  net = C.Controller(hidden=5)
  params = C.init_params(jax.random.key(3), net, op_emb)
  return net, params, op_emb, query


def test_controller_probabilities_match_a_hand_written_operator_selector():
  net, params, op_emb, query = _tiny()
  first, later = C.all_log_probs(params, jnp.asarray(query), jnp.asarray(op_emb), net=net)
  p = jax.tree_util.tree_map(np.asarray, params)
  dense = lambda x, d: x @ d["kernel"] + d["bias"]
  u0 = _unit(dense(query, p["layers_0"]["query_encoder"]))
  v0 = _unit(dense(op_emb, p["layers_0"]["operator_encoder"]))
  np.testing.assert_allclose(np.exp(first), _softmax(u0 @ v0.T), rtol=1e-5, atol=1e-6)
  prev = 4  # layer 2 after Programmer: [e_k ; e_prev] (the candidate first, as torch.cat does)
  u2 = _unit(dense(query, p["layers_2"]["query_encoder"]))
  v2 = _unit(dense(np.concatenate([op_emb, np.repeat(op_emb[prev:prev + 1], len(op_emb), 0)], 1),
                   p["layers_2"]["operator_encoder"]))
  np.testing.assert_allclose(np.exp(later[:, 1, prev]), _softmax(u2 @ v2.T), rtol=1e-5, atol=1e-6)
  # torch.nn.Linear's init: every weight and bias within 1/sqrt(fan_in).
  assert np.abs(p["layers_1"]["operator_encoder"]["kernel"]).max() <= 1 / math.sqrt(12)
  assert np.abs(p["layers_0"]["query_encoder"]["bias"]).max() <= 1 / math.sqrt(6)


def test_cost_aware_loss_by_hand():
  net, params, op_emb, query = _tiny()
  first, later = C.all_log_probs(params, jnp.asarray(query), jnp.asarray(op_emb), net=net)
  lf, ll = np.asarray(first, np.float64), np.asarray(later, np.float64)
  a = C.Architecture(((0, 3), (5,)), False)    # [Generate, ScEnsemble] -> [SelfRefine]
  b = C.Architecture(((0,),), True)            # EarlyStop drawn in layer 0
  batch = {k: jnp.asarray(v) for k, v in C.encode([a, b], 4, len(MATH_OPS), pad_to=3).items()}
  lp_a = lf[0, 0] + lf[0, 3] + ll[0, 0, 0, 5]  # layer 1's row: the previous layer's first operator (0)
  lp_b = lf[1, 0] - 1.5
  lp = np.asarray(C.architecture_log_prob(first[:2], later[:2], batch["prev"][:2], batch["mask"][:2],
                                          batch["penalty"][:2]))
  np.testing.assert_allclose(lp, [lp_a, lp_b], rtol=1e-5)
  # utility = score - 3 x cost: solved at $0.01 -> 0.97; failed at $0.002 -> -0.006.
  util = C.utility(jnp.array([1.0, 0.0, 0.0]), jnp.array([0.01, 0.002, 0.0]))
  np.testing.assert_allclose(np.asarray(util), [0.97, -0.006, 0.0], rtol=1e-6)
  pad = lambda x: jnp.concatenate([x, x[:1]])  # a third, padded row (weight 0) leaves the mean over 2
  loss = C.reinforce_loss(pad(first), pad(later), batch, util)
  assert float(loss) == pytest.approx(-(lp_a * 0.97 + lp_b * -0.006) / 2, rel=1e-5)


def test_gradient_sign_follows_the_utility_and_the_penalty_carries_no_gradient():
  net, params, op_emb, query = _tiny()
  q, e = jnp.asarray(query[:1]), jnp.asarray(op_emb)
  arch = C.Architecture(((3,), (5,)), False)
  enc = {k: jnp.asarray(v) for k, v in C.encode([arch], 4, len(MATH_OPS), 1).items()}
  before = np.exp(np.asarray(C.all_log_probs(params, q, e, net=net)[0]))[0, 3]
  for u, direction in ((1.0, 1), (-1.0, -1)):
    state = {"params": params, "opt_state": C.make_optimizer().init(params), "step": jnp.int32(0)}
    state, _ = C.train_step(state, q, e, enc, jnp.array([u]), net=net)
    after = np.exp(np.asarray(C.all_log_probs(state["params"], q, e, net=net)[0]))[0, 3]
    assert np.sign(after - before) == direction
  g = lambda pen: jax.grad(C.loss_fn)(params, q, e, dict(enc, penalty=jnp.array([pen])), jnp.array([0.5]), net=net)
  jax.tree_util.tree_map(np.testing.assert_array_equal, g(0.0), g(-1.5))


# --- the supernet's execution ---------------------------------------------------------------------------


def _client():
  return FakeClient(lambda model, messages, s: ("<solution_letter>A</solution_letter>\n```python\ndef solve():\n"
                                                "    return 2\n```\nThe answer is (A). \\boxed{2}"))


def test_math_graph_runs_the_prefix_then_the_layers_then_scensemble():
  item = load_items("math")[0]
  client = _client()
  layers = [["Generate", "SelfRefine"], ["ScEnsemble", "EarlyStop"]]
  trace = asyncio.run(supernet.run_architecture(client, item, layers, "gpt-5-mini", RunSettings(0.0, 4096)))
  # Programmer (its code ran), refine with the output, Generate, SelfRefine, ScEnsemble; one solution left:
  # no final ScEnsemble.
  assert [c.position for c in trace.calls] == ["programmer", "prefix:refine", "L0:Generate", "L0:SelfRefine",
                                               "sc_ensemble"]
  assert "Code output: 2" in trace.calls[1].messages[1]["content"]
  assert trace.calls[2].messages[1]["content"].startswith(supernet.DETAILED_SOLUTION_PROMPT)
  assert [c.sample_index for c in trace.calls] == [0, 1, 2, 3, 4]  # one draw each, never a cached repeat
  assert {c["temperature"] for c in client.calls} == {0.0} and {c["max_tokens"] for c in client.calls} == {4096}
  # The public templates' GenerateCoT crash: raised when reached, after the calls before it were made.
  with pytest.raises(supernet.ReferenceFormatError) as crash:
    asyncio.run(supernet.run_architecture(_client(), item, [["Generate", "GenerateCoT"]], "m", RunSettings(),
                                          format_error=True))
  assert [c.position for c in crash.value.trace.calls] == ["programmer", "prefix:refine", "L0:Generate"]
  fixed = asyncio.run(supernet.run_architecture(_client(), item, [["GenerateCoT"]], "m", RunSettings()))
  assert "Demonstration Examples" in fixed.calls[2].messages[1]["content"]


def test_humaneval_graph_ends_with_test_then_a_fresh_generation_on_failure():
  item = load_items("humaneval_plus")[0]
  client = FakeClient(lambda model, messages, s: "```python\ndef f():\n    return 1\n```")
  trace = asyncio.run(supernet.run_architecture(client, item, [["Generate"]], "m", RunSettings()))
  positions = [c.position for c in trace.calls]
  assert positions[0] == "L0:Generate" and positions[-1] == "improve"
  assert positions[1:-1] == [f"test_reflection:{i}" for i in range(3)]  # AFlow's Test: 3 reflections
  assert trace.calls[-1].messages[1]["content"].startswith(supernet.IMPROVE_CODE_PROMPT)
  assert trace.extra["final_test_passed"] is False
  with pytest.raises(ValueError, match="not in MaAS's humaneval_plus supernet"):
    asyncio.run(supernet.run_architecture(client, item, [["Programmer"]], "m", RunSettings()))


def test_operator_descriptions_are_the_public_json_lines():
  lines = supernet.operator_descriptions("humaneval_plus")
  assert lines[4].startswith("4. Test: Tests the solution using public test cases.")
  assert lines[0].endswith("with interface generate(problem: str, entry_point: str, instruction: str) -> dict "
                           "with key 'response' of type str.")
  assert len(supernet.operator_descriptions("mmlu_redux")) == 6 and "Programmer" not in supernet.OPERATORS["mmlu_redux"]


# --- end to end ----------------------------------------------------------------------------------------


def test_registry_row():
  assert METHODS["maas"].title == "MaAS" and METHODS["maas"].per_cell
  m = make_method("maas", benchmark="math", pool="gpt-5-mini", seed=1)
  assert m.describe()["threshold"] == 0.3 and m.describe()["cost_weight"] == 3.0 and m.trainable


def test_tiny_fit_and_solve_on_the_simulated_pool(session_sim, tmp_path):
  from hieramas_jax.benchmarks.splits import load_split  # pylint: disable=import-outside-toplevel
  from hieramas_jax.llm.client import LLMClient  # pylint: disable=import-outside-toplevel
  from hieramas_jax.llm.endpoint import sim_endpoint  # pylint: disable=import-outside-toplevel
  opts = dict(train_queries=2, repetitions=1, batch_size=2)
  method = make_method("maas", benchmark="mmlu_redux", pool="gpt-5-mini", seed=0, **opts)
  train, test = load_split("mmlu_redux", "train"), load_split("mmlu_redux", "test")[:2]

  async def run():
    async with LLMClient(sim_endpoint(session_sim.base_url)) as client:
      ctx = RunContext(client, get_pool("gpt-5-mini"), 0, state_dir=tmp_path / "state")
      fit = await method.fit(train, [], ctx)
      await method.prepare(test, ctx)
      traces = [await method.solve(ctx, it) for it in test]
      again = make_method("maas", benchmark="mmlu_redux", pool="gpt-5-mini", seed=0, **opts)
      again.load(tmp_path / "state")
      await again.prepare(test[:1], ctx)
      return fit, traces, await again.solve(ctx, test[0])

  fit, traces, reloaded = asyncio.run(run())
  assert fit["steps"] == 1 and fit["train_queries"] == 2 and fit["history"][0]["maas/batch_cost_usd"] > 0
  # Recorded for the learning evidence: layer 0's mean entropy, at most ln K (uniform over the K operators).
  assert 0.0 < fit["history"][0]["maas/layer0_entropy"] <= fit["max_layer0_entropy"] + 1e-9
  assert (fit["batch_size"], fit["cost_weight"]) == (2, 3.0)
  for t in traces:
    assert t.calls and t.cost_usd > 0 and t.extra["layers"][0][0] in ("Generate", "GenerateCoT", "MultiGenerateCoT")
  assert reloaded.extra["layers"] == traces[0].extra["layers"] and reloaded.final_text == traces[0].final_text


def test_a_crashing_architecture_is_rerun_at_most_20_times_and_its_calls_are_paid():
  method = make_method("maas", benchmark="math", pool="gpt-5-mini", seed=0, format_error=True)
  item = load_items("math")[0]
  k = len(MATH_OPS)
  later = np.tile(_peaked(MATH_OPS.index("EarlyStop")), (3, k, 1))
  client = _client()
  # Layer 0 always draws GenerateCoT: every attempt crashes after the prefix's two calls.
  trace, arch = asyncio.run(method._run(client, item, "m", _peaked(1), later, np.random.default_rng(0), "test", 0))
  assert arch is None and trace.final_text == "" and len(trace.calls) == 2 * 20
  assert len({c["sample_index"] for c in client.calls}) == 40  # each attempt another draw (sample offsets)
  # Half GenerateCoT, half Generate: the first attempt that draws Generate alone is the query's answer.
  first = np.zeros(k)
  first[:2] = 0.5
  trace, arch = asyncio.run(method._run(_client(), item, "m", first, later, np.random.default_rng(1), "test", 0))
  crashed = len(trace.extra["crashed_layers"])
  assert arch is not None and trace.extra["attempt"] == crashed
  assert all(layers[0][0] == "GenerateCoT" or "GenerateCoT" in layers[0] for layers in trace.extra["crashed_layers"])
  assert crashed >= 1 and trace.final_text
  assert [c.position for c in trace.calls[:2 * crashed]] == ["programmer", "prefix:refine"] * crashed
