"""The simulated pool speaks the OpenAI protocol: official clients, error bodies, faults, quirks."""

from __future__ import annotations

import asyncio
import collections
import json
import subprocess
import sys

import aiohttp
import openai
import pytest

from hieramas_jax.benchmarks.data import load_items
from hieramas_jax.llm.registry import MODELS
from hieramas_jax.sim.server import SimConfig, SimConfigError, start_sim_in_thread, start_sim_subprocess


@pytest.fixture(scope="module")
def sim():
  handle = start_sim_in_thread(SimConfig(seed=0))
  yield handle
  handle.close()


def _mmlu_messages(i: int = 0) -> list[dict]:
  item = load_items("mmlu_redux")[i]
  return [{"role": "system", "content": "You are a helpful assistant."},
          {"role": "user", "content": item.question + "\n\nEnd your response with 'The answer is (X)' "
                                      "where X is the letter of the correct option."}]


def test_official_sync_client_chat_and_models(sim):
  client = openai.OpenAI(base_url=sim.base_url, api_key="unused", max_retries=0)
  resp = client.chat.completions.create(model="qwen3-80b", messages=_mmlu_messages(), temperature=0.2,
                                        max_tokens=512, seed=0)
  assert resp.object == "chat.completion" and resp.model == "qwen3-80b"
  assert "The answer is (" in resp.choices[0].message.content
  assert resp.choices[0].finish_reason == "stop"
  assert resp.usage.total_tokens == resp.usage.prompt_tokens + resp.usage.completion_tokens
  assert resp.usage.prompt_tokens > 20
  assert {m.id for m in client.models.list()} == set(MODELS)
  client.close()


def test_official_async_client_with_reasoning_model(sim):
  async def go():
    client = openai.AsyncOpenAI(base_url=sim.base_url, api_key="unused", max_retries=0)
    resps = await asyncio.gather(*(client.chat.completions.create(
        model="gpt-5-mini", messages=_mmlu_messages(i), max_completion_tokens=4096, seed=0)
        for i in range(8)))
    await client.close()
    return resps
  for resp in asyncio.run(go()):
    details = resp.usage.completion_tokens_details
    assert details is not None and details.reasoning_tokens > 0
    assert resp.usage.completion_tokens > details.reasoning_tokens


def test_error_bodies(sim):
  client = openai.OpenAI(base_url=sim.base_url, api_key="unused", max_retries=0)
  with pytest.raises(openai.NotFoundError) as e:
    client.chat.completions.create(model="gpt-9", messages=_mmlu_messages())
  assert e.value.code == "model_not_found"
  with pytest.raises(openai.BadRequestError):
    client.chat.completions.create(model="qwen3-8b", messages=[])
  with pytest.raises(openai.BadRequestError) as e:  # a real GPT-5 quirk, kept on purpose
    client.chat.completions.create(model="gpt-5-nano", messages=_mmlu_messages(), max_tokens=100)
  assert e.value.param == "max_tokens"
  with pytest.raises(openai.BadRequestError) as e:
    client.chat.completions.create(model="gpt-5-nano", messages=_mmlu_messages(), temperature=0.2)
  assert e.value.param == "temperature"
  client.close()

  async def raw_posts():
    async with aiohttp.ClientSession() as session:
      out = []
      for body in (b"{not json", b"[1, 2]", json.dumps({"model": "qwen3-8b", "messages": [
          {"role": "wizard", "content": "hi"}]}).encode()):
        async with session.post(sim.base_url + "/chat/completions", data=body) as r:
          out.append((r.status, await r.json()))
      async with session.get(sim.base_url + "/nowhere") as r:
        out.append((r.status, await r.json()))
      return out
  results = asyncio.run(raw_posts())
  assert [s for s, _ in results] == [400, 400, 400, 404]
  for _, body in results:
    assert set(body["error"]) == {"message", "type", "param", "code"} and body["error"]["message"]


def test_unknown_fields_ignored_and_max_tokens_truncates(sim):
  client = openai.OpenAI(base_url=sim.base_url, api_key="unused", max_retries=0)
  item = load_items("math")[3]
  messages = [{"role": "user", "content": item.question + "\nLet's think step by step. Please put your "
                                                          "final answer within \\boxed{}."}]
  full = client.chat.completions.create(model="llama-8b", messages=messages, max_tokens=2048,
                                        extra_body={"frequency_penalty_custom": 3, "user": "x"})
  short = client.chat.completions.create(model="llama-8b", messages=messages, max_tokens=5)
  assert full.choices[0].finish_reason == "stop"
  assert short.choices[0].finish_reason == "length" and short.usage.completion_tokens == 5
  assert full.choices[0].message.content.startswith(short.choices[0].message.content)
  reasoning = client.chat.completions.create(model="deepseek-r1-14b", messages=messages, max_tokens=3)
  assert reasoning.choices[0].finish_reason == "length" and reasoning.choices[0].message.content == ""
  client.close()


