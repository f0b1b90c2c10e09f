"""The simulated pool's behaviour model: reading requests, competence, sampling, context, fallbacks.

Each mechanism is checked against hand-computed probabilities on small prompts; answers are graded
by the real graders wherever a grader exists.
"""

from __future__ import annotations

import asyncio
import dataclasses
import gzip
import json
import math

import numpy as np
import openai
import pytest

from hieramas_jax.benchmarks import extract, graders
from hieramas_jax.benchmarks.data import LETTERS, format_mmlu_question, load_items
from hieramas_jax.mas import roles
from hieramas_jax.sim import intent, params as P
from hieramas_jax.sim import reading, render
from hieramas_jax.sim.calibration_targets import PAPER_BASE, PAPER_COT, TARGETS, sigmoid
from hieramas_jax.sim.hashing import inv_phi, phi
from hieramas_jax.sim.model import MUTANTS_PATH, Answer, BehaviourModel, _load_math_wrong, _load_programs
from hieramas_jax.sim.server import SimConfig, start_sim_in_thread

FORMAT = roles.ANSWER_FORMAT


def base_messages(item, *, cot: bool = False, system: str = "You are a helpful assistant.",
                  blocks: tuple[str, ...] = (), header: str = "### Response from Agent {k}:",
                  question: str | None = None) -> list[dict]:
  user = f"{(question or item.question).rstrip()}\n\n{FORMAT[item.benchmark]}"
  if cot:
    user += "\nLet's think step by step."
  if blocks:
    user += "\n\nHere are the responses of other agents:\n\n" + "\n\n".join(
        header.format(k=k) + "\n" + b for k, b in enumerate(blocks, 1))
  return [{"role": "system", "content": system}, {"role": "user", "content": user}]


@pytest.fixture(scope="module")
def sim0() -> BehaviourModel:
  return BehaviourModel(seed=0)


# ---- reading ------------------------------------------------------------------------------------


def test_every_item_is_recognised_inside_a_prompt_and_an_edited_question_is_not(sim0):
  for bench in ("math", "humaneval_plus", "mmlu_redux"):
    for item in load_items(bench):
      found = sim0.index.recognise(base_messages(item)[1]["content"])
      assert found is not None and found.item.question == item.question, item.id
  rng = np.random.default_rng(0)
  changed = 0
  for item in load_items("math"):
    digits = [i for i, ch in enumerate(item.question) if ch.isdigit()]
    if not digits:
      continue
    i = int(rng.choice(digits))
    edited = item.question[:i] + str((int(item.question[i]) + 1) % 10) + item.question[i + 1:]
    found = sim0.index.recognise(edited)
    changed += 1
    assert found is None or found.item.question == edited, item.id  # never the unedited item
  assert changed > 400


def test_permuted_options_are_recognised_with_their_own_lettering(sim0):
  item = load_items("mmlu_redux")[5]
  order = [2, 0, 3, 1]  # shown position -> original option
  shown = format_mmlu_question(item.meta["stem"], [item.meta["choices"][k] for k in order])
  rec = sim0.index.recognise(shown)
  assert rec.item.id == item.id
  assert [rec.letter_of(k) for k in range(4)] == [LETTERS[order.index(k)] for k in range(4)]
  edited = shown.replace(item.meta["choices"][order[0]], "something else entirely")
  assert sim0.index.recognise(edited) is None


@pytest.mark.parametrize("header", ["### Response from Agent {k}:", "Response {k}:", "[Agent {k} said]", ""])
def test_candidates_are_read_under_any_header_wording(sim0, header):
  item = load_items("math")[3]
  blocks = ("Some work.\n\nTherefore, the final answer is $\\boxed{7}$.", "The answer: $\\boxed{\\frac{1}{2}}$.")
  view = reading.read_request(base_messages(item, cot=True, blocks=blocks, header=header), sim0.index)
  assert view.candidates == ("7", "\\frac{1}{2}")
  mmlu = load_items("mmlu_redux")[9]
  blocks = ("So the answer is (B).", "**Answer:** (D)", '{"answer": "B"}')
  view = reading.read_request(base_messages(mmlu, blocks=blocks, header=header), sim0.index)
  assert view.candidates == ("B", "D", "B")


