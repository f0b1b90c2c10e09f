"""The named parameters of the simulated pool's behaviour model (sources in docs/simulator.md).

Kept in one place so the documentation, the fits and the server read the same numbers. Each
parameter is one of: *fitted* (by a named script, on the published rows it names), *sourced* (a
published figure), or *assumed* (a stated assumption). Nothing here is keyed to a method, a role
name or a configuration: the model sees only the request.
"""

from __future__ import annotations

import dataclasses
import math
from typing import Mapping

from hieramas_jax.sim.calibration_targets import COT_LOGIT_GAP, SLIP_RATE

# ---- own competence ---------------------------------------------------------------------------

# Item difficulty is a property of the simulated world, not of a run: it is drawn from this fixed
# seed so that theta.json (fitted against it) holds for every server seed.
DIFFICULTY_SEED = 0

# MATH: b = MATH_LEVEL_SLOPE * (level - 3) + N(0, MATH_LEVEL_NOISE).                      [assumed]
MATH_LEVEL_SLOPE = 0.6
MATH_LEVEL_NOISE = 0.3
# MMLU-Redux and HumanEval+: b ~ N(0, sigma) (latent difficulty shared by all models).      [assumed]
LATENT_DIFFICULTY_SIGMA = {"mmlu_redux": 1.5, "humaneval_plus": 1.5}

# A role whose domain matches the item's adds ROLE_FIT logits; a mismatched one subtracts it. [assumed]
ROLE_FIT = 0.2

# Temperature. Accuracy is flat for T <= TEMP_FLAT_UP_TO and falls as TEMP_PENALTY * (T - 1)^2
# logits above (Renze & Guven 2024: no significant change from 0.0 to 1.0, decline above 1.0,
# collapse towards 1.6 and beyond).                                                     [sourced shape]
TEMP_FLAT_UP_TO = 1.0
TEMP_PENALTY = 3.0
# Temperature assumed when a request omits it (OpenAI and OpenRouter default).
DEFAULT_TEMPERATURE = 1.0


def temperature_penalty(temperature: float) -> float:
  """Logits lost at temperature T (0 on [0, 1])."""
  return TEMP_PENALTY * max(temperature - TEMP_FLAT_UP_TO, 0.0) ** 2


# ---- sampling ---------------------------------------------------------------------------------

# Correlation of repeated samples of one model on one item: rho(T) = exp(-T / RHO_TAU), so T = 0
# is greedy (every sample index gives the same answer) and diversity grows with T.
# [fitted: python experiments/fit_sim.py, on the Self-Consistency rows]
RHO_TAU = 2.25
# The persistent part of a model's correctness is stratified over each benchmark (blocks of
# STRATUM_SIZE items of similar difficulty, Latin-hypercube style): each item's draw stays
# N(0, 1) and models stay independent of each other, but a model's accuracy over a benchmark
# lands close to its expectation instead of carrying +-3 points of luck on 164 tasks.
STRATUM_SIZE = 10


def rho(temperature: float) -> float:
  """Share of the latent answer variables that persists across samples at temperature T."""
  return math.exp(-max(temperature, 0.0) / RHO_TAU)


# ---- which answer ----------------------------------------------------------------------------

