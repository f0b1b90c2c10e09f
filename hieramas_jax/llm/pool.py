"""A pool file: which server answers for each of the suite's models, at what price, with what budget.

`--pool_file=pool.toml` (or `.yaml`) lets one run mix endpoints: GPT models on OpenAI, open models on a
local vLLM or llama.cpp server, the rest on OpenRouter, or everything on one local server for a smoke
test. One table per suite short name:

    [models."gpt-5-mini"]
    backend = "openai"                       # sim | openai | openrouter | custom
    base_url = "https://api.openai.com/v1"   # optional for openai / openrouter (their public URL)
    key_env = "OPENAI_API_KEY"               # the environment variable holding the key, never the key
    model_id = "gpt-5-mini"                  # the id this endpoint expects
    price_in = 0.25                          # USD per 1M prompt tokens
    price_out = 2.00                         # USD per 1M completion tokens
    price_date = "2025-08-07"                # when that price was read, YYYY-MM-DD (goes into provenance)
    max_tokens = 8192                        # this model's completion budget (replaces the method's)
    think = "strip"                          # <think> blocks: "strip" before the next agents see the
                                             # text (default; traces keep the raw text) or "keep"

Models that share backend, base URL and key variable share one endpoint (one connection pool, one
concurrency bound). A model the file leaves out is not served: a cell that needs it is refused by
the preflight before any call. The shorthand flags (`--backend`, `--base_url`, `--model_map`) still
work and describe a one-endpoint pool.

Every problem of a file is reported at once, in one `PoolFileError` naming the file; keys are read
from the environment when the pool is built, and missing ones are listed too.
"""

from __future__ import annotations

import dataclasses
import hashlib
import json
import os
import pathlib
import re
from typing import Any, Mapping

from hieramas_jax.llm.endpoint import (BACKENDS, DEFAULT_KEY_ENV, OPENAI_BASE_URL, OPENROUTER_BASE_URL,
                                       Endpoint, endpoint_name)
from hieramas_jax.llm.errors import LLMError
from hieramas_jax.llm.registry import MODELS

_FIELDS = {"backend": str, "base_url": str, "key_env": str, "model_id": str, "price_in": (int, float),
           "price_out": (int, float), "price_date": str, "max_tokens": int, "think": str}
THINK_MODES = ("strip", "keep")
_REQUIRED = ("backend", "model_id", "price_in", "price_out", "price_date")
_DEFAULT_URLS = {"openai": OPENAI_BASE_URL, "openrouter": OPENROUTER_BASE_URL}
# One form for every price date, so provenance can be compared and sorted ("2026" or "undated" cannot).
_ISO_DATE = re.compile(r"\d{4}-(?:0[1-9]|1[0-2])-(?:0[1-9]|[12]\d|3[01])")


class PoolFileError(LLMError):
  """A pool file that cannot be used; the message lists every problem found in it."""


@dataclasses.dataclass(frozen=True)
class PoolModel:
  """One model of a pool file (see the module docstring for the fields)."""

  name: str
  backend: str
  base_url: str
  key_env: str
  model_id: str
  price_in: float
  price_out: float
  price_date: str
  max_tokens: int | None = None
  think: str = "strip"


@dataclasses.dataclass(frozen=True)
class Pool:
  """The endpoints of a pool file, built with their keys.

  Attributes:
    name: `pool:<file stem>:<12 hex of the pool's identity>` (backends, URLs, model ids and prices;
      never keys): a run root and provenance name, so two different pools never share a run directory.
    models: the file's models by short name.
    endpoints: one `Endpoint` per (backend, base URL, key variable), each carrying its models' ids,
      prices and completion budgets.
    source: the file's path as given.
  """

  name: str
  models: Mapping[str, PoolModel]
  endpoints: tuple[Endpoint, ...]
  source: str

  def describe(self) -> dict[str, Any]:
    """What provenance records of the pool: every model's route and dated price, no key."""
    return {"pool_file": self.source, "name": self.name,
            "models": {m.name: {k: v for k, v in dataclasses.asdict(m).items() if k != "name"}
                       for m in self.models.values()}}


