"""The simulated pool's behaviour model: determinism, real-format answers graded by the real
graders, correlated sampling, role/CoT terms, context votes, calibration."""

from __future__ import annotations

import asyncio
import gzip
import json

import numpy as np
import openai
import pytest

from hieramas_jax.benchmarks import graders
from hieramas_jax.benchmarks.data import LETTERS, load_items
from hieramas_jax.sim import params as P
from hieramas_jax.sim import reading
from hieramas_jax.sim.calibration_targets import TARGETS
from hieramas_jax.sim.model import BehaviourModel, MUTANTS_PATH, _load_math_wrong, _load_mutants
from hieramas_jax.sim.server import SimConfig, start_sim_in_thread

FORMAT = {
    "mmlu_redux": "End your response with 'The answer is (X)' where X is the letter of the correct option.",
    "math": "Please put your final answer within \\boxed{}.",
    "humaneval_plus": "Complete the following Python function. Return the complete function in a single "
                      "```python code block.",
}


def base_messages(item, *, cot: bool = False, system: str = "You are a helpful assistant.",
                  blocks: tuple[str, ...] = (), header: str = "### Response from Agent {k}:") -> list[dict]:
  user = f"{item.question.rstrip()}\n\n{FORMAT[item.benchmark]}"
  if cot:
    user += "\nLet's think step by step."
  if blocks:
    user += "\n\nHere are the responses of other agents:\n\n" + "\n\n".join(
        header.format(k=k) + "\n" + b for k, b in enumerate(blocks, 1))
  return [{"role": "system", "content": system}, {"role": "user", "content": user}]


@pytest.fixture(scope="module")
def sim0() -> BehaviourModel:
  return BehaviourModel(seed=0)


def test_same_request_same_answer_other_sample_or_seed_differs(sim0):
  other_seed = BehaviourModel(seed=1)
  items = load_items("mmlu_redux")[:150]
  same = resample = reseed = 0
  for item in items:
    msgs = base_messages(item)
    a = sim0.reply("qwen3-8b", msgs, 1.0, None, 0)
    same += a == sim0.reply("qwen3-8b", msgs, 1.0, None, 0)
    resample += a.text != sim0.reply("qwen3-8b", msgs, 1.0, None, 1).text
    reseed += a.text != other_seed.reply("qwen3-8b", msgs, 1.0, None, 0).text
  assert same == len(items)
  assert resample > 15 and reseed > 15


def test_every_item_is_recognised_inside_a_prompt(sim0):
  for bench in ("math", "humaneval_plus"):
    for item in load_items(bench):
      found = sim0.index.recognise(base_messages(item)[1]["content"])
      assert found is not None and found.item.question == item.question, item.id


def test_unknown_prompt_gets_a_fluent_generic_answer(sim0):
  msgs = [{"role": "user", "content": "Write a short note about the history of tea in Britain."}]
  r = sim0.reply("gemma-3-27b", msgs, 0.7, None, 0)
  assert r.item_id is None and len(r.text.split()) > 15
  assert "\\boxed" not in r.text and "The answer is" not in r.text
  assert sim0.reply("gpt-5-mini", [{"role": "user", "content": "hi"}], None, None, 0).reasoning_tokens > 0


@pytest.mark.parametrize("bench,n", [("mmlu_redux", 200), ("math", 80)])
def test_answers_graded_by_real_graders_match_the_draw(sim0, bench, n):
  rng = np.random.default_rng(0)
  items = load_items(bench)
  wrong_seen = right_seen = 0
  for i in rng.choice(len(items), n, replace=False):
    item = items[i]
    r = sim0.reply("llama-8b", base_messages(item, cot=bool(i % 2)), 0.2, None, 0)
    grade = graders.grade(item, r.text)
    assert grade.extracted is not None, r.text
    assert grade.correct == r.correct_drawn, (item.id, r.text, grade)
    wrong_seen += not grade.correct
    right_seen += grade.correct
  assert wrong_seen > 10 and right_seen > 10


def test_code_answers_graded_by_the_sandbox_match_the_draw(sim0):
  items = load_items("humaneval_plus")
  picked = {True: [], False: []}
  for item in items:
    for k in range(6):
      r = sim0.reply("llama-8b", base_messages(item), 1.0, None, k)
      if len(picked[r.correct_drawn]) < 3:
        picked[r.correct_drawn].append((item, r.text))
        break
    if all(len(v) == 3 for v in picked.values()):
      break
  for drawn, cases in picked.items():
    for item, text in cases:
      assert graders.grade(item, text).correct == drawn, (item.id, text)