def test_code_candidates_exclude_the_question_and_earlier_assistant_turns_count(sim0):
  item = load_items("humaneval_plus")[0]
  program = item.question + item.answer
  msgs = [{"role": "user", "content": f"{item.question}\n{FORMAT[item.benchmark]}"},
          {"role": "assistant", "content": f"```python\n{program}\n```"},
          {"role": "user", "content": f"Another agent wrote:\n```python\n{program}\n```\nGive an updated answer."}]
  view = reading.read_request(msgs, sim0.index)
  assert len(view.candidates) == 2 and view.reasons


def test_requests_to_reason_are_read_from_ordinary_phrasing_not_from_the_question(sim0):
  item = next(it for it in load_items("math") if it.question.lower().startswith("evaluate"))
  assert not reading.read_request(base_messages(item), sim0.index).reasons
  for cue in ("Let's think step by step.", "Think carefully before answering.", "Show your work.",
              "Explain your reasoning."):
    msgs = [{"role": "user", "content": f"{item.question}\n{FORMAT['math']}\n{cue}"}]
    assert reading.read_request(msgs, sim0.index).reasons, cue
  # Evaluation verbs are no cue by themselves: with no candidates there is nothing to evaluate...
  msgs = [{"role": "user", "content": f"{item.question}\n{FORMAT['math']}\nCritically evaluate and synthesize."}]
  assert not reading.read_request(msgs, sim0.index).reasons
  # ...and with candidates the request is an evaluation whatever it says (or without any instruction).
  bare = base_messages(item, blocks=("\\boxed{3}",), header="")
  assert reading.read_request(bare, sim0.index).reasons


def test_every_reply_carries_an_answer_statement_so_a_quoted_reply_is_a_candidate(sim0):
  """A reply quoted in a later prompt is read as a candidate (an evaluation: it reasons), whatever its filler
  says; the filler's sentences are statements, which the intent reader need not tell apart from requests."""
  for bench in ("math", "mmlu_redux"):
    for item in load_items(bench)[:10]:
      reply = sim0.reply("llama-8b", base_messages(item), 1.0, 1.0, 0).text
      msgs = base_messages(item, blocks=(reply,), header="One agent solution:")
      view = reading.read_request(msgs, sim0.index)
      assert view.reasons and len(view.candidates) == 1, (bench, item.id)


# ---- competence and sampling -------------------------------------------------------------------


def test_fitted_expectations_reproduce_base_and_the_anchors_cot_rows(sim0):
  for bench in ("mmlu_redux", "math", "humaneval_plus"):
    items = load_items(bench)
    for model in ("gpt-5-mini", "qwen3-80b", "llama-8b"):
      base = np.mean([sim0.p_correct(model, it, reading.read_request(base_messages(it), sim0.index))
                      for it in items])
      assert abs(base - TARGETS[model][bench].accuracy) < 0.002, (model, bench)
      if model in PAPER_COT:
        cot = np.mean([sim0.p_correct(model, it, reading.read_request(base_messages(it, cot=True), sim0.index))
                       for it in items])
        assert abs(cot - PAPER_COT[model][bench] / 100) < 0.002, (model, bench)
        assert PAPER_BASE[model][bench] > 0


def test_direct_base_loop_reproduces_calibration_targets_under_the_real_graders(sim0):
  rng = np.random.default_rng(1)
  for bench in ("mmlu_redux", "math"):
    items = load_items(bench)
    idx = rng.choice(len(items), 300, replace=False)
    for model in ("gpt-5-mini", "llama-8b"):
      acc = np.mean([graders.grade(items[i], sim0.reply(model, base_messages(items[i]), 0.2, None, 0).text).correct
                     for i in idx])
      target = TARGETS[model][bench].accuracy
      assert abs(acc - target) < max(0.03, 3 * math.sqrt(target * (1 - target) / len(idx))), (model, bench, acc)


def test_greedy_decoding_is_deterministic_per_request_and_samples_diversify_with_temperature(sim0):
  items = load_items("mmlu_redux")[:300]
  agree = {}
  for temp in (0.0, 0.7, 1.0, 1.6):
    keys = np.array([[sim0.reply("qwen3-8b", base_messages(it), temp, None, k).answer_key for k in range(2)]
                     for it in items])
    agree[temp] = float(np.mean(keys[:, 0] == keys[:, 1]))
  assert agree[0.0] == 1.0
  assert agree[0.0] > agree[0.7] > agree[1.0] > agree[1.6]
  msgs = base_messages(items[0])
  assert sim0.reply("qwen3-8b", msgs, 0.0, None, 0) == sim0.reply("qwen3-8b", msgs, 0.0, None, 5)


