"""The LLM pool: names, provider ids, frozen prices, profile texts and request quirks.

Prices are frozen here (never fetched live, unlike the reference code) so every cost figure
in the suite is reproducible; `PRICE_TABLE_DATE` goes into every result's provenance.
"""

from __future__ import annotations

import dataclasses
import difflib
from typing import Mapping

from hieramas_jax.errors import UserError

PRICE_TABLE_DATE = "2026-11-30"
PRICE_TABLE_SOURCE = "docs/calibration-sources.md price table (per-model sources below), frozen 2026-11-30"

SKIP = "skip"  # the policy's extra choice; never a model


@dataclasses.dataclass(frozen=True)
class ModelSpec:
  """One LLM of the pool.

  Attributes:
    name: short name used everywhere in the suite (and as the sim's model id).
    provider_id: OpenRouter id used by the reference code.
    price_in: USD per 1M prompt tokens (frozen).
    price_out: USD per 1M completion tokens (frozen).
    price_source: where the price comes from.
    profile: profile text embedded for LLM selection (paper Table 12).
    fixed_temperature: the model only accepts its default temperature (temperature is
      dropped from requests); GPT-5 family.
    max_tokens_field: the request field that caps completion length.
  """

  name: str
  provider_id: str
  price_in: float
  price_out: float
  price_source: str
  profile: str
  fixed_temperature: bool = False
  max_tokens_field: str = "max_tokens"

  def cost(self, prompt_tokens: int, completion_tokens: int) -> float:
    """USD for one call under the frozen price table."""
    return (prompt_tokens * self.price_in + completion_tokens * self.price_out) / 1e6


_GPT5_NOTE = ("(profile written by this project in the style of paper Table 12; the paper's "
              "table text available to us lists only the six open models)")

MODELS: Mapping[str, ModelSpec] = {m.name: m for m in (
    ModelSpec("gpt-5-mini", "openai/gpt-5-mini", 0.25, 2.00, "OpenAI list price, 2025-08-07",
              "Compact GPT-5 model from OpenAI with built-in reasoning. Broad world knowledge, strong "
              "reasoning, reliable at coding and math. Good for knowledge-intensive questions and hard "
              "problems. Medium-high cost.",
              fixed_temperature=True, max_tokens_field="max_completion_tokens"),
    ModelSpec("gpt-5-nano", "openai/gpt-5-nano", 0.05, 0.40, "OpenAI list price, 2025-08-07",
              "Smallest GPT-5 model from OpenAI with built-in reasoning. Fast and cheap, broad general "
              "knowledge, decent reasoning. Good for simple questions and classification. Very low cost.",
              fixed_temperature=True, max_tokens_field="max_completion_tokens"),
    ModelSpec("qwen3-80b", "qwen/qwen3-next-80b-a3b-instruct", 0.10, 0.80,
              "OpenRouter (third-party copy), 2025-10-30",
              "Powerful 80B mixture-of-experts model from Alibaba. Strong reasoning, excellent at complex "
              "tasks, good at math and coding. Good for complex reasoning and mathematical "
              "problem-solving. Medium-high cost."),
    ModelSpec("qwen3-8b", "qwen/qwen3-8b", 0.05, 0.40, "OpenRouter model page snapshot, 2026",
              "Fast and efficient 8B parameter model from Alibaba. Very fast inference, low latency, "
              "cost-effective. Good for basic text generation and simple Q&A. Very low cost."),
    ModelSpec("deepseek-v3", "deepseek/deepseek-v3.2", 0.28, 0.42, "DeepSeek API, 2025-12-09",
              "State-of-the-art reasoning model with excellent performance. Top-tier reasoning, excellent "
              "at complex problems, strong coding ability. Good for complex reasoning and advanced math. "
              "Medium cost."),
    # The reference code points "deepseek-r1-14b" at the 32B distill (a defect); we use the 14B.
    ModelSpec("deepseek-r1-14b", "deepseek/deepseek-r1-distill-qwen-14b", 0.15, 0.15,
              "OpenRouter model page snapshot, 2026",
              "Math-focused 14B model optimized for reasoning. Excellent mathematical reasoning and "
              "step-by-step problem solving. Good for math problems and logical reasoning. Low-medium cost."),
    ModelSpec("llama-8b", "meta-llama/llama-3.1-8b-instruct", 0.02, 0.03,
              "OpenRouter (third-party copy), ~2025",
              "General-purpose 8B model from Meta. Well-balanced capabilities with good instruction "
              "following. Good for general tasks, conversation, and basic reasoning. Very low cost."),
    ModelSpec("gemma-3-27b", "google/gemma-3-27b-it", 0.067, 0.267, "OpenRouter (third-party copy), undated",
              "Balanced 27B model from Google. Good balance of speed and capability with strong "
              "instruction following. Good for medium complexity tasks. Medium cost."),
)}

PROFILE_NOTES = {"gpt-5-mini": _GPT5_NOTE, "gpt-5-nano": _GPT5_NOTE}


@dataclasses.dataclass(frozen=True)
class PoolSetting:
  """One setting of paper Table 1: which models may be chosen and who decides."""

  name: str
  models: tuple[str, ...]
  strong: str  # the backbone used by single-model baselines and the final decision node


POOLS: Mapping[str, PoolSetting] = {p.name: p for p in (
    PoolSetting("gpt-5-mini", tuple(MODELS), "gpt-5-mini"),
    # The Qwen setting removes the GPT models from the pool (reference code).
    PoolSetting("qwen3-80b", tuple(m for m in MODELS if not m.startswith("gpt-")), "qwen3-80b"),
)}


def _did_you_mean(name: str, known) -> str:
  """" (did you mean 'gpt-5-mini'?)" for a near miss ('gpt5-mini', 'Qwen3-80B'), else "" (also for a known
  name that an endpoint does not serve)."""
  if name in known:
    return ""
  close = difflib.get_close_matches(str(name).lower(), list(known), n=1, cutoff=0.6)
  return f" (did you mean {close[0]!r}?)" if close else ""


class UnknownModelError(UserError, KeyError):
  def __str__(self) -> str:
    return f"unknown model {self.args[0]!r}{_did_you_mean(self.args[0], MODELS)}; known: {', '.join(MODELS)}"


class UnknownPoolError(UserError, KeyError):
  def __str__(self) -> str:
    return (f"unknown pool setting {self.args[0]!r}{_did_you_mean(self.args[0], POOLS)}; "
            f"known: {', '.join(POOLS)}")


def get_model(name: str) -> ModelSpec:
  try:
    return MODELS[name]
  except KeyError:
    raise UnknownModelError(name) from None


def get_pool(name: str) -> PoolSetting:
  try:
    return POOLS[name]
  except KeyError:
    raise UnknownPoolError(name) from None
