"""Self-Consistency and SC+CoT: n samples of the strong model at temperature 1.0, majority vote.

Reference settings: 5 samples, temperature 1.0. Samples are distinct requests through their
sample index 0..n-1 (the OpenAI `seed` field and a part of the cache key), all sent at once.
"""

from __future__ import annotations

import asyncio
import dataclasses

from hieramas_jax.benchmarks.data import Item
from hieramas_jax.mas import roles
from hieramas_jax.mas.runtime import Clock, call_llm
from hieramas_jax.mas.trace import NO_NODE, Trace
from hieramas_jax.methods.api import RunContext, Untrained
from hieramas_jax.methods.voting import majority_vote


@dataclasses.dataclass(frozen=True)
class SelfConsistency(Untrained):
  """Wang et al. (2023) self-consistency over the Base (cot=False) or CoT prompt."""

  cot: bool = False
  n_samples: int = 5
  temperature: float = 1.0
  max_tokens: int = 2048

  def __post_init__(self):
    if self.n_samples < 1:
      raise ValueError(f"n_samples must be >= 1, got {self.n_samples}")

  @property
  def name(self) -> str:
    return "sc_cot" if self.cot else "sc"

  async def solve(self, ctx: RunContext, item: Item) -> Trace:
    model = ctx.pool.strong
    messages = roles.single_model_messages(item, cot=self.cot)
    clock = Clock()
    records = await asyncio.gather(*(
        call_llm(ctx.client, clock, node=NO_NODE, role=None, position=f"sample:{k}", model=model,
                 messages=messages, temperature=self.temperature, max_tokens=self.max_tokens,
                 sample_index=k)
        for k in range(self.n_samples)))
    vote = await majority_vote(item, [r.text for r in records])
    return Trace(item_id=item.id, method=self.name, final_text=records[vote.winner].text,
                 calls=list(records),
                 extra={"vote": {"winner": vote.winner, "answer": vote.answer,
                                 "counts": [[str(a)[:200], n, i] for a, n, i in vote.counts]}})


def make_sc(**kwargs) -> SelfConsistency:
  return SelfConsistency(cot=False, **kwargs)


def make_sc_cot(**kwargs) -> SelfConsistency:
  return SelfConsistency(cot=True, **kwargs)
