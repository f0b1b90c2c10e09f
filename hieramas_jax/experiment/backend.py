"""The run's one LLM client: the embedded simulated pool unless flags name real endpoints.

`open_backend(flags, seed)` starts the sim in a thread when `--backend=sim` and no `--base_url` is
given (or when a `--pool_file` puts a model on the sim), builds the endpoint(s) from the shared backend
flags or the pool file (keys only from the environment), checks that every real endpoint answers and
serves every model the run needs (the preflight, before a run writes anything or pays anything),
opens the on-disk response cache and one client (an `LLMClient`, or a `PoolClient` over a pool file's
endpoints) with the run's spending cap, and tears all of it down on exit.
"""

from __future__ import annotations

import ast
import contextlib
import dataclasses
import functools
import hashlib
import os
import pathlib
import sys
from typing import Any, AsyncIterator, Iterable, Sequence

from hieramas_jax.benchmarks.extract import strip_reasoning
from hieramas_jax.llm.cache import ResponseCache
from hieramas_jax.llm.client import LLMClient, PoolClient
from hieramas_jax.llm.endpoint import Endpoint, client_options_from_flags, endpoint_from_flags
from hieramas_jax.llm.errors import EndpointConfigError
from hieramas_jax.llm.ledger import SpendLedger
from hieramas_jax.llm.pool import Pool, build_pool, read_pool_file
from hieramas_jax.llm.preflight import PreflightReport, preflight
from hieramas_jax.llm.registry import POOLS
from hieramas_jax.paths import DATA_DIR, PACKAGE_DIR, cache_dir

BACKEND_FLAG_NAMES = ("backend", "sim_profile", "base_url", "api_key_env", "model_map", "pool_file", "max_concurrency",
                      "request_timeout_s", "max_retries", "max_tokens", "max_usd")


@dataclasses.dataclass
class Backend:
  """What a run talks to.

  Attributes:
    client: `chat(model, ...)` for every model of the run (an `LLMClient`, or a `PoolClient` routing a
      pool file's models to their endpoints).
    endpoint: the one endpoint, or for a pool file an identity stand-in named after the pool (its
      `name` is what run roots, cache rows and provenance use; `endpoints` holds the real ones).
    cache: the response store, or None.
    endpoints: every endpoint the client talks to.
    pool: the pool file, if the run uses one.
    ledger: the run root's spend ledger (with the `--max_usd` cap), shared by every endpoint's client;
      None on the embedded sim without a cap (it bills nothing).
    preflight: what the preflight checked (None for the embedded sim).
  """

  client: LLMClient | PoolClient
  endpoint: Endpoint
  cache: ResponseCache | None
  endpoints: tuple[Endpoint, ...] = ()
  pool: Pool | None = None
  ledger: SpendLedger | None = None
  preflight: PreflightReport | None = None

  @property
  def label(self) -> str:
    """"sim" for the simulated pool (results get labelled), else the endpoint's (or pool's) name."""
    return "sim" if self.endpoint.is_sim else self.endpoint.name

  def describe(self) -> dict[str, Any]:
    """Provenance of where the calls went: endpoint names, URLs and model ids, the pool file's dated
    prices, the spending cap and what was spent. Never a key."""
    out: dict[str, Any] = {"name": self.endpoint.name,
                           "endpoints": [{"name": ep.name, "base_url": ep.base_url, "models": dict(ep.model_ids)}
                                         for ep in (self.endpoints or (self.endpoint,))]}
    if self.pool is not None:
      out["pool"] = self.pool.describe()
    if self.ledger is not None:
      out["spend"] = self.ledger.summary()
    return out


def pool_models(pools: Iterable[str]) -> tuple[str, ...]:
  """Every model the given pool settings (Table 1 columns) may call: what the preflight checks."""
  return tuple(sorted({m for p in pools for m in POOLS[p].models}))