def read_pool_data(path: pathlib.Path) -> Any:
  """The parsed (not validated) content of a pool file."""
  text = path.read_text(encoding="utf-8")
  if path.suffix == ".toml":
    try:
      import tomllib  # pylint: disable=import-outside-toplevel
    except ModuleNotFoundError:
      raise PoolFileError(f"{path}: TOML pool files need Python 3.11+; use a .yaml pool file") from None
    try:
      return tomllib.loads(text)
    except tomllib.TOMLDecodeError as e:
      raise PoolFileError(f"{path}: not valid TOML: {e}") from None
  if path.suffix in (".yaml", ".yml"):
    import yaml  # pylint: disable=import-outside-toplevel
    try:
      return yaml.safe_load(text)
    except yaml.YAMLError as e:
      raise PoolFileError(f"{path}: not valid YAML: {e}") from None
  raise PoolFileError(f"{path}: a pool file ends in .toml, .yaml or .yml")


def parse_pool(data: Any, source: str) -> dict[str, PoolModel]:
  """The models of a parsed pool file; every problem in one `PoolFileError`."""
  problems = []
  if not isinstance(data, dict) or not isinstance(data.get("models"), dict) or not data["models"]:
    raise PoolFileError(f"{source}: needs a [models.<short name>] table for at least one model")
  extra = sorted(set(data) - {"models"})
  if extra:
    problems.append(f"unknown top-level keys {extra} (only [models.<name>] tables)")
  models = {}
  for name, entry in data["models"].items():
    where = f"models.{name}"
    if name not in MODELS:
      problems.append(f"{where}: unknown model {name!r}; the suite's models are {', '.join(MODELS)}")
      continue
    if not isinstance(entry, dict):
      problems.append(f"{where}: must be a table of fields")
      continue
    bad = False
    for key in sorted(set(entry) - set(_FIELDS)):
      if key == "reasoning":  # read by nothing, ever: a field that looked like a switch and was none
        problems.append(f"{where}: the field 'reasoning' is gone (it was never read); say what happens to "
                        f"the model's <think> blocks with think = \"strip\" (default) or \"keep\"")
      else:
        problems.append(f"{where}: unknown field {key!r}; fields are {', '.join(_FIELDS)}")
      bad = True
    for key in _REQUIRED:
      if key not in entry:
        problems.append(f"{where}: missing {key!r}")
        bad = True
    for key, kind in _FIELDS.items():
      value = entry.get(key)
      if value is None:
        continue
      if isinstance(value, bool) and kind is not bool or not isinstance(value, kind):
        problems.append(f"{where}.{key}: expected {getattr(kind, '__name__', 'a number')}, got {value!r}")
        bad = True
    if bad:
      continue
    backend = entry["backend"]
    if backend not in BACKENDS:
      problems.append(f"{where}.backend: {backend!r} is not one of {', '.join(BACKENDS)}")
      continue
    base_url = entry.get("base_url") or _DEFAULT_URLS.get(backend, "")
    if not base_url.startswith(("http://", "https://")) and not (backend == "sim" and not base_url):
      problems.append(f"{where}.base_url: backend {backend!r} needs an http(s) base URL (.../v1)")
      continue
    if not _ISO_DATE.fullmatch(entry["price_date"]):
      problems.append(f"{where}.price_date: a date YYYY-MM-DD (when the price was read), got "
                      f"{entry['price_date']!r}; a source without a day is dated the day it was read")
    for key in ("price_in", "price_out"):
      if not 0 <= entry[key] < 1000:
        problems.append(f"{where}.{key}: USD per 1M tokens must be in [0, 1000), got {entry[key]!r}")
    if entry.get("think", "strip") not in THINK_MODES:
      problems.append(f"{where}.think: one of {', '.join(THINK_MODES)}, got {entry['think']!r}")
    if entry.get("max_tokens") is not None and entry["max_tokens"] < 1:
      problems.append(f"{where}.max_tokens: must be >= 1")
    models[name] = PoolModel(name=name, backend=backend, base_url=base_url.rstrip("/"),
                             key_env=entry.get("key_env") or DEFAULT_KEY_ENV.get(backend, ""),
                             model_id=entry["model_id"], price_in=float(entry["price_in"]),
                             price_out=float(entry["price_out"]), price_date=entry["price_date"],
                             max_tokens=entry.get("max_tokens"), think=entry.get("think", "strip"))
  if problems:
    raise PoolFileError(f"{source}: {len(problems)} problem(s):\n  " + "\n  ".join(problems))
  return models


