"""Where LLM calls go: one `Endpoint` per run, built from flags and environment variables only.

Backends:
  sim         the embedded simulated pool (hieramas_jax.sim); no key; takes the suite's short names.
  openrouter  https://openrouter.ai/api/v1, key from OPENROUTER_API_KEY; takes `ModelSpec.provider_id`.
  openai      https://api.openai.com/v1, key from OPENAI_API_KEY; takes the id without `openai/`
              (only the OpenAI models of the pool).
  custom      any OpenAI-compatible server (vLLM, a proxy...): --base_url, an optional key from the
              environment variable named by --api_key_env, model ids from --model_map.

A key is read from the environment at the moment the endpoint is built and lives only in the
`Endpoint` object, whose repr/str hide it; there is deliberately no flag that takes a key's value
(flags end up in logs, W&B configs and result provenance).
"""

from __future__ import annotations

import dataclasses
import os
import types
from typing import Any, Mapping

from hieramas_jax.llm.errors import EndpointConfigError, MissingAPIKeyError
from hieramas_jax.llm.registry import MODELS, UnknownModelError

BACKENDS = ("sim", "openrouter", "openai", "custom")
OPENROUTER_BASE_URL = "https://openrouter.ai/api/v1"
OPENAI_BASE_URL = "https://api.openai.com/v1"
DEFAULT_KEY_ENV = {"openrouter": "OPENROUTER_API_KEY", "openai": "OPENAI_API_KEY"}

# Client defaults, shared by the flags and `LLMClient` so both say the same thing.
DEFAULT_MAX_CONCURRENCY = 64
DEFAULT_REQUEST_TIMEOUT_S = 60.0
DEFAULT_MAX_RETRIES = 6


@dataclasses.dataclass(frozen=True)
class Endpoint:
  """An OpenAI-compatible chat-completions endpoint.

  Attributes:
    name: what the endpoint is called in logs, provenance and the response-cache key. For the sim it
      should name the sim's configuration too (e.g. "sim:seed0"), since another sim seed answers
      differently and must not replay this one's cache.
    base_url: OpenAI-style base URL including the version path (".../v1"); requests go to
      `base_url + "/chat/completions"`.
    api_key: bearer token, "" for none. Never shown by repr/str.
    is_sim: True when results come from the simulated pool (they get labelled as such).
    model_ids: suite short name -> the id this endpoint expects. A model absent here is not served
      by this endpoint (`UnknownModelError` before any request).
    provider_quirks: apply the providers' request quirks of a model (GPT-5: `max_completion_tokens`,
      no temperature). True for OpenAI, OpenRouter and the sim (which enforces them like OpenAI); False
      for a custom server (vLLM, llama.cpp, transformers), which serves its own weights under the name
      and takes the standard `max_tokens` and `temperature`.
    prices: short name -> (USD per 1M prompt tokens, per 1M completion tokens) where this endpoint's
      price differs from the registry's frozen one (a pool file's dated price).
    max_tokens: short name -> the model's completion budget on this endpoint (a pool file's); requests
      to it are sent with this budget whatever the method asked, since a reasoning model needs room
      for its hidden reasoning (the run-wide --max_tokens still caps it).
    keep_think: short names whose `<think>` blocks are passed on as they came (a pool file's
      `think = "keep"`); every other model's are stripped before the text reaches the next agents
      (`LLMClient`'s `reasoning_filter`), the raw text kept in `CallResult.raw_text` for traces.
  """

  name: str
  base_url: str
  api_key: str = dataclasses.field(default="", repr=False)
  is_sim: bool = False
  model_ids: Mapping[str, str] = dataclasses.field(default_factory=dict)
  provider_quirks: bool = True
  prices: Mapping[str, tuple[float, float]] = dataclasses.field(default_factory=dict)
  max_tokens: Mapping[str, int] = dataclasses.field(default_factory=dict)
  keep_think: frozenset[str] = frozenset()

  def __post_init__(self):
    if not self.base_url.startswith(("http://", "https://")):
      raise EndpointConfigError(f"endpoint {self.name!r}: base_url must start with http:// or https://, "
                                f"got {self.base_url!r}")
    object.__setattr__(self, "base_url", self.base_url.rstrip("/"))
    object.__setattr__(self, "model_ids", types.MappingProxyType(dict(self.model_ids)))
    object.__setattr__(self, "prices", types.MappingProxyType(dict(self.prices)))
    object.__setattr__(self, "max_tokens", types.MappingProxyType(dict(self.max_tokens)))

  def __repr__(self) -> str:
    key = "<set>" if self.api_key else "<none>"
    return (f"Endpoint(name={self.name!r}, base_url={self.base_url!r}, api_key={key}, "
            f"is_sim={self.is_sim}, models={len(self.model_ids)})")

  __str__ = __repr__

  @property
  def chat_url(self) -> str:
    return self.base_url + "/chat/completions"

  def model_id(self, model: str) -> str:
    """The id this endpoint expects for the suite's short name `model`."""
    try:
      return self.model_ids[model]
    except KeyError:
      raise UnknownModelError(model) from None