def test_precomputed_wrong_answers_cover_every_item():
  with gzip.open(MUTANTS_PATH, "rt") as f:
    assert json.load(f)["unverified"] == {}  # every mutant was failed by the real sandbox
  mutants = _load_mutants()
  items = load_items("humaneval_plus")
  assert all(mutants[it.id] for it in items)
  for it in items[:20]:  # a mutant is the complete function with one slip, never the canonical one
    canonical = reading.code_key(it.question + it.answer)
    assert all(reading.code_key(m) != canonical and f"def {it.meta['entry_point']}" in m
               for m in mutants[it.id])
  wrong = _load_math_wrong()
  for it in load_items("math"):
    assert wrong[it.id] and all(reading.math_key(w) != reading.math_key(it.answer) for w in wrong[it.id])


def test_gold_renders_correct_and_near_misses_wrong_under_the_real_graders(sim0):
  from hieramas_jax.sim import render
  for bench in ("mmlu_redux", "math"):
    for item in load_items(bench):
      text = render.answer_text(item, sim0._gold(item), 2, False, 0.5)
      assert graders.grade(item, text).correct, (item.id, text)
  wrong = _load_math_wrong()
  for item in load_items("math")[::10]:  # all 500 are checked by build_math_wrong
    for w in wrong[item.id]:
      assert not graders.grade(item, render.answer_text(item, w, 2, False, 0.5)).correct, (item.id, w)


def test_low_temperature_samples_agree_more_at_the_same_marginal_accuracy(sim0):
  items = load_items("mmlu_redux")[:400]
  stats = {}
  for temp in (0.0, 1.0):
    correct = np.array([[sim0.reply("qwen3-8b", base_messages(it), temp, None, k).correct_drawn
                         for k in range(2)] for it in items])
    stats[temp] = (correct.mean(), (correct[:, 0] == correct[:, 1]).mean())
  assert abs(stats[0.0][0] - stats[1.0][0]) < 0.05
  assert stats[0.0][1] > stats[1.0][1] + 0.03
  assert P.rho(0.0) > P.rho(0.2) > P.rho(1.0) > 0


def test_role_fit_and_step_by_step_move_competence(sim0):
  view = reading.read_request
  math_item = load_items("math")[10]
  knowledge_item = load_items("mmlu_redux")[2000]
  base = sim0.p_correct("qwen3-8b", math_item, view(base_messages(math_item)))
  solver = sim0.p_correct("qwen3-8b", math_item, view(base_messages(
      math_item, system="You are a Math Solver. You solve problems.")))
  lawyer = sim0.p_correct("qwen3-8b", math_item, view(base_messages(
      math_item, system="You are a Lawyer. You know the law.")))
  cot = sim0.p_correct("qwen3-8b", math_item, view(base_messages(math_item, cot=True)))
  assert lawyer < base < solver < cot
  historian = view(base_messages(knowledge_item, system="You are a Historian. You know history."))
  assert historian.role == "Historian" and historian.kind == "single"
  assert sim0.p_correct("qwen3-8b", knowledge_item, historian) > sim0.p_correct(
      "qwen3-8b", knowledge_item, view(base_messages(knowledge_item)))


def _share(sim, model, item, messages_for, answer_of, target, n=120) -> float:
  return np.mean([answer_of(sim.reply(model, messages_for(k), 1.0, None, k).text) == target
                  for k in range(n)])


def test_context_votes_pull_towards_the_majority(sim0):
  item = load_items("mmlu_redux")[5]
  wrong = next(c for c in LETTERS if c != item.answer)
  vote = f"Considering the options carefully. The answer is ({wrong})."
  letter = graders.extract_mmlu_letter
  alone = _share(sim0, "llama-8b", item, lambda k: base_messages(item, cot=True), letter, wrong)
  peers = _share(sim0, "llama-8b", item, lambda k: base_messages(item, cot=True, blocks=(vote,) * 3),
                 letter, wrong)
  split = _share(sim0, "llama-8b", item, lambda k: base_messages(
      item, cot=True, blocks=(vote, vote, f"The answer is ({item.answer}).")),
                 letter, wrong)
  synth_sys = ("You have been provided with a set of responses from various models to the latest user "
               "query. Your task is to synthesize these responses into a single, high-quality response.")
  synth = _share(sim0, "llama-8b", item, lambda k: base_messages(
      item, system=synth_sys, blocks=(vote,) * 2, header="### Proposal {k}:"), letter, wrong)
  strong = _share(sim0, "gpt-5-mini", item, lambda k: base_messages(item, cot=True, blocks=(vote,) * 3),
                  letter, wrong)
  assert alone < split < peers < synth
  assert strong < peers  # a competent model resists a wrong majority more