def test_accuracy_is_flat_up_to_temperature_one_and_falls_above(sim0):
  items = load_items("mmlu_redux")[:400]
  acc = {t: np.mean([sim0.reply("qwen3-80b", base_messages(it), t, None, 0).correct for it in items])
         for t in (0.0, 0.5, 1.0, 1.5, 2.0)}
  assert max(acc[0.0], acc[0.5], acc[1.0]) - min(acc[0.0], acc[0.5], acc[1.0]) < 0.04
  assert acc[1.0] - acc[1.5] > 0.03 and acc[1.5] - acc[2.0] > 0.1
  assert P.temperature_penalty(1.0) == 0.0 and P.temperature_penalty(2.0) == P.TEMP_PENALTY


def test_slips_without_reasoning_are_fresh_per_sample_with_the_fitted_rate(sim0):
  """MATH Base = reasoned attempt x (1 - slip), the slip drawn per sample: among samples whose
  reasoned attempt is right (the persistent draw), the share lost is the slip rate."""
  items = load_items("math")
  rate = sim0.slip["qwen3-80b"]["math"]
  assert 0.1 < rate < 0.25 and sim0.slip["qwen3-80b"]["mmlu_redux"] == 0.0
  lost = kept = 0
  for it in items:
    view = reading.read_request(base_messages(it), sim0.index)
    reasoned = sigmoid(sim0.logit("qwen3-80b", it, view, 0.0, reasons=True))
    z = sim0._persistent("qwen3-80b", it)[0]  # T = 0: rho = 1, the persistent draw alone decides
    if phi(z) < reasoned:
      r = sim0.reply("qwen3-80b", base_messages(it), 0.0, None, 0)
      lost += not r.correct_drawn
      kept += r.correct_drawn
  share = lost / (lost + kept)
  assert abs(share - rate) < 3 * math.sqrt(rate * (1 - rate) / (lost + kept)) + 0.01


# ---- context ------------------------------------------------------------------------------------


def test_luce_choice_matches_hand_computed_weights():
  own = Answer(0, "A", False)
  cands = [Answer(1, "B", True), Answer(1, "B", True), Answer(2, "C", False)]
  agg = P.Aggregation(self_weight=0.5, self_confidence=2.0, support_power=1.5, recognition_max=1.0,
                      recognition_gap=1.0, dilution_tokens=6000.0)
  kappa = agg.recognition(1.0, 0.0)
  assert kappa == pytest.approx(1.0 / (1.0 + math.exp(-2.0)))  # 0.8808
  own_votes = 0.5 + 2.0 / (1.0 + math.exp(-1.0))  # the reader's own P(right) at logit 1: 1.9621
  assert agg.own_votes(sigmoid(1.0)) == pytest.approx(own_votes)
  w = {"A": own_votes ** 1.5, "B": 2.0 ** 1.5 * math.exp(kappa), "C": 1.0}
  sim = object.__new__(BehaviourModel)
  sim.aggregation = agg
  grid = np.linspace(0.0005, 0.9995, 2000)
  picks = [sim.choose(own, cands, 1.0, 0.0, u).text for u in grid]
  for letter, weight in w.items():
    assert abs(picks.count(letter) / len(grid) - weight / sum(w.values())) < 0.002
  long = sim.choose(own, cands, 1.0, 12000.0, 0.5)
  assert agg.recognition(1.0, 12000.0) == pytest.approx(kappa / 3) and long.text in "ABC"


