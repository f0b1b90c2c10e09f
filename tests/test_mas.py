"""MAS runtime: roles and prompts, DAG parallelism and ordering, trace accounting."""

from __future__ import annotations

import asyncio
import json
import math

import pytest

from hieramas_jax.benchmarks.data import BENCHMARKS, load_items
from hieramas_jax.mas import roles
from hieramas_jax.mas.config import ConfigError
from hieramas_jax.mas.runtime import RunSettings, build_config, run_mas
from hieramas_jax.mas.trace import DECISION_NODE, Trace
from mas_fakes import FakeClient

MATH_ITEM = load_items("math")[0]


def test_role_sets_are_the_reference_ones_and_all_described():
  assert roles.roles_for("math") == ("Mathematical Analyst", "Math Solver", "Inspector")
  assert roles.roles_for("mmlu_redux")[0] == "Knowlegable Expert"  # reference spelling, kept
  assert len(roles.roles_for("mmlu_redux")) == 8 and len(roles.roles_for("humaneval_plus")) == 5
  for b in BENCHMARKS:
    for r in roles.roles_for(b):
      assert roles.role_description(r)
  assert roles.role_system_line("Inspector").startswith("You are an Inspector. Specialized in reviewing")


def test_unknown_role_and_benchmark_give_clear_errors():
  with pytest.raises(roles.UnknownRoleError, match="not in the math role set; known: Mathematical"):
    roles.check_role("math", "Lawyer")
  with pytest.raises(KeyError, match="unknown benchmark 'gsm8k'"):
    roles.roles_for("gsm8k")
  with pytest.raises(roles.UnknownRoleError):
    asyncio.run(run_mas(FakeClient(), MATH_ITEM, build_config([("Doctor", (), "m")], "d")))


def test_prompts_follow_the_shared_conventions():
  mmlu = load_items("mmlu_redux")[0]
  base = roles.single_model_messages(mmlu, cot=False)
  assert base[0]["content"] == "You are a helpful assistant."
  assert mmlu.question in base[1]["content"] and "The answer is (X)" in base[1]["content"]
  assert "step by step" not in base[1]["content"]
  assert "Let's think step by step." in roles.single_model_messages(mmlu, cot=True)[1]["content"]
  agent = roles.agent_messages(MATH_ITEM, "Math Solver", [roles.AgentOutput(2, "Inspector", "\\boxed{3}")])
  assert agent[0]["content"].startswith("You are a Math Solver.")
  assert "### Response from Agent 2 (Inspector):\n\\boxed{3}" in agent[1]["content"]
  assert "\\boxed{}" in agent[1]["content"]
  synth = roles.synthesizer_messages(MATH_ITEM, "Inspector", ["p1", "p2"])
  assert synth[0]["content"].startswith("You have been provided with a set of responses")
  assert "You are an Inspector." in synth[0]["content"]
  assert "### Proposal 1:\np1" in synth[1]["content"] and "### Proposal 2:\np2" in synth[1]["content"]
  dec = roles.decision_messages(MATH_ITEM, [roles.AgentOutput(1, "Math Solver", "x")])
  # The reference prompt sets' decision role and constraint: MATH asks for reasons, MMLU-Redux does not.
  assert dec[0]["content"].startswith("You are the top decision-maker. Good at analyzing and summarizing mathematical")
  assert dec[0]["content"].endswith("Give reasons for making decisions.") and "\\boxed{}" in dec[1]["content"]
  mmlu_dec = roles.decision_messages(mmlu, [])[0]["content"]
  assert "Give reasons" not in mmlu_dec
  assert mmlu_dec.endswith("I will give you some other people's answers and analysis.")
  code = roles.single_model_messages(load_items("humaneval_plus")[0], cot=False)[1]["content"]
  assert "```python code block" in code


def _diamond(proposers=("p1", "p2")):
  # 0 -> {1, 2} -> 3 : depth 3, four nodes.
  spec = [("Mathematical Analyst", proposers, "s"), ("Math Solver", proposers, "s"),
          ("Inspector", proposers, "s"), ("Math Solver", proposers, "s")]
  return build_config(spec, "decider", [(0, 1), (0, 2), (1, 3), (2, 3)])


class _TurnClient(FakeClient):
  """Each call lasts `turns` passes of the event loop instead of a wall-clock latency, and is stamped with a
  logical clock (one tick per call start or end).

  Which calls overlap and which wait for which is then a fact of the runtime's schedule, the same on a
  quiet or a loaded machine; a wall-clock bound flakes on a busy 2-core machine (the speed figure itself
  is measured by experiments/bench_timing.py). `turns` is far more than the few loop passes between the
  starts of calls the runtime launches together, so those always overlap.
  """

  def __init__(self, turns: int = 50):
    super().__init__()
    self.turns = turns
    self.clock = 0
    self.spans: list[tuple[int, int]] = []  # (start tick, end tick) of every call

  async def chat(self, model, messages, **kw):
    self.clock += 1
    start = self.clock
    self.in_flight += 1
    self.max_in_flight = max(self.max_in_flight, self.in_flight)
    try:
      for _ in range(self.turns):
        await asyncio.sleep(0)
    finally:
      self.in_flight -= 1
    self.clock += 1
    self.spans.append((start, self.clock))
    return await super().chat(model, messages, **kw)

  def rounds(self) -> int:
    """The longest chain of calls each started after the previous one ended: the number of latencies a
    run takes when every call takes one."""
    depth: dict[tuple[int, int], int] = {}
    for span in sorted(self.spans):
      depth[span] = 1 + max((d for (s, e), d in depth.items() if e < span[0]), default=0)
    return max(depth.values())


