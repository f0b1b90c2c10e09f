"""Preflight: every model a run needs is checked against its endpoint before any paid call.

For each endpoint the run uses: one TCP connection to its host (`check_reachable`: nothing sent), then
`GET {base_url}/models` with the endpoint's key (free on OpenAI, OpenRouter, vLLM, llama.cpp and
transformers' server). A needed model whose id the list lacks is a problem; so is a needed model the
endpoint has no id for, a refused key (401/403) and a host that does not answer. OpenRouter lists its
models to anyone, so there the key is checked on an authenticated route as well (`GET /key`, free). A
server that serves no model list (404/405/501) is asked one one-token completion per needed model
instead: billed, through the run's spend ledger (and its cap), and reported in
`PreflightReport.probe_cost_usd`. Every problem of every endpoint, an unreachable host's included, is
gathered into one `PreflightError`, so a user fixes a pool file or a --model_map in one go.

A server that answers any id (some proxies do) passes a typo here: the check can only be as strict
as the list the server gives.
"""

from __future__ import annotations

import asyncio
import contextlib
import dataclasses
import json
import urllib.parse
from typing import Iterable, Sequence

import aiohttp

from hieramas_jax.llm.endpoint import Endpoint
from hieramas_jax.llm.errors import EndpointConfigError, EndpointUnreachableError, LLMError, redact_secrets

PREFLIGHT_TIMEOUT_S = 20.0
_NO_LIST = (404, 405, 501)


class PreflightError(LLMError):
  """The endpoints cannot serve the run: the message lists every problem found.

  Attributes:
    problems: one line per problem (an entry point prints each as its own `error:` line).
  """

  def __init__(self, problems: Sequence[str]):
    super().__init__(f"preflight found {len(problems)} problem(s) before any paid call:\n  " + "\n  ".join(problems))
    self.problems = list(problems)


async def check_reachable(base_url: str, *, attempts: int = 3, timeout_s: float = 10.0) -> None:
  """Raises EndpointUnreachableError unless a TCP connection to the endpoint's host opens.

  A connection only: no request is sent, nothing is paid, no key leaves the process. Run before a
  run writes anything, so an unreachable endpoint is one error line, with no W&B output before it
  and no run directory left behind.
  """
  url = urllib.parse.urlsplit(base_url)
  if not url.hostname:
    raise EndpointConfigError(f"invalid base URL {base_url!r}")
  try:
    port = url.port or (443 if url.scheme == "https" else 80)
  except ValueError as e:
    raise EndpointConfigError(f"invalid base URL {base_url!r}: {e}") from None
  detail = ""
  for attempt in range(attempts):
    try:
      _, writer = await asyncio.wait_for(asyncio.open_connection(url.hostname, port), timeout_s)
    except (OSError, asyncio.TimeoutError) as e:
      detail = f"cannot connect: {type(e).__name__}: {e}" if str(e) else f"no connection within {timeout_s:g}s"
      if attempt + 1 < attempts:
        await asyncio.sleep(0.25 * (attempt + 1))
      continue
    writer.close()
    with contextlib.suppress(OSError):
      await writer.wait_closed()
    return
  raise EndpointUnreachableError(base_url, attempts, detail)


def _backend_of(endpoint: Endpoint) -> str:
  """The backend an endpoint was built for: its name is `backend:base_url` (`endpoint.endpoint_name`)."""
  return endpoint.name.split(":", 1)[0]


async def _key_problem(session: aiohttp.ClientSession, endpoint: Endpoint) -> str | None:
  """A refused key on OpenRouter, whose model list needs none: `GET /key` needs one (free; 401 if wrong)."""
  if _backend_of(endpoint) != "openrouter":
    return None
  headers = {"Authorization": "Bearer " + endpoint.api_key} if endpoint.api_key else {}
  try:
    async with session.get(endpoint.base_url + "/key", headers=headers) as resp:
      await resp.read()
      if resp.status in (401, 403):
        return f"{endpoint.name}: the key was refused (HTTP {resp.status} on GET /key); check its environment variable"
  except (aiohttp.ClientError, asyncio.TimeoutError, OSError) as e:
    return f"{endpoint.name}: GET /key got no answer ({type(e).__name__}: {e})"
  return None


@dataclasses.dataclass(frozen=True)
class PreflightReport:
  """What the preflight checked.

  Attributes:
    checked: (endpoint name, short name, model id) of every model found served.
    probes: models checked by a one-token request (their endpoint serves no model list).
    probe_cost_usd: what those requests cost at the endpoint's prices.
  """

  checked: tuple[tuple[str, str, str], ...]
  probes: tuple[str, ...] = ()
  probe_cost_usd: float = 0.0


