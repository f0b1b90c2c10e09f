"""Async OpenAI-compatible chat client on aiohttp: retries, per-call accounting, response cache.

One `LLMClient` per run and endpoint owns ONE `aiohttp.ClientSession` (connection pool sized to the
concurrency bound, keep-alive), so thousands of concurrent calls reuse a few dozen connections.
Every figure of a call (tokens, USD, latency, attempts) travels back in its `CallResult`; there are no
global counters, so concurrent queries can never mix their costs. What is paid is written down apart,
attempt by attempt, in the run root's `SpendLedger` (`llm.ledger`), which also holds the `--max_usd` cap.

Retry policy (after openai-python's `_base_client.py`, with a concurrency bound added):
  * retried: HTTP 408, 409, 429, any 5xx, timeouts, connection errors (refused, reset, server
    disconnect, truncated body) and 2xx bodies that are not a parseable chat completion;
  * not retried: other 4xx -> `NonRetryableError` carrying the endpoint's error message;
  * delay: the server's Retry-After / retry-after-ms (seconds or HTTP date, capped at
    `retry_after_cap_s`), else capped exponential backoff with full jitter,
    `uniform(0, min(backoff_cap_s, backoff_base_s * 2**retry))`, jitter drawn from a numpy Generator
    seeded by `seed`;
  * `max_retries` retries after the first attempt, then `RetriesExhaustedError` (with the last status);
  * a host that refuses connections before this client ever got an answer from it fails fast with
    `EndpointUnreachableError` after `unreachable_retries` quick retries, instead of backing off for
    minutes against a server that is not there.
The concurrency semaphore is held per attempt, not during backoff sleeps, so calls that wait out a
429 do not starve the others.
"""

from __future__ import annotations

import asyncio
import dataclasses
import email.utils
import hashlib
import json
import logging
import math
import re
import time
from typing import Any, Callable, Sequence

import aiohttp
import numpy as np
import yarl

from hieramas_jax.llm.cache import ResponseCache
from hieramas_jax.llm.endpoint import (DEFAULT_MAX_CONCURRENCY, DEFAULT_MAX_RETRIES,
                                       DEFAULT_REQUEST_TIMEOUT_S, Endpoint)
from hieramas_jax.llm.errors import (EndpointConfigError, EndpointUnreachableError, NonRetryableError,
                                     RetriesExhaustedError, redact_secrets)
from hieramas_jax.llm.ledger import BILLED, REFUSED, UNANSWERED, SpendLedger, worst_case
from hieramas_jax.llm.registry import MODELS, ModelSpec, UnknownModelError

__all__ = ["CallResult", "LLMClient", "PoolClient", "RETRY_STATUSES", "request_seed"]

log = logging.getLogger(__name__)

RETRY_STATUSES = frozenset({408, 409, 429})  # plus every status >= 500
CONTEXT_OVERFLOW = "context_overflow"  # CallResult.finish_reason of a prompt longer than the model's context
# How OpenAI, vLLM, llama.cpp, transformers and OpenRouter word a prompt that does not fit.
_CONTEXT_OVERFLOW = re.compile(r"context[ _-]?length|context window|maximum context|too many tokens|"
                               r"exceed\w* (?:[\w']+ ){0,3}context|prompt is too long|"
                               r"input is too long|n_ctx", re.IGNORECASE)
_CANONICAL = json.JSONEncoder(sort_keys=True, separators=(",", ":")).encode  # == cache.canonical_json


