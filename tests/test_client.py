"""LLMClient against tests/fault_server.py: retries, Retry-After, typed errors, quirks, key hygiene."""

from __future__ import annotations

import asyncio
import email.utils
import logging
import re
import socket
import time

import pytest

from hieramas_jax.llm import endpoint as endpoint_lib
from hieramas_jax.llm.cache import ResponseCache
from hieramas_jax.llm.client import CallResult, LLMClient, parse_retry_after
from hieramas_jax.llm.endpoint import Endpoint, make_endpoint, sim_endpoint
from hieramas_jax.llm.errors import (EndpointConfigError, EndpointUnreachableError, MissingAPIKeyError,
                                     NonRetryableError, RetriesExhaustedError)
from hieramas_jax.llm.registry import MODELS, UnknownModelError, get_model
from fault_server import FaultServer, answer_for, serve_chat

SECRET = "sk-test-SECRET-0123456789abcdef"


def fast_client(endpoint, **kw) -> LLMClient:
  """Short backoffs, and a timeout well past any pause of the shared event loop. A 0.3 s one was reached
  in full suite runs on a 2-core machine: once 32 requests timed out before the in-loop server read
  them, once 21 answers were sent after the client had given up (cause of the pauses not measured)."""
  opts = dict(max_concurrency=32, timeout_s=2.0, max_retries=8, backoff_base_s=0.005, backoff_cap_s=0.05)
  opts.update(kw)
  return LLMClient(endpoint, **opts)


def requested_waits(caplog) -> list[float]:
  """The backoff sleeps the client asked for, read from its debug line per retry ("... waiting 1.00s").

  What a test can check without a clock: a loaded 2-core machine stretches every real sleep, so an upper
  bound on measured waits flakes; how long the sleeps overshoot is measured by experiments/bench_timing.py.
  """
  return [float(m.group(1)) for r in caplog.records if r.name == "hieramas_jax.llm.client"
          for m in [re.search(r"waiting ([0-9.]+)s$", r.getMessage())] if m]


def messages(i: int) -> list[dict]:
  return [{"role": "system", "content": "You are a careful solver."},
          {"role": "user", "content": f"question number {i}: what is {i} plus {i}?"}]


def test_twenty_percent_faults_every_call_answered_and_cost_counted_once():
  async def main():
    async with FaultServer(fault_rate=0.2, seed=1, stall_s=2.5) as server:
      async with fast_client(sim_endpoint(server.base_url)) as client:
        models = ["qwen3-8b", "gpt-5-mini", "deepseek-v3", "llama-8b"]
        results = await asyncio.gather(*(
            client.chat(models[i % 4], messages(i), temperature=0.2, max_tokens=256, sample_index=i % 3)
            for i in range(200)))
      return server, results

  server, results = asyncio.run(main())
  assert all(server.fault_counts[k] > 0 for k in ("429", "500", "503", "stall", "drop", "malformed"))
  assert server.served_ok == 200  # one successful answer per call, none lost, none doubled
  assert sum(r.attempts for r in results) == len(server.requests)
  assert any(r.attempts > 1 for r in results)
  models = ["qwen3-8b", "gpt-5-mini", "deepseek-v3", "llama-8b"]
  for i, r in enumerate(results):
    body = {"model": models[i % 4], "messages": messages(i), "seed": i % 3}
    text, pt, ct = answer_for(body)
    assert (r.text, r.model, r.prompt_tokens, r.completion_tokens) == (text, models[i % 4], pt, ct)
    assert r.cost_usd == get_model(models[i % 4]).cost(pt, ct)  # this call's tokens only, retries free
    assert r.cached is False and r.latency_s > 0
  assert sum(r.cost_usd for r in results) == pytest.approx(sum(
      get_model(models[i % 4]).cost(*answer_for({"model": models[i % 4], "messages": messages(i),
                                                 "seed": i % 3})[1:]) for i in range(200)))