async def _served_ids(session: aiohttp.ClientSession, endpoint: Endpoint) -> tuple[set[str] | None, str | None]:
  """(ids the endpoint lists, None) or (None, problem) or (None, None) when it serves no list."""
  headers = {"Authorization": "Bearer " + endpoint.api_key} if endpoint.api_key else {}
  try:
    async with session.get(endpoint.base_url + "/models", headers=headers) as resp:
      raw = await resp.read()
      if resp.status in _NO_LIST:
        return None, None
      if resp.status in (401, 403):
        return None, f"{endpoint.name}: the key was refused (HTTP {resp.status}); check its environment variable"
      if resp.status != 200:
        detail = redact_secrets(raw[:200].decode("utf-8", "replace"), endpoint.api_key)
        return None, f"{endpoint.name}: GET /models answered HTTP {resp.status}: {detail}"
      data = json.loads(raw)
      return {str(m["id"]) for m in data.get("data", []) if isinstance(m, dict) and "id" in m}, None
  except (aiohttp.ClientError, asyncio.TimeoutError, OSError) as e:
    return None, f"{endpoint.name}: no answer from {endpoint.base_url} ({type(e).__name__}: {e})"
  except (ValueError, TypeError, AttributeError):
    return None, f"{endpoint.name}: GET /models did not return an OpenAI model list"


async def preflight(endpoints: Sequence[Endpoint], needed: Iterable[str], *, client_factory=None,
                    timeout_s: float = PREFLIGHT_TIMEOUT_S, ledger=None,
                    reach_attempts: int = 3) -> PreflightReport:
  """Check that `needed` models are served by `endpoints`; one `PreflightError` listing every problem.

  Args:
    endpoints: the run's endpoints (one, or a pool file's several).
    needed: suite short names the chosen cells may call.
    client_factory: `endpoint -> LLMClient` used for one-token probes where an endpoint serves no
      model list (default: a plain `LLMClient` with no cache, so a probe is never replayed, writing its
      attempts in `ledger`).
    timeout_s: per request.
    ledger: the run root's `SpendLedger` (its cap holds for probes too), or None.
    reach_attempts: TCP connection attempts per host before it counts as unreachable.
  """
  from hieramas_jax.llm.client import LLMClient  # pylint: disable=import-outside-toplevel
  needed = sorted(set(needed))
  problems: list[str] = []
  checked: list[tuple[str, str, str]] = []
  probes: list[str] = []
  probe_cost = 0.0
  owner = {m: ep for ep in endpoints for m in ep.model_ids}
  for model in needed:
    if model not in owner:
      problems.append(f"{model}: no endpoint of this run serves it (add it to the pool file or --model_map, "
                      f"or leave out the cells that need it)")
  timeout = aiohttp.ClientTimeout(total=timeout_s)
  async with aiohttp.ClientSession(timeout=timeout, trust_env=False) as session:
    for endpoint in endpoints:
      wanted = [m for m in needed if owner.get(m) is endpoint]
      if not wanted:
        continue
      try:
        await check_reachable(endpoint.base_url, attempts=reach_attempts, timeout_s=min(timeout_s, 10.0))
      except EndpointUnreachableError as e:
        problems.append(str(e))  # and go on: the other endpoints' problems are reported with it
        continue
      ids, problem = await _served_ids(session, endpoint)
      problem = problem or await _key_problem(session, endpoint)
      if problem:
        problems.append(problem)
        continue
      if ids is not None:
        for model in wanted:
          model_id = endpoint.model_ids[model]
          if model_id in ids:
            checked.append((endpoint.name, model, model_id))
          else:
            listed = ", ".join(sorted(ids)[:8]) + (" ..." if len(ids) > 8 else "")
            problems.append(f"{model}: {endpoint.name} does not serve the id {model_id!r} (it lists: {listed})")
        continue
      factory = client_factory or (lambda ep: LLMClient(ep, max_retries=1, timeout_s=timeout_s, ledger=ledger))
      async with factory(endpoint) as client:
        for model in wanted:
          try:
            r = await client.chat(model, [{"role": "user", "content": "Say OK."}], temperature=0.0, max_tokens=1)
          except LLMError as e:
            problems.append(f"{model}: a one-token request to {endpoint.name} failed: {e}")
            continue
          probes.append(model)
          probe_cost += r.cost_usd
          checked.append((endpoint.name, model, endpoint.model_ids[model]))
  if problems:
    raise PreflightError(problems)
  return PreflightReport(tuple(checked), tuple(probes), probe_cost)