def _openai_ids() -> dict[str, str]:
  return {name: spec.provider_id.split("/", 1)[1] for name, spec in MODELS.items()
          if spec.provider_id.startswith("openai/")}


def parse_model_map(entries: list[str] | tuple[str, ...] | None) -> dict[str, str]:
  """`["qwen3-8b=Qwen/Qwen3-8B", ...]` -> {"qwen3-8b": "Qwen/Qwen3-8B"}; short names must be known."""
  out: dict[str, str] = {}
  for entry in entries or ():
    short, sep, target = entry.partition("=")
    short, target = short.strip(), target.strip()
    if not sep or not short or not target:
      raise EndpointConfigError(f"--model_map entry {entry!r} is not SHORT_NAME=ENDPOINT_MODEL_ID")
    if short not in MODELS:
      raise UnknownModelError(short)
    out[short] = target
  return out


def sim_endpoint(base_url: str, *, name: str = "sim") -> Endpoint:
  """The simulated pool at `base_url` (e.g. a `SimHandle.base_url`); serves every short name."""
  return Endpoint(name=name, base_url=base_url, api_key="", is_sim=True,
                  model_ids={m: m for m in MODELS})


def _key_from_env(backend: str, env_var: str, environ: Mapping[str, str]) -> str:
  key = environ.get(env_var, "")
  if not key.strip():
    raise MissingAPIKeyError(backend, env_var)
  return key.strip()


def make_endpoint(backend: str, *, base_url: str | None = None, api_key_env: str | None = None,
                  model_map: Mapping[str, str] | None = None, sim_name: str = "sim",
                  environ: Mapping[str, str] | None = None) -> Endpoint:
  """Build the endpoint of `backend`; keys come from `environ` (default: `os.environ`).

  Args:
    backend: one of `BACKENDS`.
    base_url: required for `custom` and for `sim` (the running sim's URL); overrides the default
      URL of `openrouter` / `openai` (e.g. a proxy).
    api_key_env: name of the environment variable holding the key. Defaults to OPENROUTER_API_KEY /
      OPENAI_API_KEY; for `custom`, unset means the server takes no key.
    model_map: for `custom` (and optionally the others): short name -> endpoint model id. A custom
      endpoint without a map is assumed to serve the suite's short names.
    sim_name: the endpoint name for the sim (goes into the cache key; include the sim seed).
    environ: where keys are read from (tests pass a dict).

  Raises:
    EndpointConfigError: unknown backend or missing --base_url.
    MissingAPIKeyError: a real endpoint whose key variable is unset or empty (names the variable).
  """
  environ = os.environ if environ is None else environ
  if backend not in BACKENDS:
    raise EndpointConfigError(f"unknown backend {backend!r}; known: {', '.join(BACKENDS)}")
  if backend == "sim":
    if not base_url:
      raise EndpointConfigError("backend 'sim' needs the running sim's URL (start it with "
                                "hieramas_jax.sim.server.start_sim_in_thread, or pass --base_url)")
    return sim_endpoint(base_url, name=sim_name)
  if backend == "custom":
    if not base_url:
      raise EndpointConfigError("backend 'custom' needs --base_url (an OpenAI-compatible .../v1 URL)")
    key = _key_from_env(backend, api_key_env, environ) if api_key_env else ""
    ids = dict(model_map) if model_map else {m: m for m in MODELS}
    return Endpoint(name=endpoint_name("custom", base_url), base_url=base_url, api_key=key, model_ids=ids,
                    provider_quirks=False)
  key = _key_from_env(backend, api_key_env or DEFAULT_KEY_ENV[backend], environ)
  if backend == "openrouter":
    ids = {name: spec.provider_id for name, spec in MODELS.items()}
    url = base_url or OPENROUTER_BASE_URL
  else:
    ids = _openai_ids()
    url = base_url or OPENAI_BASE_URL
  ids.update(model_map or {})
  return Endpoint(name=endpoint_name(backend, url), base_url=url, api_key=key, model_ids=ids)