def test_retry_after_is_honoured_in_seconds(caplog):
  caplog.set_level(logging.DEBUG, logger="hieramas_jax.llm.client")

  async def main():
    async with FaultServer(retry_after="1") as server:
      server.script.extend(["429", "ok"])
      async with fast_client(sim_endpoint(server.base_url), backoff_base_s=0.0) as client:
        result = await client.chat("qwen3-8b", messages(0), temperature=0.0, max_tokens=16)
      return server, result

  server, result = asyncio.run(main())
  assert result.attempts == 2
  assert requested_waits(caplog) == [1.0]  # the server's Retry-After, no backoff added to it
  waited = server.request_times[1] - server.request_times[0]
  assert waited >= 0.95 and result.latency_s >= 0.95  # really slept (a busy machine only waits longer)


def test_parse_retry_after_forms():
  now = time.time()
  assert parse_retry_after({"Retry-After": "2.5"}) == 2.5
  assert parse_retry_after({"retry-after-ms": "250", "Retry-After": "9"}) == 0.25
  date = email.utils.formatdate(now + 30, usegmt=True)
  assert 28 <= parse_retry_after({"Retry-After": date}, now=now) <= 31
  assert parse_retry_after({"Retry-After": "soon"}) is None
  assert parse_retry_after({}) is None


def test_retry_after_longer_than_cap_waits_the_cap(caplog):
  caplog.set_level(logging.DEBUG, logger="hieramas_jax.llm.client")

  async def main():
    async with FaultServer(retry_after="30") as server:
      server.script.extend(["429", "ok"])
      async with fast_client(sim_endpoint(server.base_url), retry_after_cap_s=0.2) as client:
        await client.chat("qwen3-8b", messages(0), temperature=0.0, max_tokens=16)
      return server.request_times

  times = asyncio.run(main())
  assert requested_waits(caplog) == [0.2]  # the cap, not the server's 30 s
  assert times[1] - times[0] >= 0.18


def test_400_is_not_retried_and_carries_the_message():
  async def main():
    async with FaultServer() as server:
      server.script.append("400")
      async with fast_client(sim_endpoint(server.base_url)) as client:
        with pytest.raises(NonRetryableError) as info:
          await client.chat("qwen3-8b", messages(0), temperature=0.0, max_tokens=16)
      return server, info.value

  server, error = asyncio.run(main())
  assert len(server.requests) == 1
  assert error.status == 400 and "max_tokens is too large" in str(error)


def test_retries_run_out_with_last_status():
  async def main():
    async with FaultServer() as server:
      server.script.extend(["500", "429", "503", "503"])
      async with fast_client(sim_endpoint(server.base_url), max_retries=3) as client:
        with pytest.raises(RetriesExhaustedError) as info:
          await client.chat("qwen3-8b", messages(0), temperature=0.0, max_tokens=16)
      return server, info.value

  server, error = asyncio.run(main())
  assert len(server.requests) == 4
  assert error.last_status == 503 and error.attempts == 4


def test_unreachable_endpoint_fails_fast_with_one_clear_error(caplog):
  caplog.set_level(logging.DEBUG, logger="hieramas_jax.llm.client")
  with socket.socket() as s:  # a port nothing listens on
    s.bind(("127.0.0.1", 0))
    port = s.getsockname()[1]

  async def main():
    async with LLMClient(sim_endpoint(f"http://127.0.0.1:{port}/v1")) as client:  # default retry policy
      await client.chat("qwen3-8b", messages(0), temperature=0.0, max_tokens=16)

  with pytest.raises(EndpointUnreachableError, match=f"127.0.0.1:{port}.*unreachable") as info:
    asyncio.run(main())
  # Fast: the default policy's 2 quick retries (0.1 s, 0.2 s), not max_retries backoffs of up to 30 s each.
  assert info.value.attempts == 3
  assert requested_waits(caplog) == [0.1, 0.2]