def test_a_lapsing_reader_keeps_its_own_attempt_and_unplaced_answers_count_a_fraction_of_a_vote():
  """Sim v4 (issue 28 item 2): the reader lapses with probability lapse_max * (1 - p_self) and keeps its own
  attempt; an answer it cannot place as one to its item counts unplaced_support, not 1."""
  own = Answer(0, "A", False)
  agg = P.Aggregation(self_weight=0.5, self_confidence=1.0, support_power=2.0, recognition_max=0.0,
                      recognition_gap=0.0, lapse_max=0.6, unplaced_support=0.1)
  assert agg.lapse(0.5) == pytest.approx(0.3)
  sim = object.__new__(BehaviourModel)
  sim.aggregation = agg
  foreign = [Answer(1, "B", False, placed=False)] * 2
  # logit 0: p_self 0.5, lapse 0.3; u = 0.9999 picks the last answer when the reader weighs the candidates
  assert sim.choose(own, foreign, 0.0, 0.0, 0.9999, 0.29).text == "A"
  assert sim.choose(own, foreign, 0.0, 0.0, 0.9999, 0.31).text == "B"
  w_own, w_foreign = (0.5 + 1.0 * 0.5) ** 2, (2 * 0.1) ** 2  # 1 against 0.04
  grid = np.linspace(0.0005, 0.9995, 2000)
  picks = [sim.choose(own, foreign, 0.0, 0.0, u, 0.99).text for u in grid]
  assert abs(picks.count("B") / len(grid) - w_foreign / (w_own + w_foreign)) < 0.002
  placed = [Answer(1, "B", False)] * 2
  picks = [sim.choose(own, placed, 0.0, 0.0, u, 0.99).text for u in grid]
  assert abs(picks.count("B") / len(grid) - 4.0 / 5.0) < 0.002


def test_answers_from_another_question_are_unplaced_and_this_items_answers_placed(sim0):
  math_items = load_items("math")[:40]
  for i, item in enumerate(math_items):
    other = math_items[(i + 1) % len(math_items)]
    msgs = base_messages(item, cot=True, blocks=(f"The final answer is $\\boxed{{{item.answer}}}$.",
                                                  f"The final answer is $\\boxed{{{other.answer}}}$."),
                         header="Agent {k}:")
    view = reading.read_request(msgs, sim0.index)
    mine, theirs = sim0.candidate_answers(view)
    assert mine.placed and mine.correct
    assert theirs.placed == (reading.math_key(other.answer) in sim0._placed_keys(item))
  wrong = sim0.math_wrong[math_items[0].id][0]
  assert reading.math_key(wrong) in sim0._placed_keys(math_items[0])


def test_adoption_of_a_unanimous_correct_context_matches_the_closed_form(sim0):
  """Own attempt right with q (persistent z fixed); otherwise two gold votes beat the own wrong
  answer (its own weight s = self_weight + self_confidence * sigmoid(logit)) with
  2^b e^k / (2^b e^k + s^b): P(final right) = q + (1 - q) 2^b e^k / (2^b e^k + s^b)."""
  item = load_items("mmlu_redux")[5]
  gold_vote = f"The answer is ({item.answer})."
  msgs = lambda k: base_messages(item, cot=True, blocks=(gold_vote,) * 2, header="Agent {k}:" + " " * k)  # noqa: E731
  view = reading.read_request(msgs(0), sim0.index)
  for model in ("llama-8b", "gpt-5-mini"):
    logit = sim0.logit(model, item, view, 1.0)
    r = P.rho(1.0)
    zp = sim0._persistent(model, item)[0]
    q = phi((inv_phi(sigmoid(logit)) - math.sqrt(r) * zp) / math.sqrt(1 - r))
    agg = sim0.aggregation
    kappa = agg.recognition(logit, view.context_chars / P.CHARS_PER_TOKEN)
    pull = 2 ** agg.support_power * math.exp(kappa)
    expected = q + (1 - q) * pull / (pull + agg.own_votes(sigmoid(logit)) ** agg.support_power)
    n = 1500
    got = np.mean([sim0.reply(model, msgs(k), 1.0, None, k).correct for k in range(n)])
    assert abs(got - expected) < 3 * math.sqrt(expected * (1 - expected) / n) + 0.01, (model, got, expected)


@pytest.mark.xfail(strict=True, reason="issue 28 item 2: the v4 fit (support_power 6, weak readers lapse onto their "
                                       "own attempt) keeps the direction (Zhu et al. 2024: conformity falls with "
                                       "confidence) but by 2 points (0.097 vs 0.077), not 5; no published rate pins it "
                                       "(docs/simulator.md, misses)")
def test_a_strong_reader_resists_a_wrong_majority_more_than_a_weak_one(sim0):
  """Three agents agree on a wrong option: how often does the reader still end right?"""
  items = load_items("mmlu_redux")[:300]
  def resisted(model):
    right = 0
    for it in items:
      wrong = next(c for c in LETTERS if c != it.answer)
      r = sim0.reply(model, base_messages(it, cot=True, blocks=(f"The answer is ({wrong}).",) * 3), 1.0, None, 0)
      right += r.correct
    return right / len(items)
  # Fitted readers follow a unanimous majority often (support_power > 1). v3: the strong one resisted about
  # twice as often (0.19 vs 0.09 on these 300 items, ~3.5 sd); v4: 0.097 vs 0.077.
  assert resisted("gpt-5-mini") > resisted("llama-8b") + 0.05