def build_pool(models: Mapping[str, PoolModel], source: str, *, environ: Mapping[str, str] | None = None,
               sim_base_url: str | None = None, sim_name: str = "sim") -> Pool:
  """Endpoints for `models`, keys read from `environ` (default `os.environ`); missing keys all listed.

  Args:
    sim_base_url: the embedded sim's URL (started by the caller), for `backend = "sim"` models whose
      entry names no base URL.
    sim_name: that embedded sim's endpoint name (seed, profile and fingerprint: its port changes every
      run, so its URL cannot be its identity in cache keys).
  """
  environ = os.environ if environ is None else environ
  groups: dict[tuple[str, str, str], list[PoolModel]] = {}
  for m in models.values():
    url = m.base_url or sim_base_url
    if not url:
      raise PoolFileError(f"{source}: models.{m.name} uses the embedded sim, which is not running here")
    groups.setdefault((m.backend, url.rstrip("/"), m.key_env), []).append(m)
  missing = sorted({m.key_env for m in models.values() if m.key_env and not environ.get(m.key_env, "").strip()})
  if missing:
    raise PoolFileError(f"{source}: set the API key variable(s) {', '.join(missing)} in the environment "
                        f"(the file names the variables, never the keys)")
  endpoints = []
  embedded = {m.name for m in models.values() if m.backend == "sim" and not m.base_url}
  for (backend, url, key_env), members in sorted(groups.items()):
    is_embedded = all(m.name in embedded for m in members)
    endpoints.append(Endpoint(
        name=sim_name if is_embedded else endpoint_name(backend, url), base_url=url,
        api_key=environ.get(key_env, "").strip() if key_env else "", is_sim=backend == "sim",
        model_ids={m.name: m.model_id for m in members},
        provider_quirks=backend in ("openai", "openrouter", "sim"),
        prices={m.name: (m.price_in, m.price_out) for m in members},
        max_tokens={m.name: m.max_tokens for m in members if m.max_tokens},
        keep_think=frozenset(m.name for m in members if m.think == "keep")))
  identity = json.dumps({n: [m.backend, m.base_url, m.model_id, m.price_in, m.price_out]
                         for n, m in sorted(models.items())}, sort_keys=True)
  stem = pathlib.Path(source).stem
  name = f"pool:{stem}:{hashlib.sha256(identity.encode()).hexdigest()[:12]}"
  return Pool(name=name, models=dict(models), endpoints=tuple(endpoints), source=source)


def read_pool_file(path: str | os.PathLike) -> dict[str, PoolModel]:
  """A pool file's models, read and validated (no key is read: a dry run needs none)."""
  path = pathlib.Path(path)
  if not path.is_file():
    raise PoolFileError(f"{path}: no such pool file")
  return parse_pool(read_pool_data(path), str(path))


def load_pool_file(path: str | os.PathLike, *, environ: Mapping[str, str] | None = None,
                   sim_base_url: str | None = None, sim_name: str = "sim") -> Pool:
  """Read, validate and build a pool file (see the module docstring)."""
  return build_pool(read_pool_file(path), str(path), environ=environ, sim_base_url=sim_base_url,
                    sim_name=sim_name)
