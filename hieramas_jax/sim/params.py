"""The named parameters of the simulated pool's behaviour model (sources in docs/simulator.md).

Kept in one place so the documentation, the theta fit and the server read the same numbers.
"""

from __future__ import annotations

import dataclasses
import math
from typing import Mapping

from hieramas_jax.sim.calibration_targets import COT_LOGIT_GAP

# Item difficulty is a property of the simulated world, not of a run: it is drawn from this fixed
# seed so that theta.json (fitted against it) holds for every server seed.
DIFFICULTY_SEED = 0

# MATH: b = MATH_LEVEL_SLOPE * (level - 3) + N(0, MATH_LEVEL_NOISE).
MATH_LEVEL_SLOPE = 0.6
MATH_LEVEL_NOISE = 0.3
# MMLU-Redux and HumanEval+: b ~ N(0, sigma) (latent difficulty shared by all models).
LATENT_DIFFICULTY_SIGMA = {"mmlu_redux": 1.5, "humaneval_plus": 1.5}

# A role whose domain matches the item's adds ROLE_FIT logits; a mismatched one subtracts it.
ROLE_FIT = 0.2

# Correlation of repeated samples of one model on one item: rho(T) = RHO0 * exp(-T / RHO_TAU).
RHO0 = 0.95
RHO_TAU = 1.5
# The persistent part of a model's correctness is stratified over each benchmark: items sorted by
# difficulty are cut into blocks of STRATUM_SIZE, and within a block the persistent uniforms are a
# random permutation of a jittered grid (Latin-hypercube style). Each item's draw stays N(0, 1)
# marginally and models stay independent of each other, but a model's accuracy over a whole
# benchmark lands close to its expectation instead of carrying +-2-3 points of luck on
# 164 HumanEval+ tasks.
STRATUM_SIZE = 10
# Temperature assumed when a request omits it (OpenAI and OpenRouter default).
DEFAULT_TEMPERATURE = 1.0


def rho(temperature: float) -> float:
  """Share of the latent correctness variable that persists across samples at temperature T."""
  return RHO0 * math.exp(-max(temperature, 0.0) / RHO_TAU)


# Context (other agents' answers in the prompt). With n votes whose most common answer has share
# `agreement`, and the model's own competence p_self, P(adopt the majority) =
#   ADOPT_MAX[kind] * agreement**AGREE_POWER * (1 - exp(-n / VOTE_SCALE))
#   * (1 - COMPETENCE_DAMPING * p_self) / (1 + context_tokens / DILUTION_TOKENS)
# kind: "peer" (a role agent reading predecessors), "synth" (MoA aggregation prompt),
# "decision" (final decision maker). More votes help with diminishing returns; long contexts
# dilute the pull.
ADOPT_MAX = {"peer": 0.7, "synth": 0.95, "decision": 0.9}
AGREE_POWER = 2.0
VOTE_SCALE = 1.0
COMPETENCE_DAMPING = 0.5
DILUTION_TOKENS = 6000.0


def p_adopt(kind: str, n_votes: int, agreement: float, p_self: float, context_tokens: float) -> float:
  """Probability that a model replaces its own answer by the context's majority answer."""
  return (ADOPT_MAX[kind] * agreement ** AGREE_POWER * (1.0 - math.exp(-n_votes / VOTE_SCALE))
          * (1.0 - COMPETENCE_DAMPING * p_self) / (1.0 + context_tokens / DILUTION_TOKENS))


# Wrong answers: MMLU distractor preference logits ~ N(0, DISTRACTOR_SPREAD) per item (shared by
# all models, so their errors correlate); MATH near-misses and code mutants are picked with these
# weights in the order they were built (most plausible first).
DISTRACTOR_SPREAD = 1.0
LISTED_WRONG_WEIGHTS = (0.55, 0.25, 0.12, 0.08)

# Tokens: ~CHARS_PER_TOKEN characters per token (the usual English/BPE rule of thumb), plus
# MESSAGE_OVERHEAD_TOKENS per message and REPLY_PRIMING_TOKENS per request (OpenAI's chat format).
CHARS_PER_TOKEN = 4.0
MESSAGE_OVERHEAD_TOKENS = 4
REPLY_PRIMING_TOKENS = 3


@dataclasses.dataclass(frozen=True)
class ModelBehaviour:
  """Per-model style assumptions (not calibrated to anything measured; stated in the docs).

  Attributes:
    verbosity: multiplies the number of visible reasoning sentences.
    reasoning_tokens: mean hidden reasoning tokens per domain (0 = not a reasoning model).
    latency_base_s: time to first token.
    latency_per_token_s: seconds per completion token (hidden reasoning included).
  """

  verbosity: float
  reasoning_tokens: Mapping[str, float]
  latency_base_s: float
  latency_per_token_s: float


_NO_REASONING = {"code": 0.0, "math": 0.0, "knowledge": 0.0, "generic": 0.0}

BEHAVIOUR: Mapping[str, ModelBehaviour] = {
    "gpt-5-mini": ModelBehaviour(1.0, {"code": 550, "math": 700, "knowledge": 250, "generic": 120},
                                 0.8, 1 / 90),
    "gpt-5-nano": ModelBehaviour(0.9, {"code": 650, "math": 800, "knowledge": 350, "generic": 150},
                                 0.6, 1 / 140),
    "qwen3-80b": ModelBehaviour(1.3, _NO_REASONING, 0.5, 1 / 120),
    "qwen3-8b": ModelBehaviour(1.2, _NO_REASONING, 0.3, 1 / 150),
    "deepseek-v3": ModelBehaviour(1.1, _NO_REASONING, 0.9, 1 / 40),
    "deepseek-r1-14b": ModelBehaviour(1.0, {"code": 650, "math": 750, "knowledge": 400,
                                            "generic": 200}, 0.5, 1 / 70),
    "llama-8b": ModelBehaviour(0.9, _NO_REASONING, 0.3, 1 / 160),
    "gemma-3-27b": ModelBehaviour(1.1, _NO_REASONING, 0.5, 1 / 60),
}
# Hidden reasoning length: mean * exp(REASONING_DIFFICULTY_SLOPE * b) * lognormal(0, SIGMA).
# Means are kept so that under the reference code's 2,048-token cap fewer than ~0.5% of calls
# run out of budget (a truncated reply has no answer, which would bias calibration).
REASONING_DIFFICULTY_SLOPE = 0.2
REASONING_SIGMA = 0.25

# Visible reasoning sentences per domain for (Base prompt, step-by-step prompt), before verbosity.
SENTENCES = {"knowledge": (1, 4), "math": (2, 6), "code": (0, 3), "generic": (3, 3)}

__all__ = ["COT_LOGIT_GAP"]