@dataclasses.dataclass(frozen=True, slots=True)
class CallResult:
  """One answered chat call.

  Attributes:
    text: the assistant message content ("" when the endpoint returned none).
    model: the suite's short model name.
    prompt_tokens, completion_tokens: from the response's `usage`.
    cost_usd: the recorded `usage` at the endpoint's prices as they are now (a pool file's, else the
      frozen registry's; never a provider's cost field), for a cached replay too: a price change
      re-prices every replayed answer, so tables and the methods' cost rewards never mix old and new
      prices. A replay's cost is what this configuration costs, not what was spent now.
    latency_s: seconds from the first attempt (concurrency slot acquired) to the parsed answer,
      retries and backoff included; for a cached replay, the lookup time.
    cached: True when replayed from the response cache (nothing was spent).
    attempts: requests sent for the original answer (1 = no retry).
    finish_reason: the endpoint's `finish_reason` ("stop", "length" when max_tokens cut the
      completion, ...); "" when the endpoint gave none or the answer was replayed from a cache row
      written before this field was recorded.
    reasoning_tokens: hidden reasoning tokens among `completion_tokens`
      (`usage.completion_tokens_details.reasoning_tokens`), 0 when the endpoint reports none.
    raw_text: the completion as the endpoint sent it, when `text` differs from it (its `<think>` blocks
      stripped before the next agents read it: `LLMClient`'s `reasoning_filter`); "" otherwise. Traces
      keep it; a local reasoning model's hidden reasoning is not paid again as the next prompt.
  """

  text: str
  model: str
  prompt_tokens: int
  completion_tokens: int
  cost_usd: float
  latency_s: float
  cached: bool
  attempts: int
  finish_reason: str = ""
  reasoning_tokens: int = 0
  raw_text: str = ""

  @property
  def truncated(self) -> bool:
    """The completion was cut by max_tokens (a reasoning model may then have answered nothing), or
    the prompt did not fit the model's context at all (finish_reason `CONTEXT_OVERFLOW`, empty text)."""
    return self.finish_reason in ("length", CONTEXT_OVERFLOW)


@dataclasses.dataclass(frozen=True, slots=True)
class _Route:
  """Per-model request shape, resolved once per client so the hot path does no lookups."""

  model_id: str
  spec: ModelSpec
  sends_temperature: bool
  max_tokens_field: str
  key_prefix: bytes  # endpoint identity + short name: see `LLMClient.__init__`
  budget: int | None  # the model's completion budget on this endpoint (a pool file's), replacing the method's
  cap: int | None  # the run-wide --max_tokens
  shown: Callable[[str], str] | None  # what of a completion is passed on (None: all of it)


class _Retry(Exception):
  """Internal: this attempt failed in a retryable way."""

  def __init__(self, reason: str, status: int | None = None, retry_after: float | None = None,
               connect_failure: bool = False):
    super().__init__(reason)
    self.reason = reason
    self.status = status
    self.retry_after = retry_after
    self.connect_failure = connect_failure


def parse_retry_after(headers: Any, now: float | None = None) -> float | None:
  """Seconds the server asks us to wait, from `retry-after-ms`, or `Retry-After` as seconds or HTTP date."""
  ms = headers.get("retry-after-ms")
  if ms is not None:
    try:
      return max(0.0, float(ms) / 1000.0)
    except ValueError:
      pass
  value = headers.get("Retry-After")
  if value is None:
    return None
  try:
    return max(0.0, float(value))
  except ValueError:
    pass
  try:
    when = email.utils.parsedate_to_datetime(value)
  except (TypeError, ValueError):
    return None
  if when is None:
    return None
  return max(0.0, when.timestamp() - (time.time() if now is None else now))


def _error_message(raw: bytes) -> str:
  """The OpenAI-style `error.message` of a body, or a short prefix of the body itself."""
  try:
    data = json.loads(raw)
    err = data.get("error") if isinstance(data, dict) else None
    if isinstance(err, dict) and err.get("message"):
      return str(err["message"])
    if isinstance(err, str):
      return err
  except ValueError:
    pass
  return raw[:300].decode("utf-8", "replace") or "(empty body)"