def test_context_spreads_math_and_code_answers(sim0):
  math_item = load_items("math")[0]
  near_miss = _load_math_wrong()[math_item.id][0]
  block = f"Working through it.\n\nTherefore, the final answer is $\\boxed{{{near_miss}}}$."
  got = _share(sim0, "qwen3-8b", math_item, lambda k: base_messages(math_item, cot=True, blocks=(block,) * 3),
               lambda t: reading.math_key(reading.last_boxed(t) or ""), reading.math_key(near_miss))
  assert got > 0.25
  code_item = load_items("humaneval_plus")[0]
  mutant = _load_mutants()[code_item.id][0]
  block = f"```python\n{mutant}\n```"
  got = _share(sim0, "qwen3-8b", code_item, lambda k: base_messages(code_item, cot=True, blocks=(block,) * 3),
               lambda t: reading.code_key(reading.code_block(t) or ""), reading.code_key(mutant))
  assert got > 0.25


def test_long_contexts_dilute_the_pull(sim0):
  item = load_items("mmlu_redux")[5]
  wrong = next(c for c in LETTERS if c != item.answer)
  short = f"The answer is ({wrong})."
  long = "Some lengthy deliberation follows. " * 700 + short
  letter = graders.extract_mmlu_letter
  a = _share(sim0, "llama-8b", item, lambda k: base_messages(item, blocks=(short,) * 3), letter, wrong, 200)
  b = _share(sim0, "llama-8b", item, lambda k: base_messages(item, blocks=(long,) * 3), letter, wrong, 200)
  assert b < a


@pytest.mark.parametrize("model", ["gpt-5-mini", "qwen3-80b", "llama-8b"])
def test_direct_base_loop_reproduces_calibration_targets(sim0, model):
  """Base prompts, one call per item, real graders for MMLU and MATH (300 items each), the drawn
  correctness for HumanEval+ (all 164; the sandbox is exercised elsewhere)."""
  rng = np.random.default_rng(1)
  for bench in ("mmlu_redux", "math", "humaneval_plus"):
    items = load_items(bench)
    idx = rng.choice(len(items), min(300, len(items)), replace=False)
    if bench == "humaneval_plus":
      acc = np.mean([sim0.reply(model, base_messages(items[i]), 0.2, None, 0).correct_drawn for i in idx])
    else:
      acc = np.mean([graders.grade(items[i], sim0.reply(model, base_messages(items[i]), 0.2, None, 0).text
                                   ).correct for i in idx])
    target = TARGETS[model][bench].accuracy
    se = (target * (1 - target) / len(idx)) ** 0.5
    assert abs(acc - target) < max(0.03, 3 * se), (model, bench, acc, target)
    expected = np.mean([sim0.p_correct(model, items[i], reading.read_request(base_messages(items[i])))
                        for i in range(len(items))])
    assert abs(expected - target) < 0.002  # theta.json matches the targets exactly in expectation


def test_http_reply_equals_the_behaviour_model(sim0):
  item = load_items("math")[42]
  msgs = base_messages(item, cot=True)
  with start_sim_in_thread(SimConfig(seed=0)) as handle:
    async def go():
      client = openai.AsyncOpenAI(base_url=handle.base_url, api_key="unused", max_retries=0)
      out = [await client.chat.completions.create(model="qwen3-80b", messages=msgs, temperature=0.2,
                                                  max_tokens=4096, seed=s) for s in (0, 0, 3)]
      await client.close()
      return [o.choices[0].message.content for o in out]
    texts = asyncio.run(go())
  assert texts[0] == texts[1] == sim0.reply("qwen3-80b", msgs, 0.2, None, 0).text
  assert texts[2] == sim0.reply("qwen3-80b", msgs, 0.2, None, 3).text