# Wrong answers come from a per-item pool (MMLU: the 3 other options; MATH: up to 8 near-misses
# checked wrong by the real grader; HumanEval+: up to 6 mutants failed by the real sandbox). Model m
# picks pool entry k with weight prior_k * exp(ERROR_SHARED_SPREAD[benchmark] * g[item, k]
# + ERROR_MODEL_SPREAD * h[model, item, k]): g is shared by every model (some mistakes are
# common), h is the model's own. prior_k = 1 / (k + 1) for the built pools (listed most plausible
# first), 1 for MMLU options. The shared spread is set per benchmark so that two different models
# that both err give the same wrong answer at the rate ERROR_COINCIDENCE (measured, with the
# within-model rate, as `error_coincidence` in results/calibration.json).
ERROR_COINCIDENCE = {
    # [sourced: Kim et al. 2025, "Correlated Errors in Large Language Models": on a leaderboard
    #  multiple-choice dataset, two models that both err agree ~60% of the time]
    "mmlu_redux": 0.60,
    # [assumed: free-form wrong answers spread over more candidates; half the multiple-choice rate]
    "math": 0.30,
    "humaneval_plus": 0.30,
}
ERROR_MODEL_SPREAD = 0.7        # [assumed]
# [fitted to ERROR_COINCIDENCE: python experiments/fit_sim.py]
ERROR_SHARED_SPREAD = {"math": 1.077, "mmlu_redux": 1.812, "humaneval_plus": 0.179}
# A correct HumanEval+ answer is the canonical function or one of up to 3 verified equivalent
# rewrites (renamed locals...), picked the same way with CORRECT_CODE_PRIOR weights. Two
# correct programs from two samples are rarely the same text.                              [assumed]
CORRECT_CODE_PRIOR = (1.0, 0.6, 0.4, 0.3)

# ---- context: what a model does with other agents' answers ------------------------------------

# A model that sees candidate answers in its prompt (other agents', its own earlier turn) forms its
# own attempt as usual, then picks its final answer among the distinct answers present (its own
# included) with Luce weights
#     w(a) = (count(a) + self_weight(p_self) * [a is its own attempt]) ** support_power
#            * exp(kappa * [a is correct])
#     self_weight(p_self) = self_weight + self_confidence * p_self
#     kappa = recognition_max * sigmoid(own logit + recognition_gap) / (1 + context_tokens / dilution_tokens)
# Support pulls (support_power > 1: a majority pulls more than its share); recognising a correct
# answer grows with the reader's competence on the item; a reader that is usually right weighs its
# own attempt more; long contexts dilute the recognition. Before weighing, the reader lapses with
# probability lapse_max * (1 - p_self): it answers with its own attempt, as if it had read nothing (a
# weak aggregator fails to integrate stronger proposals). A candidate whose answer the reader cannot
# place as an answer to this item (a MATH answer outside the item's correct and near-miss answers, a
# program for another function: text from another question) counts unplaced_support instead of 1.
# Every number is fitted on families 1-3 of the published evidence (MoA, Self-MoA, voting) by
# `experiments/fit_sim.py` (`experiment/sim_fit.py`, mechanism-level, relative effects matched by solo
# accuracy), except dilution_tokens (no published row varies context length at fixed candidates) and
# unplaced_support (no published adoption rate of another question's answers): both assumed.


@dataclasses.dataclass(frozen=True)
class Aggregation:
  """The parameters of what a reader does with the candidate answers in its prompt.

  A named profile (`PROFILES`) is one point of the fit's confidence region; a sim serves one
  profile, chosen by `--sim_profile`, and nothing else differs between profiles.
  """

  self_weight: float
  self_confidence: float
  support_power: float
  recognition_max: float
  recognition_gap: float
  lapse_max: float = 0.0
  dilution_tokens: float = 6000.0
  unplaced_support: float = 0.05

  def recognition(self, own_logit: float, context_tokens: float) -> float:
    """kappa: the log-weight bonus of a correct candidate for a reader with this own logit."""
    return (self.recognition_max / (1.0 + math.exp(-(own_logit + self.recognition_gap)))
            / (1.0 + context_tokens / self.dilution_tokens))

  def own_votes(self, p_self: float) -> float:
    """Votes the reader's own attempt counts for: more for a reader that is usually right."""
    return self.self_weight + self.self_confidence * p_self

  def lapse(self, p_self: float) -> float:
    """P(the reader does not weigh the candidates at all and answers with its own attempt).

    Why: a weak aggregator over stronger proposers ends below the best of them in the published rows
    (Mixture-of-Agents T8: dbrx -8.8, Qwen1.5-72B -1.8, Mixtral -1.0; Self-MoA T3 MATH -1.15), which a
    reader that only weighs support and recognition cannot do (issue 28: +4.4 above them). A reader that
    is usually wrong on the item (low p_self) is the one that fails to integrate what it reads.
    """
    return self.lapse_max * (1.0 - p_self)

  def luce_weight(self, count: float, own: bool, correct: bool, kappa: float, p_self: float = 0.0) -> float:
    """Unnormalised Luce weight of one distinct candidate answer (`count`: its support in the prompt,
    unplaced answers already scaled by `unplaced_support`)."""
    return ((count + (self.own_votes(p_self) if own else 0.0)) ** self.support_power
            * (math.exp(kappa) if correct else 1.0))


