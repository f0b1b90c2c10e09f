"""Sim v3: the aggregation mechanism, its fit and profiles, blindness to wording, truncation.

Hand-computed probabilities for each mechanism; the fit reproduced from a fresh start on a small
grid; the same candidates under prompt wordings of other codebases and neutral ones; a small
max_tokens; profiles that change only the fitted aggregation parameters.
"""

from __future__ import annotations

import dataclasses
import json
import math

import numpy as np
import pytest

from hieramas_jax.benchmarks import graders
from hieramas_jax.benchmarks.data import load_items
from hieramas_jax.experiment import aggregation_fit as A
from hieramas_jax.experiment.backend import sim_endpoint_name
from hieramas_jax.mas import roles
from hieramas_jax.sim import mechanism as M
from hieramas_jax.sim import params as P
from hieramas_jax.sim import reading
from hieramas_jax.sim.model import BehaviourModel
from hieramas_jax.sim.server import SimConfig, SimConfigError, completion

FORMAT = roles.ANSWER_FORMAT


@pytest.fixture(scope="module")
def sim0() -> BehaviourModel:
  return BehaviourModel(seed=0)


# ---- the mechanism, vectorised, against hand-computed weights --------------------------------------


def test_vectorised_luce_choice_matches_hand_computed_probabilities():
  agg = P.Aggregation(self_weight=0.5, self_confidence=1.0, support_power=2.0, recognition_max=1.0,
                      recognition_gap=0.0, dilution_tokens=6000.0)
  n = 40000
  own = np.full(n, 2)                       # own attempt: wrong answer 2
  cands = np.tile([0, 1, 1], (n, 1))        # one correct, two votes for wrong answer 1
  logit = np.zeros(n)                       # p_self = 0.5, kappa = 1.0 * sigmoid(0) / (1 + 600/6000)
  u = np.random.default_rng(0).random(n)
  got = M.luce_choice(agg, own, cands, logit, 600.0, u, 4)
  kappa = 0.5 / 1.1
  w = {0: 1.0 * math.exp(kappa), 1: 2.0 ** 2, 2: (0.5 + 0.5) ** 2}  # 1.5755, 4, 1
  total = sum(w.values())
  for a, weight in w.items():
    assert abs(np.mean(got == a) - weight / total) < 0.01, a
  assert not np.any(got == 3)  # an answer nobody gave is never chosen


def test_vectorised_lapse_keeps_the_own_attempt_with_probability_lapse_max_times_one_minus_p_self():
  agg = P.Aggregation(self_weight=0.0, self_confidence=0.0, support_power=2.0, recognition_max=0.0,
                      recognition_gap=0.0, lapse_max=0.4)
  n = 40000
  rng = np.random.default_rng(2)
  own = np.full(n, 2)                       # own attempt wrong; own votes 0: only a lapse keeps it
  cands = np.tile([0, 0, 0], (n, 1))
  logit = np.zeros(n)                       # p_self 0.5: lapse 0.2
  got = M.luce_choice(agg, own, cands, logit, 0.0, rng.random(n), 4, rng.random(n))
  assert abs(np.mean(got == 2) - 0.2) < 0.01 and np.all((got == 0) | (got == 2))
  assert np.all(M.luce_choice(agg, own, cands, logit, 0.0, rng.random(n), 4) == 0)  # no lapse drawn


def test_vote_is_a_plurality_with_uniform_tie_breaks():
  answers = np.array([[0, 1, 1], [0, 1, 2], [2, 2, 0]] * 20000)
  u = np.random.default_rng(1).random(answers.shape[0])
  got = M.vote(answers, u, 3)
  assert np.all(got[0::3] == 1) and np.all(got[2::3] == 2)
  tied = got[1::3]
  for a in range(3):  # three-way tie: each 1/3
    assert abs(np.mean(tied == a) - 1 / 3) < 0.015


def test_a_world_gives_each_model_its_solo_accuracy_and_correlates_samples_of_one_model():
  world = M.World(M.Population(n_items=20000, n_wrong=3, shared_spread=0.0))
  rng = np.random.default_rng(0)
  ans, _ = world.attempts("x", 0.7, 2, 0.0, rng)
  assert abs(M.accuracy(ans[:, 0]) - 70.0) < 1.0
  assert np.array_equal(ans[:, 0], ans[:, 1])  # T = 0: rho = 1, the two samples are the same
  ans, _ = world.attempts("x", 0.7, 2, 2.0, rng)
  both = np.mean((ans[:, 0] == 0) & (ans[:, 1] == 0))
  assert 0.49 + 0.01 < both < 0.7  # correlated (more than independent 0.49), not identical