class LLMClient:
  """Async chat client for one endpoint; use as `async with LLMClient(endpoint) as client:`.

  Args:
    endpoint: where calls go (see `endpoint.py`).
    cache: optional response cache; a hit returns without a request.
    max_concurrency: most requests in flight at once (also the connection pool size).
    timeout_s: total seconds for one attempt (connect + send + read).
    max_retries: retries after the first attempt.
    backoff_base_s, backoff_cap_s: exponential backoff when the server gives no Retry-After.
    seed: seeds the jitter Generator.
    retry_after_cap_s: longest Retry-After honoured; longer requests wait this long.
    unreachable_retries: quick retries on connection refusal before any answer was ever received.
    max_tokens_cap: the run-wide --max_tokens, or None.
    ledger: the run root's spend ledger (holding --max_usd, if any): every attempt is reserved in it
      before it is sent and settled by how it ended; None records nothing (the embedded sim, uncapped).
    reasoning_filter: text -> the text passed on (the experiment layer gives
      `benchmarks.extract.strip_reasoning`), applied to every model not in `endpoint.keep_think`, to
      fresh and cached answers alike (the cache keeps the raw text); None passes every text on as sent.
  """

  def __init__(self, endpoint: Endpoint, *, cache: ResponseCache | None = None,
               max_concurrency: int = DEFAULT_MAX_CONCURRENCY, timeout_s: float = DEFAULT_REQUEST_TIMEOUT_S,
               max_retries: int = DEFAULT_MAX_RETRIES, backoff_base_s: float = 0.5,
               backoff_cap_s: float = 30.0, seed: int = 0, retry_after_cap_s: float = 120.0,
               unreachable_retries: int = 2, max_tokens_cap: int | None = None,
               ledger: SpendLedger | None = None, reasoning_filter: Callable[[str], str] | None = None):
    if not isinstance(endpoint, Endpoint):
      raise TypeError(f"endpoint must be an Endpoint, got {type(endpoint).__name__}")
    for name, value, low in (("max_concurrency", max_concurrency, 1), ("max_retries", max_retries, 0),
                             ("unreachable_retries", unreachable_retries, 0)):
      if not isinstance(value, int) or value < low:
        raise ValueError(f"{name} must be an int >= {low}, got {value!r}")
    for name, value in (("timeout_s", timeout_s), ("backoff_cap_s", backoff_cap_s)):
      if not value > 0:
        raise ValueError(f"{name} must be > 0, got {value!r}")
    if backoff_base_s < 0 or retry_after_cap_s < 0:
      raise ValueError("backoff_base_s and retry_after_cap_s must be >= 0")
    if max_tokens_cap is not None and (type(max_tokens_cap) is not int or max_tokens_cap < 1):
      raise ValueError(f"max_tokens_cap must be a positive int or None, got {max_tokens_cap!r}")
    self.max_tokens_cap = max_tokens_cap
    self.ledger = ledger
    self.seed = seed
    self.endpoint = endpoint
    self.cache = cache
    self.max_concurrency = max_concurrency
    self.timeout_s = float(timeout_s)
    self.max_retries = max_retries
    self.backoff_base_s = float(backoff_base_s)
    self.backoff_cap_s = float(backoff_cap_s)
    self.retry_after_cap_s = float(retry_after_cap_s)
    self.unreachable_retries = unreachable_retries
    self._rng = np.random.default_rng(seed)
    try:
      self._url = yarl.URL(endpoint.chat_url)  # parsed once here, not by aiohttp on every request
    except ValueError as e:
      raise EndpointConfigError(f"endpoint {endpoint.name!r}: invalid URL {endpoint.chat_url!r}: {e}") from None
    # The cache key names the endpoint (backend and URL) and the suite's short name as well as the
    # body: two short names mapped to one served id are two pool members, and must not replay each
    # other's answers (nor be billed at each other's prices). Provider quirks (GPT-5 takes
    # `max_completion_tokens` and no temperature) apply only where the provider serves that model.
    # On a real endpoint the run's seed is a draw of its own: it names the key too (seed 0 keeps the
    # keys it always had), so another seed never replays this one's answers.
    seed_tag = b"" if endpoint.is_sim or seed == 0 else f"seed{seed}\n".encode()
    self._routes = {}
    for name, model_id in endpoint.model_ids.items():
      if name not in MODELS:
        continue
      spec = MODELS[name]
      if name in endpoint.prices:
        spec = dataclasses.replace(spec, price_in=endpoint.prices[name][0], price_out=endpoint.prices[name][1])
      quirks = endpoint.provider_quirks
      prefix = endpoint.name.encode("utf-8") + b"\n" + (b"" if endpoint.is_sim else name.encode() + b"\n" + seed_tag)
      self._routes[name] = _Route(model_id, spec, not (quirks and spec.fixed_temperature),
                                  spec.max_tokens_field if quirks else "max_tokens", prefix,
                                  endpoint.max_tokens.get(name), max_tokens_cap,
                                  None if name in endpoint.keep_think else reasoning_filter)
    self._session: aiohttp.ClientSession | None = None
    self._semaphore: asyncio.Semaphore | None = None
    self._reached = False  # got any HTTP answer from the endpoint yet
    # Cache key -> the one request in flight for it: identical concurrent calls (two cells asking the
    # same question) share it, so each paid call is sent once and recorded in the cache once.
    self._inflight: dict[str, asyncio.Future] = {}

  def __repr__(self) -> str:
    return (f"LLMClient({self.endpoint!r}, max_concurrency={self.max_concurrency}, "
            f"timeout_s={self.timeout_s}, max_retries={self.max_retries}, cache={self.cache!r})")

  async def __aenter__(self) -> LLMClient:
    if self._session is not None:
      raise RuntimeError("LLMClient is already open")
    headers = {"Content-Type": "application/json", "Accept": "application/json"}
    if self.endpoint.api_key:
      headers["Authorization"] = "Bearer " + self.endpoint.api_key
    connector = aiohttp.TCPConnector(limit=self.max_concurrency, limit_per_host=self.max_concurrency,
                                     keepalive_timeout=60.0, ttl_dns_cache=300)
    self._session = aiohttp.ClientSession(
        connector=connector, headers=headers, trust_env=False,
        timeout=aiohttp.ClientTimeout(total=self.timeout_s))
    self._semaphore = asyncio.Semaphore(self.max_concurrency)
    return self

  async def __aexit__(self, *exc) -> None:
    await self.close()

  async def close(self) -> None:
    """Close the session, after letting requests already on the wire finish (at most `timeout_s`).

    A request that was sent is paid whether or not its caller is still waiting (a run stopped by the
    spend cap, or by an error in another query, cancels the callers); finishing it puts the answer in
    the cache, so the resumed run replays it instead of paying for it twice.
    """
    if self._inflight:
      await asyncio.wait(list(self._inflight.values()), timeout=self.timeout_s)
    if self._session is not None:
      await self._session.close()
      self._session = None

  async def chat(self, model: str, messages: Sequence[dict[str, Any]], *, temperature: float,
                 max_tokens: int, sample_index: int = 0) -> CallResult:
    """One chat completion.

    Args:
      model: the suite's short model name (must be served by the endpoint).
      messages: OpenAI chat messages.
      temperature: sampling temperature (not sent to models that accept only their default).
      max_tokens: completion cap (sent as the model's `max_tokens_field`), unless the endpoint sets
        this model's own budget (a pool file's `max_tokens`), which replaces it; the run-wide
        `max_tokens_cap` caps either.
      sample_index: independent-draw index; sent as the OpenAI `seed` and part of the cache key. On a
        real endpoint the run's seed is mixed in (`request_seed`), so seeds are independent samples; on
        the sim the world is the seed (its endpoint name) and `seed` stays the sample index.

    Raises:
      UnknownModelError: the endpoint does not serve `model` (raised before any request).
      NonRetryableError, RetriesExhaustedError, EndpointUnreachableError: see the module docstring.
    """
    route = self._routes.get(model)
    if route is None:
      raise UnknownModelError(model)
    if self._session is None:
      raise RuntimeError("LLMClient used outside `async with`")
    if type(max_tokens) is not int or max_tokens <= 0:
      raise ValueError(f"max_tokens must be a positive int, got {max_tokens!r}")
    if type(sample_index) is not int or sample_index < 0:
      raise ValueError(f"sample_index must be an int >= 0, got {sample_index!r}")
    if (not isinstance(temperature, (float, int)) or isinstance(temperature, bool)
        or not 0.0 <= temperature <= 2.0):
      raise ValueError(f"temperature must be a number in [0, 2], got {temperature!r}")
    if route.budget is not None:  # a reasoning model needs room for its hidden reasoning: the pool decides
      max_tokens = route.budget
    if route.cap is not None:
      max_tokens = min(max_tokens, route.cap)
    body: dict[str, Any] = {"model": route.model_id, "messages": messages,
                            "seed": sample_index if self.endpoint.is_sim else request_seed(self.seed, sample_index),
                            route.max_tokens_field: max_tokens}
    if route.sends_temperature:
      body["temperature"] = float(temperature)  # a numpy float would not serialise
    payload = _CANONICAL(body).encode("ascii")  # the one serialisation: request body and cache key
    cache = self.cache
    key = None
    if cache is not None:
      started = time.perf_counter()
      key = hashlib.sha256(route.key_prefix + payload).hexdigest()
      hit = cache.get(key)
      if hit is not None:  # priced now: the recorded tokens at the endpoint's current prices
        return _shown(route, CallResult(hit.text, hit.model, hit.prompt_tokens, hit.completion_tokens,
                                        route.spec.cost(hit.prompt_tokens, hit.completion_tokens),
                                        time.perf_counter() - started, True, hit.attempts, hit.finish_reason,
                                        hit.reasoning_tokens))
      shared = self._inflight.get(key)
      if shared is not None:  # the same request is on its way: wait for it; this one is a replay
        first = await asyncio.shield(shared)
        return dataclasses.replace(first, latency_s=time.perf_counter() - started, cached=True)
      shared = self._inflight[key] = asyncio.ensure_future(self._fetch(model, route, payload, key, max_tokens))
      shared.add_done_callback(lambda f, key=key: self._settle(key, f))
      return await asyncio.shield(shared)
    return await self._fetch(model, route, payload, None, max_tokens)

  def _settle(self, key: str, done: asyncio.Future) -> None:
    """Forget a finished shared request (its answer is in the cache now, or it failed for all)."""
    if self._inflight.get(key) is done:
      del self._inflight[key]
    if not done.cancelled():
      done.exception()  # retrieved: a failure nobody awaited any more is not logged as unhandled

  async def _fetch(self, model: str, route: _Route, payload: bytes, key: str | None, max_tokens: int) -> CallResult:
    """Send the request (with retries, each attempt in the ledger), price it and record it in the cache."""
    worst = worst_case(route.spec, payload, max_tokens) if self.ledger is not None else 0.0
    (text, prompt_tokens, completion_tokens, finish_reason, reasoning_tokens), attempts, latency = \
        await self._post(model, route, payload, worst)
    cost = route.spec.cost(prompt_tokens, completion_tokens)
    if key is not None:
      self.cache.put(key, endpoint=self.endpoint.name, model=model, text=text, prompt_tokens=prompt_tokens,
                     completion_tokens=completion_tokens, cost_usd=cost, attempts=attempts, latency_s=latency,
                     finish_reason=finish_reason, reasoning_tokens=reasoning_tokens)
    return _shown(route, CallResult(text, model, prompt_tokens, completion_tokens, cost, latency, False, attempts,
                                    finish_reason, reasoning_tokens))

  async def _post(self, model: str, route: _Route, payload: bytes,
                  worst: float) -> tuple[tuple[str, int, int, str, int], int, float]:
    """Sends `payload` until it is answered; every attempt is reserved in the ledger (at `worst`) after it
    got a concurrency slot and before it is sent, and settled by how it ended (see `llm.ledger`).

    Returns:
      ((text, prompt_tokens, completion_tokens, finish_reason, reasoning_tokens), attempts, latency_s).
    """
    session = self._session
    semaphore = self._semaphore
    ledger = self.ledger
    attempt = 0
    connect_failures = 0
    started = None
    while True:
      attempt += 1
      await semaphore.acquire()
      ticket = None
      outcome, billed = UNANSWERED, None  # sent and not answered until shown otherwise
      try:
        if ledger is not None:  # the cap is checked here, per attempt: BudgetExceededError sends nothing
          ticket = ledger.reserve(self.endpoint.name, model, worst)
        if started is None:
          started = time.perf_counter()
        async with session.post(self._url, data=payload) as resp:
          status = resp.status
          raw = await resp.read()
          self._reached = True
          if 200 <= status < 300:
            try:
              parsed = self._parse(model, raw)
            except NonRetryableError:
              outcome = REFUSED  # an error object with a 4xx code: refused, nothing generated
              raise
            outcome, billed = BILLED, route.spec.cost(parsed[1], parsed[2])
            return parsed, attempt, time.perf_counter() - started
          if 400 <= status < 500:
            outcome = REFUSED  # a 4xx is answered before any generation: not billed
          if status in RETRY_STATUSES or status >= 500:
            failure = _Retry(f"HTTP {status}: {self._redact(_error_message(raw))[:200]}", status,
                             parse_retry_after(resp.headers))
          elif status in (400, 413, 422) and _CONTEXT_OVERFLOW.search(_error_message(raw)):
            # The prompt does not fit the model's context: an answer of nothing, not a dead cell. The
            # method goes on (the query is graded wrong), and the cut is recorded like a truncation.
            return ("", 0, 0, CONTEXT_OVERFLOW, 0), attempt, time.perf_counter() - started
          else:
            raise NonRetryableError(model, status, self._redact(_error_message(raw)))
      except _Retry as e:
        failure = e
      except aiohttp.ClientConnectorError as e:
        outcome = REFUSED  # no connection opened: nothing was sent
        connect_failures += 1
        failure = _Retry(f"cannot connect: {type(e).__name__}: {e}", connect_failure=True)
      except (TimeoutError, asyncio.TimeoutError):
        failure = _Retry(f"no answer within {self.timeout_s:g}s")
      except (aiohttp.ClientConnectionError, aiohttp.ClientPayloadError) as e:
        failure = _Retry(f"connection error: {type(e).__name__}: {e}")
      except aiohttp.InvalidURL as e:
        raise EndpointConfigError(f"endpoint {self.endpoint.name!r}: invalid URL {e}") from None
      except aiohttp.ClientResponseError as e:  # a reply that is not valid HTTP, too many redirects...
        failure = _Retry(f"bad HTTP response: {type(e).__name__}: {e.message}", e.status or None)
      finally:
        try:
          if ticket is not None:
            ledger.settle(ticket, outcome, billed)
        finally:
          semaphore.release()

      if failure.connect_failure and not self._reached and connect_failures > self.unreachable_retries:
        raise EndpointUnreachableError(self.endpoint.base_url, connect_failures, failure.reason)
      if attempt > self.max_retries:
        if connect_failures == attempt:
          raise EndpointUnreachableError(self.endpoint.base_url, connect_failures, failure.reason)
        raise RetriesExhaustedError(model, attempt, failure.status, failure.reason)
      delay = self._delay(attempt, failure)
      log.debug("retry %d/%d for %s at %s after %s; waiting %.2fs", attempt, self.max_retries, model,
                self.endpoint.name, failure.reason, delay)
      await asyncio.sleep(delay)

  def _parse(self, model: str, raw: bytes) -> tuple[str, int, int, str, int]:
    """(text, prompt_tokens, completion_tokens, finish_reason, reasoning_tokens) of a 2xx body;
    `_Retry` when it is not a completion."""
    try:
      data = json.loads(raw)
      choices = data.get("choices")
      if not choices:
        err = data.get("error")
        # OpenRouter reports upstream failures as a 200 whose body is an error object.
        if isinstance(err, dict):
          code = err.get("code")
          message = self._redact(str(err.get("message", "")))
          if isinstance(code, int) and 400 <= code < 500 and code not in RETRY_STATUSES:
            raise NonRetryableError(model, code, message)
          raise _Retry(f"error object in a 2xx body (code {code}): {message[:200]}",
                       code if isinstance(code, int) else None)
        raise _Retry("2xx body without choices")
      text = choices[0]["message"]["content"]
      if text is None:  # e.g. a reasoning model that spent max_tokens before answering
        text = ""
      elif not isinstance(text, str):
        raise TypeError("message content is not a string")
      usage = data["usage"]
      finish_reason = choices[0].get("finish_reason") or ""
      details = usage.get("completion_tokens_details") or {}
      reasoning = details.get("reasoning_tokens") if isinstance(details, dict) else None
      return (text, int(usage["prompt_tokens"]), int(usage["completion_tokens"]), str(finish_reason),
              int(reasoning or 0))
    except (ValueError, KeyError, TypeError, IndexError, AttributeError) as e:
      raise _Retry(f"malformed completion body ({type(e).__name__})") from None

  def _delay(self, attempt: int, failure: _Retry) -> float:
    if failure.connect_failure and not self._reached:
      return self.backoff_base_s * 0.2 * attempt  # fail fast on a host that is not there
    if failure.retry_after is not None:
      return min(failure.retry_after, self.retry_after_cap_s)
    return float(self._rng.uniform(0.0, min(self.backoff_cap_s, self.backoff_base_s * 2 ** (attempt - 1))))

  def _redact(self, text: str) -> str:
    return redact_secrets(text, self.endpoint.api_key)


