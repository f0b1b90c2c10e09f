"""Single-call baselines of Table 1: Base and CoT (one call to the setting's strong model)."""

from __future__ import annotations

import dataclasses

from hieramas_jax.benchmarks.data import Item
from hieramas_jax.mas import roles
from hieramas_jax.mas.runtime import Clock, call_llm
from hieramas_jax.mas.trace import NO_NODE, Trace
from hieramas_jax.methods.api import RunContext, Untrained


@dataclasses.dataclass(frozen=True)
class SingleCall(Untrained):
  """One call to one model; Base asks for the answer directly, CoT adds "Let's think step by step."

  Attributes:
    cot: chain-of-thought prompt.
    temperature / max_tokens: the reference code's 0.2 / 2048.
    model: a fixed model (calibration uses every model of the registry); None = the pool's strong one.
    sample_index: the request's sample index (calibration repeats HumanEval+ with 0..2 to cut noise).
  """

  cot: bool = False
  temperature: float = 0.2
  max_tokens: int = 2048
  model: str | None = None
  sample_index: int = 0

  @property
  def name(self) -> str:
    return "cot" if self.cot else "base"

  async def solve(self, ctx: RunContext, item: Item) -> Trace:
    model = self.model or ctx.pool.strong
    rec = await call_llm(ctx.client, Clock(), node=NO_NODE, role=None, position="single", model=model,
                         messages=roles.single_model_messages(item, cot=self.cot),
                         temperature=self.temperature, max_tokens=self.max_tokens,
                         sample_index=self.sample_index)
    return Trace(item_id=item.id, method=self.name, final_text=rec.text, calls=[rec])


def make_base(**kwargs) -> SingleCall:
  return SingleCall(cot=False, **kwargs)


def make_cot(**kwargs) -> SingleCall:
  return SingleCall(cot=True, **kwargs)