# Fields of `Aggregation` the fit chooses (dilution_tokens and unplaced_support are assumed).
FITTED_AGGREGATION = ("self_weight", "self_confidence", "support_power", "recognition_max", "recognition_gap",
                      "lapse_max")

# [fitted: python experiments/fit_sim.py -> hieramas_jax/data/sim/collaboration_fit.json `profiles`;
#  a test checks these literals agree with that file]
PROFILES: Mapping[str, Aggregation] = {
    "low": Aggregation(self_weight=0.1, self_confidence=0.0, support_power=3.0,
                       recognition_max=0.5, recognition_gap=-2.0, lapse_max=0.2),
    "fitted": Aggregation(self_weight=0.0, self_confidence=2.0, support_power=6.0,
                          recognition_max=0.5, recognition_gap=-1.0, lapse_max=0.2),
    "high": Aggregation(self_weight=0.0, self_confidence=2.0, support_power=6.0,
                        recognition_max=1.0, recognition_gap=2.0, lapse_max=0.05),
}
DEFAULT_PROFILE = "fitted"


class UnknownProfileError(ValueError):
  """A --sim_profile that is not one of PROFILES."""


def aggregation(profile: str = DEFAULT_PROFILE) -> Aggregation:
  """The named profile's aggregation parameters (raises UnknownProfileError)."""
  try:
    return PROFILES[profile]
  except KeyError:
    raise UnknownProfileError(f"unknown sim profile {profile!r}; known: {', '.join(PROFILES)}") from None


# ---- text, tokens, latency ----------------------------------------------------------------------

# Tokens: ~CHARS_PER_TOKEN characters per token (the usual English/BPE rule of thumb), plus
# MESSAGE_OVERHEAD_TOKENS per message and REPLY_PRIMING_TOKENS per request (OpenAI's chat format).
CHARS_PER_TOKEN = 4.0
MESSAGE_OVERHEAD_TOKENS = 4
REPLY_PRIMING_TOKENS = 3

# Prompt kinds a reply's length depends on: "answer" (nothing asks to reason), "reasoning" (asked to
# reason, no candidates), "aggregation" (candidates to weigh: an evaluation, whatever the wording).
KINDS = ("answer", "reasoning", "aggregation")

# Visible prose tokens before the answer statement, by domain and kind, for a model of verbosity 1
# (code replies add the program itself). [estimated: typical lengths of chat replies; the paper's costs of
# structures under study (`cost_check` in results/calibration.json) are shown, never used to set them]
VISIBLE_TOKENS = {
    "knowledge": {"answer": 30, "reasoning": 130, "aggregation": 150},
    "math": {"answer": 110, "reasoning": 330, "aggregation": 360},
    "code": {"answer": 0, "reasoning": 60, "aggregation": 80},
    "generic": {"answer": 70, "reasoning": 140, "aggregation": 140},
}
# Hidden reasoning of reasoning models: "low" effort when nothing asks it to reason, "high" when
# the prompt does (or asks to evaluate). A reasoning model always reasons and is billed for it; how
# long follows the prompt, and so does its competence (the cue term). Length on an item of difficulty
# b = mean * exp(REASONING_DIFFICULTY_SLOPE * b) * lognormal(0, REASONING_SIGMA) / norm, where norm
# (E over the benchmark's items of exp(slope * b), times exp(sigma^2 / 2)) makes `mean` the mean over
# the benchmark's items: the quantity published figures report.
REASONING_DIFFICULTY_SLOPE = 0.2   # [assumed]
REASONING_SIGMA = 0.25             # [assumed: spread of one item's lengths across samples]

