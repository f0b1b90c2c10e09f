"""`<think>` blocks per model: stripped before the next agents read a text (the default), kept where a pool
file says `think = "keep"`, the raw text kept for traces; and the pool file's old `reasoning` field refused."""

from __future__ import annotations

import asyncio

import pytest
from aiohttp import web

from hieramas_jax.benchmarks.extract import strip_reasoning
from hieramas_jax.llm.cache import ResponseCache
from hieramas_jax.llm.client import LLMClient
from hieramas_jax.llm.endpoint import Endpoint
from hieramas_jax.llm.pool import PoolFileError, load_pool_file
from hieramas_jax.mas.runtime import Clock, call_llm
from fault_server import serve_chat

RAW = "<think>Long hidden reasoning, 5 or 6? Probably 6.</think>\nThe answer is $\\boxed{6}$."


async def _reply(request):
  body = await request.json()
  return web.json_response({"choices": [{"index": 0, "finish_reason": "stop", "message": {"content": RAW}}],
                            "usage": {"prompt_tokens": 9, "completion_tokens": 20}})


def test_think_blocks_are_stripped_before_passing_on_kept_raw_for_traces_and_kept_where_the_pool_says(tmp_path):
  async def main():
    async with serve_chat(_reply) as url:
      ep = Endpoint(name="custom:think", base_url=url, model_ids={"deepseek-r1-14b": "r1", "qwen3-8b": "q"},
                    provider_quirks=False, keep_think=frozenset({"qwen3-8b"}))
      with ResponseCache(tmp_path) as cache:
        async with LLMClient(ep, cache=cache, reasoning_filter=strip_reasoning) as client:
          q = [{"role": "user", "content": "x"}]
          fresh = await client.chat("deepseek-r1-14b", q, temperature=0.0, max_tokens=50)
          cached = await client.chat("deepseek-r1-14b", q, temperature=0.0, max_tokens=50)
          kept = await client.chat("qwen3-8b", q, temperature=0.0, max_tokens=50)
          record = await call_llm(client, Clock(), node=0, role=None, position="single", model="deepseek-r1-14b",
                                  messages=q, temperature=0.0, max_tokens=50)
        stored = [cache.get(k).text for k in _keys(cache)]
    return fresh, cached, kept, record, stored

  fresh, cached, kept, record, stored = asyncio.run(main())
  assert fresh.text == "\nThe answer is $\\boxed{6}$." and fresh.raw_text == RAW
  assert cached.cached and (cached.text, cached.raw_text) == (fresh.text, RAW)  # the cache keeps the raw text
  assert kept.text == RAW and kept.raw_text == ""  # think = "keep": passed on as it came
  assert set(stored) == {RAW}
  assert record.text == fresh.text and record.to_json()["raw_text"] == RAW  # the trace keeps the raw text
  assert "raw_text" not in record.__class__(**{**record.to_json(), "raw_text": ""}).to_json()


def _keys(cache):
  cache.flush()
  with cache._lock:  # pylint: disable=protected-access
    return [k for (k,) in cache._connection().execute("SELECT key FROM responses")]  # pylint: disable=protected-access


def _pool(tmp_path, extra):
  path = tmp_path / "p.toml"
  path.write_text('[models."qwen3-8b"]\nbackend = "custom"\nbase_url = "http://127.0.0.1:9/v1"\nmodel_id = "m"\n'
                  f'price_in = 1\nprice_out = 1\nprice_date = "2026-11-30"\n{extra}\n')
  return path


def test_the_pool_file_reads_think_and_refuses_the_never_read_reasoning_field(tmp_path):
  assert load_pool_file(_pool(tmp_path, 'think = "keep"'), environ={}).endpoints[0].keep_think == {"qwen3-8b"}
  assert load_pool_file(_pool(tmp_path, ""), environ={}).endpoints[0].keep_think == frozenset()
  with pytest.raises(PoolFileError, match="'reasoning' is gone .*think"):
    load_pool_file(_pool(tmp_path, "reasoning = true"), environ={})
  with pytest.raises(PoolFileError, match="think: one of strip, keep"):
    load_pool_file(_pool(tmp_path, 'think = "hide"'), environ={})
