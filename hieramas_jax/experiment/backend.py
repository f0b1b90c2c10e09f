"""The run's one LLM client: the embedded simulated pool unless flags name a real endpoint.

`open_backend(flags, seed)` starts the sim in a thread when `--backend=sim` and no `--base_url` is
given, builds the endpoint from the shared backend flags (keys only from the environment), checks that
any other endpoint accepts a connection (before a run writes anything), opens the on-disk response
cache and one `LLMClient`, and tears all of it down on exit.
"""

from __future__ import annotations

import asyncio
import contextlib
import dataclasses
import functools
import hashlib
import os
import pathlib
import urllib.parse
from typing import Any, AsyncIterator

from hieramas_jax.llm.cache import ResponseCache
from hieramas_jax.llm.client import LLMClient
from hieramas_jax.llm.endpoint import Endpoint, client_options_from_flags, endpoint_from_flags
from hieramas_jax.llm.errors import EndpointConfigError, EndpointUnreachableError
from hieramas_jax.paths import DATA_DIR, PACKAGE_DIR, cache_dir

BACKEND_FLAG_NAMES = ("backend", "sim_profile", "base_url", "api_key_env", "model_map", "max_concurrency",
                      "request_timeout_s", "max_retries")


@dataclasses.dataclass
class Backend:
  """What a run talks to."""

  client: LLMClient
  endpoint: Endpoint
  cache: ResponseCache | None

  @property
  def label(self) -> str:
    """"sim" for the simulated pool (results get labelled), else the endpoint's name."""
    return "sim" if self.endpoint.is_sim else self.endpoint.name


@functools.lru_cache(maxsize=1)
def sim_fingerprint() -> str:
  """sha256 over the simulator's code and data files (hieramas_jax/sim, hieramas_jax/data/sim).

  A change to the sim (a parameter, a refit theta, new mutants) changes its answers; the fingerprint
  goes into the sim endpoint's name and so into every response-cache key and run directory name, so
  answers of an older sim are never replayed into a newer run.
  """
  digest = hashlib.sha256()
  for root in (PACKAGE_DIR / "sim", DATA_DIR / "sim"):
    for path in sorted(root.rglob("*")):
      if path.is_file() and path.suffix in (".py", ".json", ".gz"):
        digest.update(str(path.relative_to(PACKAGE_DIR)).encode())
        digest.update(path.read_bytes())
  return digest.hexdigest()


def sim_endpoint_name(seed: int, profile: str = "fitted") -> str:
  """The embedded sim's endpoint name, `sim:seed<s>:<profile>:<fingerprint[:12]>`: part of every cache
  key and of the provenance, so neither another seed, another aggregation profile nor another version
  of the sim ever replays this one's answers."""
  return f"sim:seed{seed}:{profile}:{sim_fingerprint()[:12]}"


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


@contextlib.asynccontextmanager
async def open_backend(flag_values: Any, *, seed: int, use_cache: bool = True,
                       cache_root: str | os.PathLike | None = None,
                       sim_process: bool = False) -> AsyncIterator[Backend]:
  """Yields a `Backend` for the run described by the shared backend flags.

  Args:
    flag_values: absl FLAGS (or any object with the backend flag attributes).
    seed: the run's seed; also the embedded sim's seed and the client's jitter seed.
    use_cache: keep the on-disk response cache (a rerun replays, a killed run resumes for free).
    cache_root: defaults to `paths.cache_dir()`.
    sim_process: serve the embedded sim from its own process instead of a thread (its own core: a
      large run is CPU-bound on both sides); same endpoint name, so cached answers stay valid.
  """
  handle = None
  cache = None
  try:
    profile = getattr(flag_values, "sim_profile", "fitted")
    sim_name = sim_endpoint_name(seed, profile)
    if flag_values.backend == "sim" and not flag_values.base_url:
      from hieramas_jax.sim import server  # pylint: disable=import-outside-toplevel
      start = server.start_sim_subprocess if sim_process else server.start_sim_in_thread
      handle = start(server.SimConfig(seed=seed, profile=profile))
      base_url = handle.base_url
    else:
      base_url = None
      # An external sim's seed is unknown here: name it by its URL so caches never mix.
      sim_name = f"sim:{flag_values.base_url}" if flag_values.base_url else sim_name
    endpoint = endpoint_from_flags(flag_values, sim_base_url=base_url, sim_name=sim_name)
    if handle is None:  # the embedded sim has just started; anything else may not be there
      await check_reachable(endpoint.base_url)
    if use_cache:
      cache = ResponseCache(pathlib.Path(cache_root or cache_dir()) / "responses")
    async with LLMClient(endpoint, cache=cache, seed=seed, **client_options_from_flags(flag_values)) as client:
      yield Backend(client, endpoint, cache)
  finally:
    # The sim first, and in a `finally` of its own: an error closing the cache (a full disk) must
    # not leave the sim's process running.
    try:
      if handle is not None:
        handle.close()
    finally:
      if cache is not None:
        cache.close()