def _shown(route: _Route, result: CallResult) -> CallResult:
  """`result` with the text its route passes on (the raw text kept in `raw_text` when they differ)."""
  if route.shown is None or not result.text:
    return result
  shown = route.shown(result.text) or ""
  return result if shown == result.text else dataclasses.replace(result, text=shown, raw_text=result.text)


def request_seed(run_seed: int, sample_index: int) -> int:
  """The `seed` sent to a real endpoint: the sample index for run seed 0 (the requests, and so the cache
  keys, it always had), else 31 bits of sha256 over both, so every run seed draws its own samples where
  the provider honours `seed` (OpenAI, OpenRouter, vLLM, llama.cpp take 32-bit seeds)."""
  if run_seed == 0:
    return sample_index
  digest = hashlib.sha256(f"{run_seed}:{sample_index}".encode()).digest()
  return int.from_bytes(digest[:4], "big") & 0x7FFFFFFF


class PoolClient:
  """Several endpoints behind one `chat`: each model's calls go to the endpoint that serves it.

  A pool file can put GPT models on OpenAI and open models on a local server; methods call
  `chat(model, ...)` as on one `LLMClient`. Each endpoint keeps its own `LLMClient` (its own
  connection pool and concurrency bound, its own retries), and the response cache is shared: its keys
  name the endpoint, so rows never mix.

  Args:
    endpoints: the pool's endpoints; a model may be served by one of them only.
    **client_options: `LLMClient` keyword arguments, the same for every endpoint.
  """

  def __init__(self, endpoints: Sequence[Endpoint], **client_options: Any):
    if not endpoints:
      raise EndpointConfigError("a pool needs at least one endpoint")
    self.clients = tuple(LLMClient(ep, **client_options) for ep in endpoints)
    self._by_model: dict[str, LLMClient] = {}
    for client in self.clients:
      for model in client.endpoint.model_ids:
        if model in self._by_model:
          raise EndpointConfigError(f"model {model!r} is served by two endpoints of the pool: "
                                    f"{self._by_model[model].endpoint.name} and {client.endpoint.name}")
        self._by_model[model] = client

  def client_for(self, model: str) -> LLMClient:
    """The endpoint client serving `model`; `UnknownModelError` when none does."""
    try:
      return self._by_model[model]
    except KeyError:
      raise UnknownModelError(model) from None

  async def __aenter__(self) -> PoolClient:
    opened = []
    try:
      for client in self.clients:
        await client.__aenter__()
        opened.append(client)
    except BaseException:
      for client in opened:
        await client.close()
      raise
    return self

  async def __aexit__(self, *exc) -> None:
    await self.close()

  async def close(self) -> None:
    for client in self.clients:
      await client.close()

  async def chat(self, model: str, messages: Sequence[dict[str, Any]], *, temperature: float,
                 max_tokens: int, sample_index: int = 0) -> CallResult:
    """`LLMClient.chat` on the endpoint that serves `model`."""
    return await self.client_for(model).chat(model, messages, temperature=temperature, max_tokens=max_tokens,
                                             sample_index=sample_index)