def test_diamond_runs_in_depth_rounds_not_node_count():
  client = _TurnClient()
  config = _diamond()
  trace = asyncio.run(run_mas(client, MATH_ITEM, config))
  # depth 3 x (proposers || then synthesizer) + decision = 7 rounds; sequential would be 4*3+1 = 13.
  assert client.rounds() == config.depth() * 2 + 1 == 7
  assert len(trace.calls) == len(client.spans) == 4 * 3 + 1
  assert client.max_in_flight == 4  # nodes 1 and 2 with two proposers each, at once


def test_a_node_never_starts_before_its_predecessors_finish():
  client = FakeClient(latency=0.02)
  config = _diamond()
  trace = asyncio.run(run_mas(client, MATH_ITEM, config))
  start = {}
  end = {}
  for c in trace.calls:
    start[c.node] = min(start.get(c.node, math.inf), c.started_s)
    end[c.node] = max(end.get(c.node, 0.0), c.finished_s)
  for j in range(4):
    for p in config.predecessors(j):
      assert start[j] >= end[p]
  assert start[DECISION_NODE] >= max(end[j] for j in range(4))
  # synthesizers start after their node's proposers.
  for j in range(4):
    props = [c for c in trace.calls if c.node == j and c.position.startswith("proposer")]
    synth = [c for c in trace.calls if c.node == j and c.position == "synthesizer"]
    assert len(props) == 2 and len(synth) == 1
    assert synth[0].started_s >= max(p.finished_s for p in props)


def test_predecessor_outputs_reach_successors_and_the_decider():
  def answer(model, messages, sample_index):
    return f"out-of-{model}"
  client = FakeClient(answer)
  spec = [("Mathematical Analyst", (), "a"), ("Math Solver", ("p",), "b"), ("Inspector", (), "c")]
  config = build_config(spec, "decider", [(0, 1), (1, 2)])
  trace = asyncio.run(run_mas(client, MATH_ITEM, config, RunSettings(decision_reads="sinks")))
  by_model = {c["model"]: c for c in client.calls}
  assert "### Response from Agent 1 (Mathematical Analyst):\nout-of-a" in by_model["p"]["messages"][1]["content"]
  assert "### Proposal 1:\nout-of-p" in by_model["b"]["messages"][1]["content"]
  assert "out-of-b" in by_model["c"]["messages"][1]["content"]
  decider_prompt = by_model["decider"]["messages"][1]["content"]
  assert "out-of-c" in decider_prompt and "out-of-a" not in decider_prompt  # sinks only
  assert trace.final_text == "out-of-decider"
  assert trace.node_texts == {0: "out-of-a", 1: "out-of-b", 2: "out-of-c"}
  assert [c.position for c in trace.calls if c.node == 0] == ["solo"]
  # sampling parameters arrive as set.
  assert {c["temperature"] for c in client.calls} == {0.2} and {c["max_tokens"] for c in client.calls} == {2048}
  # default: the decider reads every node.
  client2 = FakeClient(answer)
  asyncio.run(run_mas(client2, MATH_ITEM, config))
  assert "out-of-a" in [c for c in client2.calls if c["model"] == "decider"][0]["messages"][1]["content"]


def test_trace_cost_and_tokens_are_sums_of_its_calls_and_json_round_trips():
  client = FakeClient(lambda m, msg, s: "x" * (10 if m == "p1" else 30))
  trace = asyncio.run(run_mas(client, MATH_ITEM, _diamond()))
  assert trace.cost_usd == pytest.approx(sum(r.cost_usd for r in trace.calls))
  assert trace.cost_usd > 0
  assert trace.cost_usd == pytest.approx(sum(c["cost_usd"] for c in client.calls))
  assert trace.prompt_tokens == sum(c.prompt_tokens for c in trace.calls) > 0
  back = Trace.from_json(json.loads(json.dumps(trace.to_json())))
  assert back.cost_usd == pytest.approx(trace.cost_usd) and back.calls == trace.calls
  assert back.node_texts == trace.node_texts


def test_a_failing_call_cancels_the_query_and_raises():
  class Boom(Exception):
    pass

  def answer(model, messages, sample_index):
    if model == "bad":
      raise Boom("endpoint down")
    return "ok"
  spec = [("Math Solver", ("bad",), "s"), ("Inspector", ("p",), "s")]
  with pytest.raises(Boom):
    asyncio.run(run_mas(FakeClient(answer, latency=0.01), MATH_ITEM, build_config(spec, "d", [(0, 1)])))