def test_support_pulls_and_errors_spread_along_edges(sim0):
  items = load_items("math")[:150]
  wrong = _load_math_wrong()
  shares = {}
  for n_votes in (0, 1, 3):
    spread = 0
    for it in items:
      w = wrong[it.id][0]
      block = f"Working.\n\nTherefore, the final answer is $\\boxed{{{w}}}$."
      r = sim0.reply("qwen3-8b", base_messages(it, cot=True, blocks=(block,) * n_votes), 0.7, None, 0)
      spread += r.answer_key == reading.math_key(w)
    shares[n_votes] = spread / len(items)
  assert shares[0] < shares[1] < shares[3]


def test_weak_proposers_pull_a_synthesis_down(sim0):
  """A strong synthesizer over weak proposals ends below the same synthesizer over strong ones.

  (One weak proposal among strong ones costs little on the fitted mechanism, as in Self-MoA T3's
  MATH rows: -1.95 mixed against -1.15 pure, within noise at this size.)"""
  items = load_items("math")[:200]
  def accuracy(proposers):
    right = 0
    for it in items:
      proposals = [sim0.reply(m, roles.agent_messages(it, "Math Solver"), 0.2, None, k).text
                   for k, m in enumerate(proposers)]
      r = sim0.reply("qwen3-80b", roles.synthesizer_messages(it, "Math Solver", proposals), 0.2, None, 0)
      right += r.correct
    return right / len(items)
  assert accuracy(["qwen3-80b"] * 3) > accuracy(["llama-8b"] * 3) + 0.03


# ---- answers, pools, unknown questions --------------------------------------------------------------


def test_option_permutation_keeps_accuracy_under_the_real_grader(sim0):
  items = load_items("mmlu_redux")[:400]
  rng = np.random.default_rng(3)
  plain = permuted = 0
  for it in items:
    plain += graders.grade(it, sim0.reply("gpt-5-mini", base_messages(it), None, None, 0).text).correct
    order = rng.permutation(4)
    question = format_mmlu_question(it.meta["stem"], [it.meta["choices"][k] for k in order])
    gold = LETTERS[list(order).index(LETTERS.index(it.answer))]
    text = sim0.reply("gpt-5-mini", base_messages(it, question=question), None, None, 0).text
    permuted += extract.extract_mmlu_letter(text) == gold
  assert abs(plain - permuted) / len(items) < 0.04 and permuted / len(items) > 0.85


@pytest.mark.parametrize("bench", ["mmlu_redux", "math", "humaneval_plus"])
def test_an_unknown_question_gets_a_gradable_answer_in_its_format(sim0, bench):
  item = load_items(bench)[11]
  if bench == "mmlu_redux":
    question = format_mmlu_question("Which of these rivers is longest, in an invented world?", ["W", "X", "Y", "Z"])
  elif bench == "math":
    question = "What is the sum of 1234 and 4321 times seven?"
  else:
    question = 'def invented_task(xs: list) -> int:\n    """Return something invented."""\n'
  r = sim0.reply("qwen3-80b", base_messages(item, question=question, cot=True), 0.2, None, 0)
  assert r.item_id is None and r.correct is None
  if bench == "mmlu_redux":
    assert extract.extract_mmlu_letter(r.text) in LETTERS
  elif bench == "math":
    assert extract.extract_math_answer(r.text) is not None
  else:
    assert "def invented_task(xs: list) -> int:" in reading.code_block(r.text)
  generic = sim0.reply("gemma-3-27b", [{"role": "user", "content": "Tell me about tea in Britain."}], 0.7, None, 0)
  assert len(generic.text.split()) > 15 and "\\boxed" not in generic.text


def test_answers_graded_by_real_graders_match_the_sims_own_verdict(sim0):
  rng = np.random.default_rng(0)
  for bench, n in (("mmlu_redux", 150), ("math", 80)):
    items = load_items(bench)
    seen = set()
    for i in rng.choice(len(items), n, replace=False):
      r = sim0.reply("llama-8b", base_messages(items[i], cot=bool(i % 2)), 0.7, None, 0)
      assert graders.grade(items[i], r.text).correct == r.correct, (items[i].id, r.text)
      seen.add(r.correct)
    assert seen == {True, False}