def test_unknown_model_raises_before_any_request():
  async def main():
    async with FaultServer() as server:
      openai_only = make_endpoint("openai", base_url=server.base_url, environ={"OPENAI_API_KEY": SECRET})
      async with fast_client(openai_only) as client:
        with pytest.raises(UnknownModelError):
          await client.chat("no-such-model", messages(0), temperature=0.0, max_tokens=16)
        with pytest.raises(UnknownModelError):  # a pool model this endpoint does not serve
          await client.chat("qwen3-8b", messages(0), temperature=0.0, max_tokens=16)
      return server

  assert asyncio.run(main()).requests == []


def test_request_fields_and_gpt5_quirks():
  async def main():
    async with FaultServer() as server:
      async with fast_client(sim_endpoint(server.base_url)) as client:
        await client.chat("gpt-5-mini", messages(0), temperature=0.2, max_tokens=300, sample_index=4)
        await client.chat("qwen3-8b", messages(0), temperature=0.2, max_tokens=300, sample_index=0)
      return server.requests

  gpt5, qwen = asyncio.run(main())
  assert gpt5 == {"model": "gpt-5-mini", "messages": messages(0), "max_completion_tokens": 300, "seed": 4}
  assert qwen == {"model": "qwen3-8b", "messages": messages(0), "max_tokens": 300, "temperature": 0.2,
                  "seed": 0}


def test_openrouter_and_openai_model_ids_are_sent():
  async def main():
    async with FaultServer() as server:
      env = {"OPENROUTER_API_KEY": SECRET, "OPENAI_API_KEY": SECRET}
      for backend in ("openrouter", "openai"):
        ep = make_endpoint(backend, base_url=server.base_url, environ=env)
        async with fast_client(ep) as client:
          await client.chat("gpt-5-nano", messages(0), temperature=0.2, max_tokens=8)
      return [r["model"] for r in server.requests]

  assert asyncio.run(main()) == ["openai/gpt-5-nano", "gpt-5-nano"]


def test_key_never_in_repr_logs_errors_or_cache(tmp_path, caplog):
  caplog.set_level(logging.DEBUG, logger="hieramas_jax")
  ep = make_endpoint("openrouter", base_url="http://127.0.0.1:9/v1", environ={"OPENROUTER_API_KEY": SECRET})
  assert ep.api_key == SECRET

  async def main():
    async with FaultServer(api_key=SECRET) as server:
      ep_here = make_endpoint("openrouter", base_url=server.base_url, environ={"OPENROUTER_API_KEY": SECRET})
      server.script.extend(["500", "429", "drop", "malformed", "ok", "ok"])
      with ResponseCache(tmp_path / "cache") as cache:
        async with fast_client(ep_here, cache=cache) as client:
          texts = [repr(client), str(client)]
          r1 = await client.chat("qwen3-8b", messages(1), temperature=0.1, max_tokens=8)
          r2 = await client.chat("gpt-5-mini", messages(2), temperature=0.1, max_tokens=8)
      wrong = make_endpoint("openrouter", base_url=server.base_url,
                            environ={"OPENROUTER_API_KEY": "sk-wrong"})
      async with fast_client(wrong) as client:
        with pytest.raises(NonRetryableError) as info:
          await client.chat("qwen3-8b", messages(3), temperature=0.1, max_tokens=8)
      return texts, r1, r2, info.value

  texts, r1, r2, error = asyncio.run(main())
  assert r1.attempts == 5 and r2.attempts == 1  # the scripted faults were retried (and logged)
  assert "retry 1/8" in caplog.text
  assert error.status == 401 and "sk-te***23" not in str(error)  # even a masked key is redacted
  shown = texts + [repr(ep), str(ep), repr(r1), str(error), caplog.text]
  for text in shown:
    assert SECRET not in text and SECRET[:12] not in text
  files = list((tmp_path / "cache").iterdir())
  assert files and all(SECRET.encode() not in f.read_bytes() for f in files)
  assert all(b"sk-" not in f.read_bytes() for f in files)