# ---- the fit -----------------------------------------------------------------------------------------


SMALL_GRID = {"self_weight": (0.25, 1.0), "self_confidence": (0.0, 2.0), "support_power": (1.0, 3.0),
              "recognition_max": (0.25, 1.0), "recognition_gap": (1.0,)}


def test_the_fit_reproduces_its_targets_from_a_fresh_start():
  record = A.fit_aggregation(n_items=3000, grid=SMALL_GRID, progress=lambda _: None)
  fit_rows = [r for r in record["rows"] if r["use"] == "fit"]
  assert fit_rows and all(r["holds"] for r in fit_rows), [(r["name"], r["measured"]) for r in fit_rows]
  # Old assumed values (own attempt ~2.8 votes, proportional support) fit worse than the fitted point.
  prepared = A.prepare(n_items=3000)
  fitted = P.Aggregation(**record["profiles"]["fitted"])
  old = P.Aggregation(self_weight=1.0, self_confidence=2.0, support_power=1.0, recognition_max=0.25,
                      recognition_gap=1.0)
  assert A.chi2(prepared, fitted) < A.chi2(prepared, old)
  # Low and high bracket the fitted point's synthesis strength, inside the confidence region.
  s = {k: A.strength(prepared, P.Aggregation(**v)) for k, v in record["profiles"].items()}
  assert s["low"] <= s["fitted"] <= s["high"]
  for v in record["profiles"].values():
    assert A.chi2(prepared, P.Aggregation(**v)) <= record["best_chi2"] + A.DELTA_CHI2 + 1e-9


def test_rows_keep_fit_holdout_check_and_validation_apart_and_never_use_methods_under_study():
  uses = {r.use for r in A.ROWS}
  assert uses == {"fit", "holdout", "check", "validation"}
  under_study = ("hieramas", "gdesigner", "masrouter", "aflow", "full_graph", "random_graph")
  assert not any(m in (r.name + r.locator).lower().replace("-", "_") for r in A.ROWS for m in under_study)
  # Internal hold-outs: Self-MoA's MATH rows and three MoA aggregators are predicted, not fitted.
  held = {r.name for r in A.ROWS if r.use == "holdout"}
  assert {"self_moa_T3/math_6m_by_i", "moa_T8/wizard", "moa_T8/qwen72b", "moa_T8/dbrx"} <= held


def test_params_profiles_are_the_recorded_fit():
  from hieramas_jax.paths import DATA_DIR
  record = json.loads((DATA_DIR / "sim" / "collaboration_fit.json").read_text())
  for name, values in record["aggregation"]["profiles"].items():
    assert dataclasses.asdict(P.PROFILES[name]) == values, name


# ---- profiles --------------------------------------------------------------------------------------


def test_profiles_differ_only_in_the_fitted_aggregation_parameters():
  fields = {f.name for f in dataclasses.fields(P.Aggregation)}
  for name, agg in P.PROFILES.items():
    changed = {f for f in fields if getattr(agg, f) != getattr(P.PROFILES["fitted"], f)}
    assert changed <= set(P.FITTED_AGGREGATION), (name, changed)
  assert P.PROFILES["low"] != P.PROFILES["high"]


def test_a_profile_changes_readers_of_candidates_and_nothing_else():
  low, high = BehaviourModel(0, "low"), BehaviourModel(0, "high")
  items = load_items("math")[:60]
  for it in items:  # no candidates: the very same reply, tokens included
    msgs = roles.single_model_messages(it, cot=True)
    a, b = low.reply("qwen3-80b", msgs, 1.0, None, 1), high.reply("qwen3-80b", msgs, 1.0, None, 1)
    assert (a.text, a.reasoning_tokens) == (b.text, b.reasoning_tokens)
  wrong = [low.math_wrong[it.id][0] for it in items]
  differ = 0
  for it, w in zip(items, wrong):  # a wrong majority and one right candidate: profiles read them differently
    msgs = _with_candidates(it, "Give the best final answer.", [w, w, it.answer])
    differ += low.reply("qwen3-80b", msgs, 1.0, None, 0).correct != high.reply("qwen3-80b", msgs, 1.0, None, 0).correct
  assert differ > 0