# Published per-model response lengths (tokens per response, mean over a benchmark), each with its
# locator (docs/calibration-sources.md, "Response lengths"). A figure sets the mean *total* completion
# (hidden reasoning + visible answer) of its (model, domain) cell; every other cell of BEHAVIOUR and
# VISIBLE_TOKENS is an assumption, listed as such in results/calibration.json.
#   R1-14B MATH: DeepSeek-R1-Distill-Qwen-14B on the 5,000-item MATH test set, 2944.8 tokens per
#   response (86.86% accuracy); by subject 1708.6 (prealgebra) to 3958.0 (intermediate algebra)
#   [LEN-R1D: public GitHub evaluation summary "DeepSeek-R1-Distill-Qwen Models - Math Evaluation
#   Results", overall table, row deepseek-ai/DeepSeek-R1-Distill-Qwen-14B]. Only the mean is used;
#   the spread (REASONING_SIGMA, the difficulty slope) stays assumed.
PUBLISHED_RESPONSE_TOKENS = {
    ("deepseek-r1-14b", "math"): (2944.8, "LEN-R1D: MATH test (5,000 items), mean tokens per response"),
}
R1_MATH_RESPONSE_TOKENS = PUBLISHED_RESPONSE_TOKENS[("deepseek-r1-14b", "math")][0]


@dataclasses.dataclass(frozen=True)
class ModelBehaviour:
  """Per-model style assumptions (stated in the docs).

  Attributes:
    verbosity: multiplies visible prose length.
    reasoning_low / reasoning_high: mean hidden reasoning tokens per domain at low / high effort
      (empty = not a reasoning model).
    latency_base_s: time to first token.
    latency_per_token_s: seconds per completion token (hidden reasoning included).
  """

  verbosity: float
  reasoning_low: Mapping[str, float]
  reasoning_high: Mapping[str, float]
  latency_base_s: float
  latency_per_token_s: float

  @property
  def reasons_hidden(self) -> bool:
    return bool(self.reasoning_high)

  def reasoning_mean(self, domain: str, high: bool) -> float:
    table = self.reasoning_high if high else self.reasoning_low
    return float(table.get(domain, 0.0))


_NONE: Mapping[str, float] = {}

BEHAVIOUR: Mapping[str, ModelBehaviour] = {
    "gpt-5-mini": ModelBehaviour(1.0, {"knowledge": 60, "math": 350, "code": 250, "generic": 60},
                                 {"knowledge": 130, "math": 800, "code": 500, "generic": 120}, 0.8, 1 / 90),
    "gpt-5-nano": ModelBehaviour(0.9, {"knowledge": 90, "math": 450, "code": 300, "generic": 80},
                                 {"knowledge": 180, "math": 900, "code": 600, "generic": 150}, 0.6, 1 / 140),
    "qwen3-80b": ModelBehaviour(1.3, _NONE, _NONE, 0.5, 1 / 120),
    "qwen3-8b": ModelBehaviour(1.2, _NONE, _NONE, 0.3, 1 / 150),
    "deepseek-v3": ModelBehaviour(1.1, _NONE, _NONE, 0.9, 1 / 40),
    # A thinking distillation: it thinks at length whatever the prompt says. MATH: the published
    # mean response (PUBLISHED_RESPONSE_TOKENS) less the visible answer of each prompt kind, so a
    # Base and a CoT prompt get the same total; other domains [assumed].
    "deepseek-r1-14b": ModelBehaviour(
        1.0, {"knowledge": 350, "math": R1_MATH_RESPONSE_TOKENS - VISIBLE_TOKENS["math"]["answer"],
              "code": 600, "generic": 200},
        {"knowledge": 400, "math": R1_MATH_RESPONSE_TOKENS - VISIBLE_TOKENS["math"]["reasoning"],
         "code": 650, "generic": 200}, 0.5, 1 / 70),
    "llama-8b": ModelBehaviour(0.9, _NONE, _NONE, 0.3, 1 / 160),
    "gemma-3-27b": ModelBehaviour(1.1, _NONE, _NONE, 0.5, 1 / 60),
}

__all__ = ["COT_LOGIT_GAP", "SLIP_RATE"]