def test_code_answers_right_and_wrong_are_judged_so_by_the_sandbox(sim0):
  items = load_items("humaneval_plus")
  _, variants = _load_programs()
  picked = {True: 0, False: 0}
  for item in items[:40]:
    for k in range(4):
      r = sim0.reply("llama-8b", base_messages(item), 1.0, None, k)
      if picked[r.correct] < 3:
        assert graders.grade(item, r.text).correct == r.correct, (item.id, r.text)
        picked[r.correct] += 1
  assert picked == {True: 3, False: 3}
  for item in items[::40]:
    for code in variants[item.id]:
      assert graders.grade(item, f"```python\n{code}\n```").correct, item.id


def test_precomputed_pools_cover_every_item():
  with gzip.open(MUTANTS_PATH, "rt") as f:
    data = json.load(f)
  assert data["unverified"] == {}
  mutants, variants = data["mutants"], data["variants"]
  items = load_items("humaneval_plus")
  assert all(mutants[it.id] for it in items) and sum(map(len, mutants.values())) > 600
  assert sum(map(len, variants.values())) > 300
  for it in items[:20]:
    canonical = reading.code_key(it.question + it.answer)
    assert all(reading.code_key(m) != canonical and f"def {it.meta['entry_point']}" in m for m in mutants[it.id])
  wrong = _load_math_wrong()
  assert sum(map(len, wrong.values())) > 3000
  for it in load_items("math"):
    assert wrong[it.id] and all(reading.math_key(w) != reading.math_key(it.answer) for w in wrong[it.id])


def test_tokens_follow_the_prompt_kind_and_reasoning_models_are_billed_for_hidden_reasoning(sim0):
  item = load_items("math")[20]
  base = sim0.reply("gpt-5-mini", base_messages(item), None, None, 0)
  cot = sim0.reply("gpt-5-mini", base_messages(item, cot=True), None, None, 0)
  synth = sim0.reply("gpt-5-mini", roles.synthesizer_messages(item, None, [cot.text, cot.text]), None, None, 0)
  assert base.kind == "answer" and cot.kind == "reasoning" and synth.kind == "aggregation"
  assert len(base.text) < len(cot.text) and 0 < base.reasoning_tokens < cot.reasoning_tokens
  assert synth.reasoning_tokens > base.reasoning_tokens
  assert sim0.reply("qwen3-80b", base_messages(item, cot=True), 0.2, None, 0).reasoning_tokens == 0


# ---- the request is all it sees -------------------------------------------------------------------


def test_only_the_request_text_changes_an_answer_over_http(sim0):
  item = load_items("math")[42]
  msgs = base_messages(item, cot=True)
  with start_sim_in_thread(SimConfig(seed=0)) as handle:
    async def go():
      client = openai.AsyncOpenAI(base_url=handle.base_url, api_key="unused", max_retries=0)
      plain = await client.chat.completions.create(model="qwen3-80b", messages=msgs, temperature=0.2,
                                                   max_tokens=4096, seed=3)
      # Method, role or stage names outside the prompt (metadata, user, headers) change nothing.
      tagged = await client.chat.completions.create(
          model="qwen3-80b", messages=msgs, temperature=0.2, max_tokens=4096, seed=3, user="hieramas-stage1",
          extra_body={"metadata": {"method": "hieramas", "role": "Inspector"}},
          extra_headers={"X-Method": "full_graph"})
      await client.close()
      return plain.choices[0].message.content, tagged.choices[0].message.content
    plain, tagged = asyncio.run(go())
  assert plain == tagged == sim0.reply("qwen3-80b", msgs, 0.2, None, 3).text


class _RecordingClient:
  """Answers through `inner` and keeps every request (model, messages, temperature, max_tokens, sample
  index) with its answer, so the same requests can be replayed through another client."""

  def __init__(self, inner):
    self.inner = inner
    self.calls = []

  async def chat(self, model, messages, *, temperature, max_tokens, sample_index=0):
    out = await self.inner.chat(model, messages, temperature=temperature, max_tokens=max_tokens,
                                sample_index=sample_index)
    self.calls.append(((model, [dict(m) for m in messages], temperature, max_tokens, sample_index), out))
    return out