def test_endpoint_backends_and_missing_key():
  with pytest.raises(MissingAPIKeyError, match="OPENROUTER_API_KEY") as info:
    make_endpoint("openrouter", environ={})
  assert "OPENROUTER_API_KEY" in str(info.value)
  with pytest.raises(MissingAPIKeyError, match="OPENAI_API_KEY"):
    make_endpoint("openai", environ={"OPENAI_API_KEY": "  "})
  with pytest.raises(MissingAPIKeyError, match="MY_VLLM_KEY"):
    make_endpoint("custom", base_url="http://h:8000/v1", api_key_env="MY_VLLM_KEY", environ={})
  with pytest.raises(EndpointConfigError, match="--base_url"):
    make_endpoint("custom", environ={})
  with pytest.raises(EndpointConfigError, match="unknown backend"):
    make_endpoint("anthropic", environ={})

  orr = make_endpoint("openrouter", environ={"OPENROUTER_API_KEY": SECRET})
  assert orr.base_url == "https://openrouter.ai/api/v1" and not orr.is_sim
  assert orr.model_id("qwen3-80b") == "qwen/qwen3-next-80b-a3b-instruct"
  oai = make_endpoint("openai", environ={"OPENAI_API_KEY": SECRET})
  assert dict(oai.model_ids) == {"gpt-5-mini": "gpt-5-mini", "gpt-5-nano": "gpt-5-nano"}
  custom = make_endpoint("custom", base_url="http://h:8000/v1/", model_map={"qwen3-8b": "Qwen/Qwen3-8B"},
                         environ={})
  assert custom.api_key == "" and custom.chat_url == "http://h:8000/v1/chat/completions"
  assert dict(custom.model_ids) == {"qwen3-8b": "Qwen/Qwen3-8B"}
  sim = sim_endpoint("http://127.0.0.1:1234/v1", name="sim:seed0")
  assert sim.is_sim and set(sim.model_ids) == set(MODELS) and sim.model_id("llama-8b") == "llama-8b"
  with pytest.raises(EndpointConfigError, match="http"):
    Endpoint(name="x", base_url="localhost:8000/v1")


def test_backend_flags_build_the_endpoint():
  from absl import flags
  fv = flags.FlagValues()
  endpoint_lib.define_backend_flags(fv)
  endpoint_lib.define_backend_flags(fv)  # idempotent: a second entry-point module may call it too
  fv(["prog", "--backend=custom", "--base_url=http://10.0.0.2:8000/v1", "--api_key_env=VLLM_KEY",
      "--model_map=qwen3-8b=Qwen/Qwen3-8B,llama-8b=meta/llama", "--max_concurrency=8",
      "--request_timeout_s=5", "--max_retries=2", "--max_tokens=64"])
  ep = endpoint_lib.endpoint_from_flags(fv, environ={"VLLM_KEY": SECRET})
  assert ep.api_key == SECRET and ep.model_id("llama-8b") == "meta/llama"
  assert ep.name == "custom:http://10.0.0.2:8000/v1" and not ep.provider_quirks
  assert endpoint_lib.client_options_from_flags(fv) == {"max_concurrency": 8, "timeout_s": 5.0,
                                                        "max_retries": 2, "max_tokens_cap": 64}
  with pytest.raises(flags.IllegalFlagValueError):
    fv(["prog", "--backend=nope"])
  fv2 = flags.FlagValues()
  endpoint_lib.define_backend_flags(fv2)
  fv2(["prog"])
  assert endpoint_lib.endpoint_from_flags(fv2, sim_base_url="http://127.0.0.1:5/v1").is_sim
  with pytest.raises(UnknownModelError):
    endpoint_lib.parse_model_map(["gpt-7=x"])


def test_call_result_is_immutable():
  r = CallResult("t", "qwen3-8b", 1, 2, 0.0, 0.1, False, 1)
  with pytest.raises(AttributeError):
    r.cost_usd = 1.0  # type: ignore[misc]


