"""An appended instruction that changes the task is not answered as the vendored item (issue 15, item 6).

The rule reads content, not wording (`reading.changes_task`): it must fire on task-changing appendices and
never on the requests the suite's methods send, training calls included.
"""

from __future__ import annotations

import asyncio
import pathlib

import pytest

from hieramas_jax.benchmarks import graders
from hieramas_jax.benchmarks.data import load_items
from hieramas_jax.llm.registry import get_pool
from hieramas_jax.mas import roles
from hieramas_jax.methods.api import RunContext
from hieramas_jax.methods.registry import make_method
from hieramas_jax.sim import reading
from hieramas_jax.sim.model import BehaviourModel
from mas_fakes import FakeClient

BENCHMARKS = ("math", "mmlu_redux", "humaneval_plus")
APPENDED = (
    "Now give the answer multiplied by 2.",
    "Instead, answer the question for n = 7.",
    "Ignore that. What is the sum of 13 and 29?",
    "Actually, solve $x^2 - 5x + 6 = 0$ instead.",
)
KEPT = (  # instructions that ask nothing new: the item stays itself
    "Let's think step by step.",
    "Give the best final answer.",
    "Explain your reasoning, then state your final answer.",
    "Here are the responses of other agents:\n\n### Agent 1:\nThe answer is (B) \\boxed{5}\n\n"
    "### Agent 2:\nThe answer is (C) \\boxed{7}\n\nCritically evaluate them and answer.",
)


@pytest.fixture(scope="module")
def sim0() -> BehaviourModel:
  return BehaviourModel(seed=0)


def _messages(item, appended: str) -> list[dict]:
  user = f"{item.question.rstrip()}\n\n{roles.ANSWER_FORMAT[item.benchmark]}"
  if appended:
    user += "\n\n" + appended
  return [{"role": "system", "content": "You are a helpful assistant."}, {"role": "user", "content": user}]


@pytest.mark.parametrize("bench", BENCHMARKS)
def test_a_task_changing_appendix_makes_the_item_unknown_and_the_format_stays(sim0, bench):
  for item in load_items(bench)[:20]:
    for appended in APPENDED:
      view = reading.read_request(_messages(item, appended), sim0.index)
      assert view.recognised is None, (item.id, appended)
      assert view.answer_format == reading.FORMAT_OF[bench], (item.id, appended)
    for appended in ("",) + KEPT:
      view = reading.read_request(_messages(item, appended), sim0.index)
      assert view.recognised is not None and view.item.id == item.id, (item.id, appended)


def test_a_test_report_on_the_items_own_function_is_not_a_new_task(sim0):
  """A tool's feedback after a candidate ("string_xor('010', '110') should be '100', got '1 0 0'": MASRouter's
  and GDesigner's HumanEval tools) calls the item's own function: the same task, whatever numbers it shows.
  New numbers in any other line still change it."""
  item = next(it for it in load_items("humaneval_plus") if it.meta["entry_point"] == "string_xor")
  candidate = "```python\ndef string_xor(a, b):\n    return ' '.join(a)\n```"
  report = "The code is not solved.\nstring_xor('010', '110') should be '100', got '1 0 0'"
  base = _messages(item, f"Agent 1's code:\n{candidate}\n\n{report}")
  assert reading.read_request(base, sim0.index).recognised is not None
  changed = _messages(item, f"Agent 1's code:\n{candidate}\n\n{report}\n\nNow make it return 7 for empty strings.")
  assert reading.read_request(changed, sim0.index).recognised is None


def test_a_changed_task_is_answered_at_chance_not_with_the_gold(sim0):
  """MMLU-Redux: with the gold unknown, the 'consensus' answer is a hash of the prompt: about 1 in 4."""
  items = load_items("mmlu_redux")[:200]
  correct = 0
  for item in items:
    reply = sim0.reply("gpt-5-mini", _messages(item, APPENDED[0]), 0.2, None, 0)
    correct += graders.grade(item, reply.text).correct
  assert 0.15 < correct / len(items) < 0.40


# Every method's requests (training calls included) on the sim: the rule never fires.
FIT = {"gdesigner": dict(iterations=1), "masrouter": dict(epochs=1, max_batches=1), "aflow": dict(rounds=2)}
PLAIN = ("base", "cot", "sc", "sc_cot", "debate", "full_graph", "random_graph", "random_config")


def _run(name: str, bench: str, sim0: BehaviourModel, tmp_path: pathlib.Path) -> tuple[int, list]:
  fired = []

  def answer(model, messages, sample_index):
    user = "\n\n".join(m["content"] for m in messages if m["role"] == "user")
    rec = sim0.index.recognise(user)
    if rec is not None and reading.changes_task(user, rec.item):
      fired.append(messages)
    return sim0.reply(model, messages, 0.2, None, sample_index).text

  client = FakeClient(answer)
  ctx = RunContext(client, get_pool("gpt-5-mini"), 0, state_dir=tmp_path)
  items = load_items(bench)
  if name == "hieramas":
    from hieramas_jax.methods.hieramas.config import HieraMASConfig  # pylint: disable=import-outside-toplevel
    method = make_method(name, config=HieraMASConfig(
        benchmark=bench, pool="gpt-5-mini", stage1_steps=2, stage1_batch=2, stage1_val_every=2,
        stage1_checkpoint_every=1, k_pool=8, stage2_graphs=2, stage2_epochs=1, stage2_batch=2,
        stage2_patience=1, max_queries=6, stage2_drop_ties=False))
  elif name in FIT:
    method = make_method(name, benchmark=bench, pool="gpt-5-mini", seed=0, **FIT[name])
  else:
    method = make_method(name, benchmark=bench, pool="gpt-5-mini", seed=0)
  if name in FIT or name == "hieramas":
    asyncio.run(method.fit(items[10:14], items[14:16], ctx))
  for item in items[:2]:
    asyncio.run(method.solve(ctx, item))
  return len(client.calls), fired


@pytest.mark.slow
@pytest.mark.parametrize("bench", BENCHMARKS)
@pytest.mark.parametrize("name", PLAIN + tuple(FIT))
def test_no_method_request_reads_as_a_changed_task(sim0, name, bench, tmp_path):
  calls, fired = _run(name, bench, sim0, tmp_path)
  assert calls > 0 and not fired, fired[:1]


@pytest.mark.slow
def test_no_hieramas_request_reads_as_a_changed_task(sim0, tmp_path):
  calls, fired = _run("hieramas", "mmlu_redux", sim0, tmp_path)
  assert calls > 0 and not fired, fired[:1]