def test_fault_switches_fire_at_their_rates_and_retries_succeed():
  rates = {"fault_rate_429": 0.2, "fault_rate_5xx": 0.1, "fault_rate_drop": 0.1,
           "fault_rate_malformed": 0.1}
  n = 400
  with start_sim_in_thread(SimConfig(seed=3, retry_after_s=0.25, **rates)) as handle:
    async def go():
      seen = collections.Counter()
      retry_after = set()
      async with aiohttp.ClientSession() as session:
        async def once(i: int, body: bytes) -> str:
          try:
            async with session.post(handle.base_url + "/chat/completions", data=body) as r:
              if r.status == 429:
                retry_after.add(r.headers.get("Retry-After"))
                return "429"
              if r.status >= 500:
                return "5xx"
              try:
                json.loads(await r.read())
              except ValueError:
                return "malformed"
              return "ok"
          except aiohttp.ClientError:
            return "drop"
        bodies = [json.dumps({"model": "qwen3-8b", "seed": i, "messages": _mmlu_messages(i % 50)}).encode()
                  for i in range(n)]
        for outcome in await asyncio.gather(*(once(i, b) for i, b in enumerate(bodies))):
          seen[outcome] += 1
        # The same body, retried, gets a fresh draw per attempt and so eventually succeeds.
        attempts = 0
        while attempts < 30:
          attempts += 1
          if await once(0, bodies[0]) == "ok":
            break
      return seen, retry_after, attempts
    seen, retry_after, attempts = asyncio.run(go())
  for kind, rate in (("429", 0.2), ("5xx", 0.1), ("drop", 0.1), ("malformed", 0.1), ("ok", 0.5)):
    sd = (rate * (1 - rate) / n) ** 0.5
    assert abs(seen[kind] / n - rate) < 4 * sd, (kind, seen)
  assert retry_after == {"0.25"}
  assert attempts < 30


def test_stall_outlasts_client_timeout():
  with start_sim_in_thread(SimConfig(fault_rate_stall=1.0, stall_s=1.0)) as handle:
    client = openai.OpenAI(base_url=handle.base_url, api_key="unused", max_retries=0, timeout=0.3)
    with pytest.raises(openai.APITimeoutError):
      client.chat.completions.create(model="qwen3-8b", messages=_mmlu_messages())
    client.close()


def test_fixed_latency():
  with start_sim_in_thread(SimConfig(fixed_latency_s=0.3)) as handle:
    async def go():
      client = openai.AsyncOpenAI(base_url=handle.base_url, api_key="unused", max_retries=0)
      loop = asyncio.get_running_loop()
      t0 = loop.time()
      await asyncio.gather(*(client.chat.completions.create(model="qwen3-8b", messages=_mmlu_messages(i))
                             for i in range(20)))
      await client.close()
      return loop.time() - t0
    wall = asyncio.run(go())
  # 20 concurrent calls overlap: one after another they take at least 20 x 0.3 = 6 s however fast the
  # machine, so that bound (not a guess at this machine's speed) is what overlap must beat.
  assert 0.3 <= wall < 20 * 0.3


def test_subprocess_server_and_cli_errors():
  handle = start_sim_subprocess(SimConfig(seed=1))
  try:
    client = openai.OpenAI(base_url=handle.base_url, api_key="unused", max_retries=0)
    assert len(client.models.list().data) == len(MODELS)
    client.close()
  finally:
    handle.close()
  for argv, message in ((["--fault_rate_429=2"], "fault_rate_429 must be in [0, 1]"),
                        (["--profile=medium"], "profile"), (["--no_such_flag=1"], "no_such_flag")):
    bad = subprocess.run([sys.executable, "-m", "hieramas_jax.sim.serve", *argv],
                         capture_output=True, text=True, timeout=60)
    assert bad.returncode == 2 and message in bad.stderr, (argv, bad.returncode, bad.stderr)
    assert len(bad.stderr.strip().splitlines()) == 1 and bad.stderr.startswith("error: "), bad.stderr
  with pytest.raises(SimConfigError):
    SimConfig(fault_rate_429=0.7, fault_rate_5xx=0.7)
