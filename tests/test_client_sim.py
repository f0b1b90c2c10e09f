"""LLMClient against the real simulated pool with 20% injected faults (hieramas_jax.sim.server)."""

from __future__ import annotations

import asyncio

from hieramas_jax.benchmarks.data import load_items
from hieramas_jax.llm.client import LLMClient
from hieramas_jax.llm.endpoint import sim_endpoint
from hieramas_jax.llm.registry import get_model
from hieramas_jax.mas.roles import single_model_messages
from hieramas_jax.sim.server import SimConfig, start_sim_in_thread

MODELS = ("gpt-5-mini", "qwen3-8b", "deepseek-v3", "llama-8b")


async def _answer_all(base_url: str, requests, **client_kw) -> list:
  async with LLMClient(sim_endpoint(base_url), max_concurrency=32, **client_kw) as client:
    return await asyncio.gather(*(
        client.chat(model, messages, temperature=0.2, max_tokens=2048, sample_index=k)
        for model, messages, k in requests))


def test_twenty_percent_sim_faults_every_call_answered_as_without_faults():
  items = load_items("mmlu_redux")[:40] + load_items("math")[:40]
  requests = [(MODELS[i % 4], single_model_messages(item, cot=i % 2 == 0), i % 3)
              for i, item in enumerate(items)]
  faulty = SimConfig(seed=0, fault_rate_429=0.04, fault_rate_5xx=0.04, fault_rate_stall=0.04,
                     fault_rate_drop=0.04, fault_rate_malformed=0.04, stall_s=1.0, retry_after_s=0.01)
  with start_sim_in_thread(SimConfig(seed=0)) as clean_sim, start_sim_in_thread(faulty) as faulty_sim:
    clean = asyncio.run(_answer_all(clean_sim.base_url, requests))
    noisy = asyncio.run(_answer_all(faulty_sim.base_url, requests, timeout_s=0.4, max_retries=8,
                                    backoff_base_s=0.01, backoff_cap_s=0.1))
  assert len(noisy) == len(requests)
  assert sum(r.attempts for r in noisy) > len(requests)  # faults happened and were retried
  assert all(r.attempts == 1 for r in clean)
  for (model, _, _), a, b in zip(requests, clean, noisy):
    # The same answer, tokens and cost as without faults: failed attempts are never billed.
    assert (b.text, b.prompt_tokens, b.completion_tokens, b.cost_usd) == \
        (a.text, a.prompt_tokens, a.completion_tokens, a.cost_usd)
    assert b.cost_usd == get_model(model).cost(b.prompt_tokens, b.completion_tokens) > 0