def test_bad_call_arguments_fail_before_any_request():
  async def main():
    async with FaultServer() as server:
      async with fast_client(sim_endpoint(server.base_url)) as client:
        for kwargs in ({"temperature": None, "max_tokens": 8}, {"temperature": 3.0, "max_tokens": 8},
                       {"temperature": 0.2, "max_tokens": 0}, {"temperature": 0.2, "max_tokens": 8.0},
                       {"temperature": 0.2, "max_tokens": 8, "sample_index": -1}):
          with pytest.raises(ValueError):
            await client.chat("qwen3-8b", messages(0), **kwargs)
      return server.requests

  assert asyncio.run(main()) == []


def test_two_servers_and_two_names_for_one_id_never_share_cache_rows(tmp_path):
  # Endpoint identity = backend + base URL + the suite's short name: a run against another server on
  # another port, or another pool member mapped to the same served id, pays its own calls.
  async def main():
    paid = []
    with ResponseCache(tmp_path) as cache:
      async with FaultServer() as a, FaultServer() as b:
        for server in (a, b, a):
          ep = make_endpoint("custom", base_url=server.base_url, environ={},
                             model_map={"qwen3-8b": "smol", "llama-8b": "smol"})
          async with fast_client(ep, cache=cache) as client:
            r1 = await client.chat("qwen3-8b", messages(0), temperature=0.2, max_tokens=8)
            r2 = await client.chat("llama-8b", messages(0), temperature=0.2, max_tokens=8)
            paid.append((r1.cached, r2.cached, r1.model, r2.model))
      return paid, a.served_ok, b.served_ok

  paid, served_a, served_b = asyncio.run(main())
  assert paid == [(False, False, "qwen3-8b", "llama-8b"), (False, False, "qwen3-8b", "llama-8b"),
                  (True, True, "qwen3-8b", "llama-8b")]
  assert (served_a, served_b) == (2, 2)
  ep = make_endpoint("openai", base_url="http://127.0.0.1:9/v1", environ={"OPENAI_API_KEY": SECRET})
  assert ep.name == "openai:http://127.0.0.1:9/v1"
  assert make_endpoint("openai", environ={"OPENAI_API_KEY": SECRET}).name == "openai:https://api.openai.com/v1"


def test_provider_quirks_only_where_the_provider_serves_the_model_and_the_run_wide_cap():
  async def main():
    async with FaultServer() as server:
      custom = make_endpoint("custom", base_url=server.base_url, environ={})
      async with fast_client(custom, max_tokens_cap=16) as client:
        await client.chat("gpt-5-mini", messages(0), temperature=0.2, max_tokens=300)
        await client.chat("qwen3-8b", messages(0), temperature=0.7, max_tokens=8)
      ep = make_endpoint("openai", base_url=server.base_url, environ={"OPENAI_API_KEY": SECRET})
      async with fast_client(ep, max_tokens_cap=16) as client:
        await client.chat("gpt-5-mini", messages(0), temperature=0.2, max_tokens=300)
      return server.requests

  custom_gpt, custom_qwen, openai_gpt = asyncio.run(main())
  # A custom server (vLLM, llama.cpp, transformers) takes max_tokens and temperature for any name.
  assert custom_gpt == {"model": "gpt-5-mini", "messages": messages(0), "max_tokens": 16, "temperature": 0.2,
                        "seed": 0}
  assert custom_qwen["max_tokens"] == 8  # under the cap: the method's own budget
  assert openai_gpt == {"model": "gpt-5-mini", "messages": messages(0), "max_completion_tokens": 16, "seed": 0}
  with pytest.raises(ValueError, match="max_tokens_cap"):
    LLMClient(sim_endpoint("http://127.0.0.1:9/v1"), max_tokens_cap=0)