def endpoint_name(backend: str, base_url: str) -> str:
  """`backend:base_url`: the endpoint's identity in cache keys, run roots and provenance.

  The URL is part of it because two servers behind one backend name (OpenAI and a proxy, two local
  vLLM servers on different ports) answer differently: neither may replay the other's answers.
  """
  return f"{backend}:{base_url.rstrip('/')}"


def define_backend_flags(flag_values: Any = None) -> None:
  """Define the backend flags every entry point shares (idempotent: safe to call twice)."""
  from absl import flags
  fv = flags.FLAGS if flag_values is None else flag_values
  if "backend" in fv:
    return
  flags.DEFINE_enum("backend", "sim", list(BACKENDS),
                    "Where LLM calls go: the embedded simulated pool or a real OpenAI-compatible endpoint.",
                    flag_values=fv)
  flags.DEFINE_enum("sim_profile", "fitted", ["low", "fitted", "high"],
                    "The simulated pool's aggregation profile (sim.params.PROFILES): the collaboration "
                    "fit's best point or an end of its confidence region. Ignored off the sim.",
                    flag_values=fv)
  flags.DEFINE_string("base_url", None,
                      "OpenAI-style base URL (.../v1). Required for custom; for sim, an already-running "
                      "sim server (otherwise the suite starts one); overrides openrouter/openai URLs.",
                      flag_values=fv)
  flags.DEFINE_string("api_key_env", None,
                      "Name of the environment variable holding the API key (never the key itself). "
                      "Default OPENROUTER_API_KEY / OPENAI_API_KEY; custom: unset means no key.",
                      flag_values=fv)
  flags.DEFINE_list("model_map", [],
                    "SHORT=ID pairs mapping suite model names to the endpoint's model ids "
                    "(custom endpoints, e.g. qwen3-8b=Qwen/Qwen3-8B).", flag_values=fv)
  flags.DEFINE_string("pool_file", None,
                      "A pool file (.toml/.yaml, launch/pools/*.toml): per model its backend, base URL, key "
                      "variable, model id, dated price and budget; one run can mix endpoints. Replaces "
                      "--backend/--base_url/--api_key_env/--model_map.", flag_values=fv)
  flags.DEFINE_float("max_usd", None,
                     "Hard cap on what this run root (--run_root) ever pays: every seed, cell and rerun under it "
                     "together, training included; every attempt the provider may bill counts (llm/ledger.py), "
                     "checked before each is sent. At the cap the run stops, saying what was spent, and resumes "
                     "later without paying twice.",
                     lower_bound=0.0, flag_values=fv)
  flags.DEFINE_integer("max_concurrency", DEFAULT_MAX_CONCURRENCY,
                       "Most requests in flight to the endpoint at once.", lower_bound=1, flag_values=fv)
  flags.DEFINE_float("request_timeout_s", DEFAULT_REQUEST_TIMEOUT_S,
                     "Seconds before one request is abandoned (and retried).", lower_bound=0.001,
                     flag_values=fv)
  flags.DEFINE_integer("max_tokens", None,
                       "Run-wide cap on completion tokens per call, for every method and training stage "
                       "(a method asking for more is sent this many). Unset: each method's own budget.",
                       lower_bound=1, flag_values=fv)
  flags.DEFINE_integer("max_retries", DEFAULT_MAX_RETRIES,
                       "Retries after the first attempt on 408/409/429/5xx, timeouts and dropped "
                       "connections.", lower_bound=0, flag_values=fv)


def endpoint_from_flags(flag_values: Any, *, sim_base_url: str | None = None, sim_name: str = "sim",
                        environ: Mapping[str, str] | None = None) -> Endpoint:
  """The endpoint the flags describe. For `--backend=sim`, `sim_base_url` is the sim the caller
  started (used when --base_url is not given)."""
  base_url = flag_values.base_url
  if flag_values.backend == "sim" and not base_url:
    base_url = sim_base_url
  return make_endpoint(flag_values.backend, base_url=base_url, api_key_env=flag_values.api_key_env,
                       model_map=parse_model_map(flag_values.model_map), sim_name=sim_name,
                       environ=environ)


def client_options_from_flags(flag_values: Any) -> dict[str, Any]:
  """Keyword arguments for `LLMClient` from the shared flags."""
  return {"max_concurrency": flag_values.max_concurrency, "timeout_s": flag_values.request_timeout_s,
          "max_retries": flag_values.max_retries, "max_tokens_cap": getattr(flag_values, "max_tokens", None)}