def test_the_fit_shortcut_answers_the_runners_requests_byte_for_byte(sim0):
  """sim_fit's DirectSimClient (the server's `completion()` without the socket) and the runner's own
  client over HTTP to the served sim give the same text and usage for the requests the suite's methods
  send: a plain question (GPT-5: no temperature sent), a CoT code call, Mixture-of-Agents proposers at
  T 0.7 and the synthesis over their candidates, a chain's agent reading its predecessor and a decision node."""
  from hieramas_jax.experiment.sim_fit import DirectSimClient
  from hieramas_jax.llm.client import LLMClient
  from hieramas_jax.llm.endpoint import sim_endpoint
  from hieramas_jax.llm.registry import get_pool
  from hieramas_jax.mas import structures
  from hieramas_jax.methods.api import RunContext
  from hieramas_jax.methods.fixed_mas import FixedMAS
  from hieramas_jax.methods.single import SingleCall

  recorder = _RecordingClient(DirectSimClient(sim0))
  moa = FixedMAS("moa", temperature=0.7,
                 build=lambda b, p: structures.supernode(b, (p.strong, p.strong, "deepseek-v3"), p.strong))
  chain = FixedMAS("chain", lambda b, p: structures.chain(b, p.strong, 2))

  async def record():
    for pool, method, item in (("gpt-5-mini", SingleCall(), load_items("mmlu_redux")[30]),
                               ("qwen3-80b", SingleCall(cot=True), load_items("humaneval_plus")[3]),
                               ("qwen3-80b", moa, load_items("math")[7]),
                               ("gpt-5-mini", chain, load_items("mmlu_redux")[5])):
      await method.solve(RunContext(recorder, get_pool(pool), 0), item)
  asyncio.run(record())
  users = [request[1][-1]["content"] for request, _ in recorder.calls]
  assert any("Responses from models:" in u and "### Proposal 2:" in u for u in users)  # a synthesis with candidates
  assert any("responses of other agents" in u for u in users)
  assert len({request[4] for request, _ in recorder.calls}) > 1  # two samples of one proposer

  with start_sim_in_thread(SimConfig(seed=0)) as handle:
    async def replay():
      async with LLMClient(sim_endpoint(handle.base_url)) as client:  # no response cache: every call is served
        return [await client.chat(model, messages, temperature=t, max_tokens=limit, sample_index=k)
                for (model, messages, t, limit, k), _ in recorder.calls]
    served = asyncio.run(replay())
  for (request, direct), http in zip(recorder.calls, served, strict=True):
    assert (direct.text, direct.prompt_tokens, direct.completion_tokens, direct.cost_usd) == \
        (http.text, http.prompt_tokens, http.completion_tokens, http.cost_usd), request[0]


def test_params_hold_the_recorded_collaboration_fit():
  from hieramas_jax.paths import DATA_DIR
  record = json.loads((DATA_DIR / "sim" / "collaboration_fit.json").read_text())
  assert P.RHO_TAU == record["RHO_TAU"] and P.ERROR_SHARED_SPREAD == record["ERROR_SHARED_SPREAD"]
  for name, values in record["aggregation"]["profiles"].items():
    assert dataclasses.asdict(P.PROFILES[name]) == values, name


def test_the_in_process_fit_client_answers_like_the_server(sim0):
  from hieramas_jax.experiment.sim_fit import DirectSimClient
  from hieramas_jax.llm.registry import get_model
  item = load_items("mmlu_redux")[30]
  msgs = roles.agent_messages(item, "Critic")
  direct = asyncio.run(DirectSimClient(sim0).chat("gpt-5-mini", msgs, temperature=0.2, max_tokens=2048,
                                                  sample_index=2))
  with start_sim_in_thread(SimConfig(seed=0)) as handle:
    async def go():
      client = openai.AsyncOpenAI(base_url=handle.base_url, api_key="unused", max_retries=0)
      out = await client.chat.completions.create(model="gpt-5-mini", messages=msgs, max_completion_tokens=2048,
                                                 seed=2)
      await client.close()
      return out
    out = asyncio.run(go())
  assert direct.text == out.choices[0].message.content
  assert direct.cost_usd == pytest.approx(get_model("gpt-5-mini").cost(out.usage.prompt_tokens,
                                                                       out.usage.completion_tokens))