def test_finish_reason_and_reasoning_tokens_are_recorded_and_replayed(tmp_path):
  from aiohttp import web

  async def handler(request):
    body = await request.json()
    cut = body["max_tokens"] < 10
    return web.json_response({
        "choices": [{"index": 0, "message": {"role": "assistant", "content": None if cut else "42"},
                     "finish_reason": "length" if cut else "stop"}],
        "usage": {"prompt_tokens": 5, "completion_tokens": body["max_tokens"],
                  "completion_tokens_details": {"reasoning_tokens": body["max_tokens"] - (0 if cut else 1)}}})

  async def main():
    out = []
    async with serve_chat(handler) as url:
      with ResponseCache(tmp_path) as cache:
        for _ in range(2):
          async with fast_client(make_endpoint("custom", base_url=url, environ={}), cache=cache) as client:
            for cap in (4, 50):
              r = await client.chat("qwen3-8b", messages(0), temperature=0.0, max_tokens=cap)
              out.append((r.cached, r.text, r.finish_reason, r.reasoning_tokens, r.truncated))
    return out

  assert asyncio.run(main()) == [(False, "", "length", 4, True), (False, "42", "stop", 49, False),
                                 (True, "", "length", 4, True), (True, "42", "stop", 49, False)]


def test_spend_cap_stops_before_the_call_that_could_cross_it_and_a_rerun_resumes_without_paying_twice(tmp_path):
  from hieramas_jax.llm.errors import BudgetExceededError
  from hieramas_jax.llm.ledger import SpendLedger
  price_out = 100.0  # USD per 1M completion tokens: 1e-4 per token; prompts are free here
  cap_usd, max_tokens = 0.004, 10

  async def run(cap, n, cache):
    async with FaultServer() as server:
      ep = Endpoint(name="custom:budget", base_url=server.base_url, model_ids={"qwen3-8b": "m"},
                    provider_quirks=False, prices={"qwen3-8b": (0.0, price_out)})
      results, error = [], None
      async with fast_client(ep, cache=cache, ledger=cap) as client:
        try:
          for i in range(n):
            results.append(await client.chat("qwen3-8b", messages(i), temperature=0.0, max_tokens=max_tokens))
        except BudgetExceededError as e:
          error = e
      return results, error, server.served_ok

  with ResponseCache(tmp_path) as cache:
    cap = SpendLedger(tmp_path / "root", cap_usd)
    first, error, sent = asyncio.run(run(cap, 20, cache))
    # Expected by hand: call i is sent while spent + its worst case (10 tokens * 1e-4) <= the cap.
    spent, expected = 0.0, 0
    for i in range(20):
      if spent + max_tokens * price_out / 1e6 > cap_usd:
        break
      text, _, ct = answer_for({"model": "m", "seed": 0, "messages": messages(i)})
      spent += ct * price_out / 1e6
      expected += 1
    summary = cap.summary()
    assert 0 < expected < 20 and sent == len(first) == expected == summary["paid_calls"]
    assert error is not None and summary["spent_usd"] == pytest.approx(spent) and summary["total_usd"] <= cap_usd
    assert "spending cap reached" in str(error) and "rerun with a higher --max_usd" in str(error)
    # The resume with a higher cap replays what was paid and pays only the rest.
    second, error2, sent2 = asyncio.run(run(SpendLedger(tmp_path / "root", 1.0), 20, cache))
  assert error2 is None and sent2 == 20 - expected
  assert [r.cached for r in second] == [True] * expected + [False] * (20 - expected)
  assert [r.text for r in second[:expected]] == [r.text for r in first]


@pytest.mark.parametrize("message", [
    "This model's maximum context length is 2048 tokens. However, you requested 5000 tokens",  # OpenAI, vLLM
    "the request exceeds the available context size, try increasing it",  # llama.cpp (n_ctx)
    "Input is too long for this model", "prompt is too long: 210000 tokens > 200000 maximum"])
def test_a_prompt_longer_than_the_context_is_an_empty_answer_not_a_dead_cell(message):
  from aiohttp import web

  async def handler(request):
    await request.json()
    return web.json_response({"error": {"message": message, "type": "invalid_request_error"}}, status=400)

  async def main():
    async with serve_chat(handler) as url:
      async with fast_client(make_endpoint("custom", base_url=url, environ={})) as client:
        return await client.chat("qwen3-8b", messages(0), temperature=0.0, max_tokens=8)

  r = asyncio.run(main())
  assert r.text == "" and r.finish_reason == "context_overflow" and r.truncated and r.cost_usd == 0.0