def test_the_profile_is_in_the_config_the_fingerprint_and_the_endpoint_name(sim0):
  with pytest.raises(SimConfigError):
    SimConfig(profile="medium")
  assert "--profile=high" in SimConfig(profile="high").to_args()
  assert ":high:" in sim_endpoint_name(0, "high") and ":fitted:" in sim_endpoint_name(0)
  from hieramas_jax.experiment.provenance import provenance  # pylint: disable=import-outside-toplevel
  assert provenance(seed=0, flags={"sim_profile": "low"}, backend="sim")["label"].startswith(
      "simulated pool (profile low)")
  item = load_items("math")[0]
  req = {"model": "qwen3-80b", "messages": roles.single_model_messages(item, cot=True), "temperature": 1.0,
         "top_p": None, "limit": None, "sample_index": 0}
  body, _ = completion(SimConfig(profile="fitted"), sim0, req, b"x")
  assert body["system_fingerprint"].endswith("_fitted")


# ---- blind to wording --------------------------------------------------------------------------------

# Instructions around the same candidates, from other codebases (verbatim or nearly) and neutral ones.
WORDINGS = {
    # Mixture-of-Agents (togethercomputer/MoA), aggregate-and-synthesize system prompt.
    "moa": roles.MOA_SYNTHESIS_PROMPT,
    # Du et al. llm_multiagent_debate, the debate round.
    "du_debate": ("These are the solutions to the problem from other agents: {c} Using the reasoning from other "
                  "agents as additional advice, can you give an updated answer? Examine your solution and that "
                  "other agents step by step. Put your answer in the form \\boxed{{answer}} at the end."),
    # AFlow ScEnsemble operator.
    "aflow": ("Several solutions have been generated to address the given question. They are as follows:\n{c}\n\n"
              "Carefully evaluate these solutions and identify the answer that appears most frequently across "
              "them. This consistency in answers is crucial for determining the most reliable solution."),
    # Decision-node ("FinalRefer") roles of the GDesigner / MASRouter code lineage: a MATH variant found in
    # a public repository of that lineage, and the MMLU role as recalled (not verified verbatim).
    "gdesigner": ("You are the top decision-maker. Good at verifying mathematical proofs, checking Python code "
                  "results, and synthesizing a final correct answer formatted in LaTeX.\n{c}"),
    "masrouter": ("You are the top decision-maker and are good at analyzing and summarizing other people's "
                  "opinions, finding errors and giving final answers.\nThe outputs of other agents:\n{c}"),
    # Neutral.
    "neutral": "Give the best final answer.\n{c}",
    "bare": "{c}",
    "question_only": "Which of these is right?\n{c}",
}


def _with_candidates(item, wording: str, answers) -> list[dict]:
  c = "\n\n".join(f"Solution {k}: ... so the answer is \\boxed{{{a}}}." for k, a in enumerate(answers, 1))
  text = wording.format(c=c) if "{c}" in wording else wording + "\n\n" + c
  return [{"role": "user", "content": f"{item.question}\n\n{FORMAT['math']}\n\n{text}"}]


def test_same_candidates_score_the_same_under_any_wording(sim0):
  items = load_items("math")[:250]
  acc = {}
  for name, wording in WORDINGS.items():
    right = 0
    for it in items:
      w = sim0.math_wrong[it.id][0]
      msgs = _with_candidates(it, wording, [it.answer, w, w])
      view = reading.read_request(msgs, sim0.index)
      assert view.reasons and len(view.candidates) == 3, name  # the same reading whatever the words
      right += bool(sim0.reply("qwen3-80b", msgs, 1.0, None, 0).correct)
    acc[name] = right / len(items)
  p = float(np.mean(list(acc.values())))
  noise = 3 * math.sqrt(2 * p * (1 - p) / len(items))  # the per-request draws are the only difference
  assert max(acc.values()) - min(acc.values()) <= noise, acc


# ---- truncation ----------------------------------------------------------------------------------------