def _behaviour_bytes(path: pathlib.Path) -> bytes:
  """What of a sim file decides its behaviour: a .py file's syntax tree with docstrings removed
  (comments and layout never reach the tree; line numbers are left out), any other file's bytes."""
  if path.suffix != ".py":
    return path.read_bytes()
  tree = ast.parse(path.read_text())
  for node in ast.walk(tree):
    body = getattr(node, "body", None)
    if isinstance(body, list):
      node.body = [s for s in body if not (isinstance(s, ast.Expr) and isinstance(s.value, ast.Constant)
                                           and isinstance(s.value.value, str))]
  return canonical_tree(tree).encode()


def canonical_tree(node: Any) -> str:
  """A syntax tree written the same way by every supported Python (3.10 to 3.13).

  `ast.dump` is not: 3.12 added `type_params=[]` to every function and class, and 3.13 omits empty
  fields, so the same sim had three fingerprints (36581aa90998 on 3.10/3.11, 3d31224bb180 on 3.12,
  c132280c7e96 on 3.13) and a user on a newer Python replayed nothing and matched no committed
  provenance. Fields that are None or empty are left out, the way newer Pythons add them.
  """
  if isinstance(node, ast.AST):
    fields = (f"{name}={canonical_tree(value)}" for name, value in ast.iter_fields(node)
              if value is not None and not (isinstance(value, list) and not value))
    return "(" + " ".join((type(node).__name__, *fields)) + ")"
  if isinstance(node, list):
    return "[" + ",".join(canonical_tree(x) for x in node) + "]"
  return repr(node)


def sim_fingerprint(roots: Sequence[pathlib.Path] | None = None) -> str:
  """sha256 over the simulator's behaviour: its code and data files (hieramas_jax/sim, hieramas_jax/data/sim).

  A change to the sim (a parameter, a refit theta, new mutants) changes its answers; the fingerprint
  goes into the sim endpoint's name and so into every response-cache key and run directory name, so
  answers of an older sim are never replayed into a newer run. Code is hashed as its syntax tree
  without docstrings, so an edit to a docstring, a comment or the layout keeps every cached answer.

  Args:
    roots: folders to hash (tests pass a temporary copy); default the sim's code and data.
  """
  roots = (PACKAGE_DIR / "sim", DATA_DIR / "sim") if roots is None else tuple(roots)
  digest = hashlib.sha256()
  for i, root in enumerate(roots):
    for path in sorted(root.rglob("*")):
      if path.is_file() and path.suffix in (".py", ".json", ".gz"):
        digest.update(f"{i}:{path.relative_to(root)}".encode())
        digest.update(_behaviour_bytes(path))
  return digest.hexdigest()


@functools.lru_cache(maxsize=1)
def _installed_sim_fingerprint() -> str:
  """The installed sim's fingerprint, once per process: parsing every sim file is not free, and every
  backend and run directory name asks for it."""
  return sim_fingerprint()


def sim_endpoint_name(seed: int, profile: str = "fitted") -> str:
  """The embedded sim's endpoint name, `sim:seed<s>:<profile>:<fingerprint[:12]>`: part of every cache
  key and of the provenance, so neither another seed, another aggregation profile nor another version
  of the sim ever replays this one's answers."""
  return f"sim:seed{seed}:{profile}:{_installed_sim_fingerprint()[:12]}"


def _pool_identity(pool: Pool) -> Endpoint:
  """The stand-in `Backend.endpoint` of a pool file: named after the pool, sim only if every model is."""
  first = pool.endpoints[0]
  return Endpoint(name=pool.name, base_url=first.base_url, is_sim=all(ep.is_sim for ep in pool.endpoints),
                  model_ids={m: ep.model_ids[m] for ep in pool.endpoints for m in ep.model_ids})


