"""How often the suite's token cap cuts each model's reply on the simulated pool.

    python -m hieramas_jax.sim.truncation [--max_tokens=2048] [--seed=0]

For every model and benchmark, the Base prompt (nothing asks to reason) and the CoT prompt over all
vendored items: mean completion tokens (hidden reasoning + visible answer) and the share of calls
whose completion exceeds max_tokens (`finish_reason` "length" on the server). Goes through the
behaviour model directly (no HTTP), with the server's own token count.
"""

from __future__ import annotations

import json
import sys

from absl import app, flags

from hieramas_jax.benchmarks.data import BENCHMARKS, load_items
from hieramas_jax.llm.registry import MODELS
from hieramas_jax.mas import roles
from hieramas_jax.sim.model import BehaviourModel, count_tokens

_MAX_TOKENS = flags.DEFINE_integer("max_tokens", 2048, "the cap to measure at (the suite's and the reference code's)")
_SEED = flags.DEFINE_integer("seed", 0, "sim seed")


def messages(item, cot: bool) -> list[dict]:
  user = f"{item.question.rstrip()}\n\n{roles.ANSWER_FORMAT[item.benchmark]}"
  if cot:
    user += "\nLet's think step by step."
  return [{"role": "system", "content": "You are a helpful assistant."}, {"role": "user", "content": user}]


def measure_lengths(sim: BehaviourModel, model: str, benchmark: str, cot: bool) -> list[int]:
  """Completion tokens (hidden reasoning + visible text, before any cap) of one call per item."""
  totals = []
  for item in load_items(benchmark):
    reply = sim.reply(model, messages(item, cot), 0.2, None, 0)
    totals.append(reply.reasoning_tokens + count_tokens(reply.text))
  return totals


def measure(max_tokens: int, seed: int = 0) -> list[dict]:
  """One row per (model, benchmark, prompt): n, mean completion tokens, truncated share."""
  sim = BehaviourModel(seed=seed)
  rows = []
  for model in MODELS:
    for bench in BENCHMARKS:
      for prompt, cot in (("base", False), ("cot", True)):
        totals = measure_lengths(sim, model, bench, cot)
        n = len(totals)
        rows.append({"model": model, "benchmark": bench, "prompt": prompt, "n": n,
                     "mean_completion_tokens": round(sum(totals) / n, 1),
                     "truncated": round(sum(t > max_tokens for t in totals) / n, 4)})
  return rows


def main(argv):
  del argv
  json.dump(measure(_MAX_TOKENS.value, _SEED.value), sys.stdout, indent=1)
  print()


if __name__ == "__main__":
  app.run(main)