def test_repeated_proposer_models_are_independent_draws():
  from hieramas_jax.mas.runtime import proposer_draws
  assert proposer_draws(("a", "b", "a", "a")) == [0, 0, 1, 2]
  client = FakeClient()
  asyncio.run(run_mas(client, MATH_ITEM, build_config([("Math Solver", ("m", "m"), "s")], "d")))
  assert sorted(c["sample_index"] for c in client.calls if c["model"] == "m") == [0, 1]


def test_settings_and_configs_reject_bad_values():
  with pytest.raises(ValueError, match="decision_reads"):
    RunSettings(decision_reads="some")
  with pytest.raises(ConfigError, match="cycle"):
    build_config([("Math Solver", (), "a"), ("Inspector", (), "b")], "d", [(0, 1), (1, 0)])


def test_without_a_decision_model_the_single_sink_answers():
  def answer(model, messages, sample_index):
    return f"out-of-{model}"
  client = FakeClient(answer)
  spec = [("Mathematical Analyst", (), "a"), ("Math Solver", ("p",), "b")]
  config = build_config(spec, None, [(0, 1)])
  trace = asyncio.run(run_mas(client, MATH_ITEM, config))
  assert trace.final_text == "out-of-b"
  assert [c["model"] for c in client.calls] == ["a", "p", "b"]  # no decision call
  with pytest.raises(ConfigError, match="exactly one sink"):
    build_config(spec, None, [])


class _SkewedClient(FakeClient):
  """Answers each model after its own delay, so calls finish in an order set by `delays`."""

  def __init__(self, delays: dict[str, float]):
    super().__init__()
    self.delays = delays

  async def chat(self, model, messages, **kw):
    await asyncio.sleep(self.delays.get(model, 0.0))
    return await super().chat(model, messages, **kw)


def test_a_traces_call_order_does_not_depend_on_which_call_finished_first():
  """Concurrent nodes and proposers finish in any order; the trace lists them canonically (topological
  node order, proposers by seat, synthesizer, decision), so two runs of one computation match."""
  # Distinct models per node, so nodes 1 and 2 (concurrent) finish in opposite orders in the two runs.
  spec = [("Mathematical Analyst", ("a1", "a2"), "as"), ("Math Solver", ("b1", "b2"), "bs"),
          ("Inspector", ("c1", "c2"), "cs"), ("Math Solver", ("d1", "d2"), "ds")]
  config = build_config(spec, "decider", [(0, 1), (0, 2), (1, 3), (2, 3)])
  models = sorted({m for n in config.nodes for m in (*n.proposers, n.synthesizer)})
  fast_first = {m: 0.01 * i for i, m in enumerate(models)}
  slow_first = {m: 0.01 * (len(models) - i) for i, m in enumerate(models)}
  a = asyncio.run(run_mas(_SkewedClient(fast_first), MATH_ITEM, config))
  b = asyncio.run(run_mas(_SkewedClient(slow_first), MATH_ITEM, config))
  key = [(c.node, c.position, c.model) for c in a.calls]
  assert key == [(c.node, c.position, c.model) for c in b.calls]
  topo = {j: i for i, j in enumerate(config.topological_order())}
  ranks = [(len(topo) if c.node == DECISION_NODE else topo[c.node], c.position != "synthesizer") for c in a.calls]
  assert [r[0] for r in ranks] == sorted(r[0] for r in ranks)
  assert a.calls[-1].node == DECISION_NODE
  assert a.summary()["models"] == b.summary()["models"]


def test_humaneval_supernodes_run_no_code_as_the_reference_hieramas_runtime():
  """The reference HieraMAS (`graph/learnable_multi_node.py`, `graph/multi_node.py`,
  `graph/learnable_multi_node_graph.py`) gives a supernode's predecessors' outputs to its `CodeWriting`
  workers as text in the task (no spatial inputs, so no test runs and no `is_solved` shortcut) and calls
  the `FinalWriteCode` decision without predecessors: no code is ever run on the docstring examples.
  Here too: code that would pass its examples is read like any text and every node calls."""
  item = next(it for it in load_items("humaneval_plus") if it.id == "HumanEval/0")
  right = "```python\n" + item.question + item.answer + "\n```"
  client = FakeClient(lambda model, messages, s: right)
  config = build_config([("Programming Expert", ("m", "m"), "m"), ("Bug Fixer", (), "m")], "d", [(0, 1)])
  trace = asyncio.run(run_mas(client, item, config))
  assert len(client.calls) == 5 and trace.final_text == right and "code_tests" not in trace.extra
  assert "internal testing" not in "".join(m["content"] for c in client.calls for m in c["messages"])
  assert client.calls[-1]["messages"][0]["content"] == roles.decision_system("humaneval_plus", tested=False)