@contextlib.asynccontextmanager
async def open_backend(flag_values: Any, *, seed: int, use_cache: bool = True,
                       cache_root: str | os.PathLike | None = None, sim_process: bool = False,
                       needed_models: Iterable[str] | None = None,
                       ledger_dir: str | os.PathLike | None = None) -> AsyncIterator[Backend]:
  """Yields a `Backend` for the run described by the shared backend flags.

  Args:
    flag_values: absl FLAGS (or any object with the backend flag attributes).
    seed: the run's seed; also the embedded sim's seed and the client's jitter seed.
    use_cache: keep the on-disk response cache (a rerun replays, a killed run resumes for free).
    cache_root: defaults to `paths.cache_dir()`.
    sim_process: serve the embedded sim from its own process instead of a thread (its own core: a
      large run is CPU-bound on both sides); same endpoint name, so cached answers stay valid.
    needed_models: the models the run's cells may call (`pool_models(spec.pools)`); the preflight
      checks each against its real endpoint before anything is written or paid. None: every model the
      endpoints map.
    ledger_dir: the run root, where the spend ledger lives (one total over every seed, cell and rerun
      under it; written at the first paid attempt); None keeps it in this process's memory.

  Raises:
    PoolFileError, PreflightError, MissingAPIKeyError: before any call.
  """
  handle = None
  cache = None
  ledger = None
  pool_file = getattr(flag_values, "pool_file", None)
  if pool_file and (flag_values.backend != "sim" or flag_values.base_url or flag_values.model_map
                    or flag_values.api_key_env):
    raise EndpointConfigError("--pool_file names every model's endpoint: drop --backend, --base_url, "
                              "--api_key_env and --model_map (or drop --pool_file)")
  try:
    profile = getattr(flag_values, "sim_profile", "fitted")
    sim_name = sim_endpoint_name(seed, profile)
    models = read_pool_file(pool_file) if pool_file else None
    wants_sim = (models is not None and any(m.backend == "sim" and not m.base_url for m in models.values())) \
        or (models is None and flag_values.backend == "sim" and not flag_values.base_url)
    pool = None
    base_url = None
    if wants_sim:
      from hieramas_jax.sim import server  # pylint: disable=import-outside-toplevel
      start = server.start_sim_subprocess if sim_process else server.start_sim_in_thread
      handle = start(server.SimConfig(seed=seed, profile=profile))
      base_url = handle.base_url
    elif flag_values.base_url:
      # An external sim's seed is unknown here: name it by its URL so caches never mix.
      sim_name = f"sim:{flag_values.base_url}"
    if models is not None:
      pool = build_pool(models, str(pool_file), sim_base_url=base_url, sim_name=sim_name)
      endpoints = pool.endpoints
      endpoint = _pool_identity(pool)
    else:
      endpoint = endpoint_from_flags(flag_values, sim_base_url=base_url, sim_name=sim_name)
      endpoints = (endpoint,)
    real = [ep for ep in endpoints if handle is None or ep.base_url != handle.base_url.rstrip("/")]
    max_usd = getattr(flag_values, "max_usd", None)
    # Every billed (or possibly billed) attempt under this run root, and the cap on their total. The
    # embedded sim bills nothing: it gets a ledger only to enforce a cap.
    ledger = SpendLedger(ledger_dir, max_usd) if real or max_usd is not None else None
    report = None
    if real:  # the embedded sim has just started; anything else may not be there (the preflight says)
      needed = set(endpoint.model_ids) if needed_models is None else set(needed_models)
      sim_served = {m for ep in endpoints if ep not in real for m in ep.model_ids}
      report = await preflight(real, needed - sim_served, ledger=ledger) if needed - sim_served else None
    if use_cache:
      cache = ResponseCache(pathlib.Path(cache_root or cache_dir()) / "responses")
    # <think> blocks stripped before the next agents read a text (a pool file's `think = "keep"` aside).
    options = dict(client_options_from_flags(flag_values), cache=cache, seed=seed, ledger=ledger,
                   reasoning_filter=strip_reasoning)
    client = PoolClient(endpoints, **options) if pool is not None else LLMClient(endpoint, **options)
    async with client:
      yield Backend(client, endpoint, cache, tuple(endpoints), pool, ledger, report)
  finally:
    # The sim first, and in a `finally` of its own: an error closing the cache (a full disk) must
    # not leave the sim's process running.
    try:
      if handle is not None:
        handle.close()
    finally:
      try:
        if cache is not None:
          cache.close()
      finally:
        if ledger is not None:
          if ledger.summary()["attempts"]:  # the console's account of what the run root spent
            print(ledger.line(), file=sys.stderr, flush=True)
          ledger.close()