def test_a_small_max_tokens_cuts_the_reply_and_a_reasoning_model_may_return_nothing(sim0):
  item = load_items("math")[3]
  msgs = roles.single_model_messages(item, cot=True)
  cut = {"model": "gpt-5-mini", "messages": msgs, "temperature": None, "top_p": None, "limit": 16,
         "sample_index": 0}
  body, _ = completion(SimConfig(), sim0, cut, b"x")
  choice = body["choices"][0]
  assert choice["finish_reason"] == "length" and choice["message"]["content"] == ""
  assert body["usage"]["completion_tokens_details"]["reasoning_tokens"] == 16
  body, _ = completion(SimConfig(), sim0, {**cut, "model": "qwen3-80b", "limit": 20}, b"y")
  text = body["choices"][0]["message"]["content"]
  assert body["choices"][0]["finish_reason"] == "length" and 0 < len(text) <= 20 * P.CHARS_PER_TOKEN
  assert not graders.grade_math(item, text).correct  # the boxed answer was cut off
  body, _ = completion(SimConfig(), sim0, {**cut, "limit": 100000}, b"z")
  assert body["choices"][0]["finish_reason"] == "stop"


def test_published_response_lengths_are_the_sims_means_within_sampling_error(sim0):
  """Each sourced (model, domain) mean (params.PUBLISHED_RESPONSE_TOKENS) against the sim's mean completion
  (hidden reasoning + visible answer) over the benchmark's items, Base and CoT prompts alike."""
  from hieramas_jax.sim.truncation import measure_lengths  # pylint: disable=import-outside-toplevel
  bench_of = {"math": "math", "knowledge": "mmlu_redux", "code": "humaneval_plus"}
  for (model, domain), (published, _) in P.PUBLISHED_RESPONSE_TOKENS.items():
    for cot in (False, True):
      totals = np.asarray(measure_lengths(sim0, model, bench_of[domain], cot), float)
      se = totals.std(ddof=1) / math.sqrt(len(totals))
      assert abs(totals.mean() - published) <= 3 * se + 0.02 * published, (model, domain, cot, totals.mean())


def test_the_suites_cap_truncates_the_r1_distill_on_math_most_of_the_time(sim0):
  """At the reference code's max_tokens 2048 a 2,945-token mean response is cut on most MATH items (a finding
  reported in docs/simulator.md); the other models stay under the cap."""
  from hieramas_jax.sim.truncation import measure_lengths  # pylint: disable=import-outside-toplevel
  r1 = np.asarray(measure_lengths(sim0, "deepseek-r1-14b", "math", False))
  assert (r1 > 2048).mean() > 0.5
  assert (np.asarray(measure_lengths(sim0, "qwen3-80b", "math", True)) > 2048).mean() == 0


def test_the_profile_likelihood_is_the_least_chi2_per_value_and_flags_free_and_edge_parameters():
  from hieramas_jax.experiment.aggregation_fit import profile_likelihood  # pylint: disable=import-outside-toplevel
  points = [(1.0, (0, 0)), (9.0, (0, 1)), (2.0, (1, 0)), (3.0, (1, 1)), (20.0, (2, 0)), (12.0, (2, 1))]
  pl = profile_likelihood(points, ["a", "b"])
  assert pl["a"]["delta_chi2"] == {"0": 0.0, "1": 1.0, "2": 11.0} and pl["a"]["best"] == 0
  assert pl["a"]["edge"] and not pl["a"]["free"]
  assert pl["b"]["delta_chi2"] == {"0": 0.0, "1": 2.0} and pl["b"]["free"]


def test_the_profile_likelihood_table_says_which_region_values_the_low_and_high_profiles_span():
  from hieramas_jax.report.calibration import aggregation_fit_markdown  # pylint: disable=import-outside-toplevel
  agg = {"region_size": 3, "delta_chi2": 4.0, "best_chi2": 1.0, "n_items": 10, "rows": [],
         "profiles": {"low": {"a": 0.0, "b": 1.0}, "fitted": {"a": 1.0, "b": 1.0}, "high": {"a": 2.0, "b": 2.0}},
         "profile_likelihood": {
             "a": {"delta_chi2": {"0": 1.0, "1": 0.0, "2": 3.9, "3": 9.0}, "best": 1.0, "edge": False, "free": False},
             "b": {"delta_chi2": {"0": 0.5, "1": 0.0, "2": 0.1}, "best": 1.0, "edge": False, "free": True}}}
  lines = {line.split(" |")[0]: line for line in aggregation_fit_markdown(agg) if line.startswith("| a |")
           or line.startswith("| b |")}
  assert lines["| a"].endswith("| 0 to 2 | 0 / 1 / 2 | yes |")       # 3 is outside the region (Δχ² 9)
  assert lines["| b"].endswith("| 0 to 2 | 1 / 1 / 2 | **no** |")    # 0 is inside, no profile reaches it
