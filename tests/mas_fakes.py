"""A fake chat client for the MAS / methods / experiment tests (same `chat` signature as LLMClient)."""

from __future__ import annotations

import asyncio
import time
from typing import Callable

from hieramas_jax.llm.client import CallResult


class FakeClient:
  """Sleeps `latency` per call and answers with `answer(model, messages, sample_index)`.

  Records (start, end, model, messages, kwargs) of every call, so tests can check ordering,
  parallelism and that sampling parameters arrive.
  """

  def __init__(self, answer: Callable | None = None, latency: float = 0.0):
    self.answer = answer or (lambda model, messages, sample_index: "The answer is (A)")
    self.latency = latency
    self.calls: list[dict] = []
    self.t0 = time.monotonic()
    self.in_flight = 0
    self.max_in_flight = 0

  async def chat(self, model, messages, *, temperature, max_tokens, sample_index=0):
    start = time.monotonic() - self.t0
    self.in_flight += 1
    self.max_in_flight = max(self.max_in_flight, self.in_flight)
    try:
      if self.latency:
        await asyncio.sleep(self.latency)
    finally:
      self.in_flight -= 1
    text = self.answer(model, messages, sample_index)
    pt = sum(len(m["content"]) for m in messages) // 4
    ct = len(text) // 4 + 1
    cost = (pt * 1 + ct * 2) / 1e6
    self.calls.append({"start": start, "end": time.monotonic() - self.t0, "model": model,
                       "messages": messages, "temperature": temperature, "max_tokens": max_tokens,
                       "sample_index": sample_index, "cost_usd": cost})
    # The real result type, so the fake can never drift from what LLMClient returns.
    return CallResult(text=text, model=model, prompt_tokens=pt, completion_tokens=ct, cost_usd=cost,
                      latency_s=self.latency, cached=False, attempts=1)


class Counting:
  """A client wrapper that counts the calls that really reached the endpoint (not replayed from a cache)."""

  def __init__(self, client):
    self.client, self.sent = client, 0

  async def chat(self, model, messages, **kwargs):
    result = await self.client.chat(model, messages, **kwargs)
    self.sent += not result.cached
    return result
