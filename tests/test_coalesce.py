"""Identical concurrent requests are sent once: every paid call is in the response cache, none twice."""

from __future__ import annotations

import asyncio

from fault_server import FaultServer
from hieramas_jax.llm.cache import ResponseCache
from hieramas_jax.llm.client import LLMClient
from hieramas_jax.llm.endpoint import make_endpoint

MESSAGES = [{"role": "user", "content": "What is 2 + 2?"}]


def test_identical_concurrent_calls_share_one_request(tmp_path):
  async def go():
    async with FaultServer() as server:
      endpoint = make_endpoint("custom", base_url=server.base_url)
      cache = ResponseCache(tmp_path / "cache")
      try:
        async with LLMClient(endpoint, cache=cache, max_concurrency=8) as client:
          calls = [client.chat("gpt-5-mini", MESSAGES, temperature=1.0, max_tokens=64, sample_index=i % 2)
                   for i in range(20)]
          results = await asyncio.gather(*calls)
          assert not client._inflight  # nothing left behind
      finally:
        cache.close()
      return results, server.requests

  results, requests = asyncio.run(go())
  assert len(requests) == 2  # two distinct requests (sample 0 and 1), each sent once
  assert sum(not r.cached for r in results) == 2
  for i in (0, 1):
    same = [r for k, r in enumerate(results) if k % 2 == i]
    assert len({(r.text, r.cost_usd, r.prompt_tokens, r.completion_tokens) for r in same}) == 1


def test_a_failed_shared_request_fails_every_caller_and_is_forgotten(tmp_path):
  async def go():
    async with FaultServer() as server:
      server.script.extend(["400"])
      endpoint = make_endpoint("custom", base_url=server.base_url)
      cache = ResponseCache(tmp_path / "cache")
      try:
        async with LLMClient(endpoint, cache=cache, max_concurrency=8, max_retries=0) as client:
          outcomes = await asyncio.gather(*(client.chat("gpt-5-mini", MESSAGES, temperature=1.0, max_tokens=64)
                                            for _ in range(5)), return_exceptions=True)
          assert not client._inflight
          again = await client.chat("gpt-5-mini", MESSAGES, temperature=1.0, max_tokens=64)
      finally:
        cache.close()
      return outcomes, again, server.requests

  outcomes, again, requests = asyncio.run(go())
  assert all(isinstance(o, Exception) for o in outcomes), outcomes
  assert len(requests) == 2 and not again.cached
