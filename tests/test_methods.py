"""Methods: registry, Base/CoT requests, self-consistency sampling and majority vote."""

from __future__ import annotations

import asyncio
import dataclasses

import pytest

from hieramas_jax.benchmarks.data import load_items
from hieramas_jax.llm.registry import get_pool
from hieramas_jax.methods.api import RunContext, UnknownMethodError
from hieramas_jax.methods.registry import check_method_names, known_methods, make_method
from hieramas_jax.methods.voting import majority_vote, normalise_code
from mas_fakes import FakeClient

MMLU = load_items("mmlu_redux")[0]
MATH = load_items("math")[0]
CODE = load_items("humaneval_plus")[0]


def test_registry_knows_every_table1_method_and_rejects_others_clearly():
  assert {"base", "cot", "sc", "sc_cot", "full_graph", "random_graph", "gdesigner", "masrouter", "aflow", "hieramas",
          "static_search", "random_config", "arg_designer"} <= set(known_methods())
  assert make_method("sc_cot").name == "sc_cot"
  # Methods built per cell take the cell; the others ignore it.
  assert make_method("base", benchmark="math", pool="gpt-5-mini", seed=3).name == "base"
  assert make_method("gdesigner", benchmark="math", pool="gpt-5-mini", seed=3).describe()["seed"] == 3
  with pytest.raises(UnknownMethodError,
                     match=(r"unknown method 'scc' \(did you mean 'sc'\?\); "
                            r"known: aflow, agentprune, arg_designer, base, cot, .*maas, .*sc, sc_cot")):
    make_method("scc")
  with pytest.raises(UnknownMethodError, match=r"unknown method 'HieraMAS' \(did you mean 'hieramas'\?\)"):
    check_method_names(["HieraMAS"])
  with pytest.raises(UnknownMethodError):
    check_method_names(["base", "debate?"])


@pytest.mark.parametrize("name,cot", [("base", False), ("cot", True)])
def test_single_call_methods_send_one_request_to_the_strong_model(name, cot):
  client = FakeClient(lambda m, msg, s: "The answer is (B)")
  ctx = RunContext(client, get_pool("qwen3-80b"))
  trace = asyncio.run(make_method(name).solve(ctx, MMLU))
  (call,) = client.calls
  assert call["model"] == "qwen3-80b" and call["temperature"] == 0.2 and call["max_tokens"] == 2048
  assert ("Let's think step by step." in call["messages"][1]["content"]) == cot
  assert trace.final_text == "The answer is (B)" and trace.cost_usd == call["cost_usd"]


def test_self_consistency_samples_five_distinct_requests_and_votes():
  answers = ["The answer is (A)", "The answer is (C)", "The answer is (C)", "no idea", "The answer is (A)."]
  client = FakeClient(lambda m, msg, s: answers[s])
  ctx = RunContext(client, get_pool("gpt-5-mini"))
  trace = asyncio.run(make_method("sc").solve(ctx, MMLU))
  assert sorted(c["sample_index"] for c in client.calls) == [0, 1, 2, 3, 4]
  assert {c["temperature"] for c in client.calls} == {1.0}
  assert {c["model"] for c in client.calls} == {"gpt-5-mini"}
  # A and C tie 2-2: A's first sample (index 0) is earlier, so A wins; the text is sample 0's.
  assert trace.final_text == answers[0]
  assert trace.extra["vote"]["counts"] == [["A", 2, 0], ["C", 2, 1]]
  assert trace.cost_usd == pytest.approx(sum(c["cost_usd"] for c in client.calls))
  assert len(trace.calls) == 5


def test_majority_vote_mmlu_picks_the_most_common_letter():
  vote = asyncio.run(majority_vote(MMLU, ["The answer is (D)", "The answer is (B)", "The answer is (B)"]))
  assert vote.answer == "B" and vote.winner == 1


def test_majority_vote_math_groups_equivalent_answers():
  texts = ["so \\boxed{0.5}", "thus \\boxed{3}", "\\boxed{\\frac{1}{2}}", "\\boxed{3}", "\\boxed{\\dfrac12}"]
  vote = asyncio.run(majority_vote(MATH, texts))
  assert vote.winner == 0 and vote.counts[0][1] == 3  # 0.5 = 1/2 = \dfrac12 outvote 3, 3


def test_majority_vote_code_ignores_formatting_comments_and_docstrings():
  a = "```python\ndef f(x):\n    '''doc'''\n    return x+1  # inc\n```"
  b = "```python\ndef f(x):\n    return (x + 1)\n```"
  c = "```python\ndef f(x):\n    return x - 1\n```"
  item = dataclasses.replace(CODE, meta={**CODE.meta, "entry_point": "f"})
  vote = asyncio.run(majority_vote(item, [c, a, b]))
  assert vote.winner == 1 and vote.counts[0][1] == 2
  assert normalise_code("def f(x):\n  return x+1\n") == normalise_code("def f(x):\n    '''d'''\n    return x + 1")
  # all unextractable: sample 0, no answer.
  none = asyncio.run(majority_vote(MMLU, ["hmm", "no"]))
  assert none.winner == 0 and none.answer is None
