"""The simulated LLM pool as an OpenAI-compatible HTTP server (aiohttp, loopback).

It sees only the HTTP request (docs/simulator.md, principle 1): `POST /v1/chat/completions` and
`GET /v1/models` with the OpenAI schemas and error bodies. The answer comes from the behaviour
model (`model.BehaviourModel`); cost is never returned (the client prices usage itself).

Start it:
  * in-process: `handle = start_sim_in_thread(SimConfig(seed=0))`; `handle.base_url` is
    "http://127.0.0.1:PORT/v1"; `handle.close()`;
  * own process (benchmarks): `start_sim_subprocess(SimConfig(...))`, same handle;
  * command line: `python -m hieramas_jax.sim.serve --port=8000 --seed=0` (`make sim-server`;
    the program is sim/serve.py).

Faults (off by default) are drawn per attempt, from a hash of (seed, request body, how many
times that body has arrived), so a retried request eventually succeeds and a run is repeatable.
"""

from __future__ import annotations

import asyncio
import dataclasses
import functools
import hashlib
import json
import os
import subprocess
import sys
import threading
import time
from typing import Any, Callable

from aiohttp import web

from hieramas_jax.llm.registry import MODELS
from hieramas_jax.paths import REPO_DIR
from hieramas_jax.sim import params as P
from hieramas_jax.sim.hashing import uniforms
from hieramas_jax.sim.model import BehaviourModel, count_tokens, prompt_tokens

READY_PREFIX = "SIM_READY "  # the served URL, on the first line of a served sim's stdout
# Set by `start_sim_subprocess` in the child's environment: the server (sim/serve.py) dies with its parent.
PARENT_PID_ENV = "HIERAMAS_SIM_PARENT_PID"
_MAX_TRACKED_BODIES = 200_000  # attempt counters kept for fault draws
_ROLES = ("system", "developer", "user", "assistant", "tool")


class SimConfigError(ValueError):
  """An invalid simulator setting (a rate outside [0, 1], a negative delay...)."""


@dataclasses.dataclass(frozen=True)
class SimConfig:
  """Settings of one sim server.

  Attributes:
    seed: the simulated world's seed (answers change with it; item difficulty does not).
    latency_scale: multiplies each model's latency model (0 = answer at once).
    fixed_latency_s: if set, every call takes exactly this long (overrides latency_scale).
    fault_rate_429: share of attempts answered 429 with Retry-After.
    fault_rate_5xx: share answered 500 or 503.
    fault_rate_stall: share that wait `stall_s` before answering (past a client's timeout).
    stall_s: length of a stall.
    fault_rate_drop: share whose connection is closed without a response.
    fault_rate_malformed: share answered 200 with a truncated JSON body.
    retry_after_s: the Retry-After a 429 carries (also sent as retry-after-ms).
    strict_quirks: reject what the real APIs reject (a non-default temperature or `max_tokens`
      for GPT-5 models), so code that works on the sim works on the real endpoints.
    profile: the aggregation profile served (`params.PROFILES`: low, fitted, high), one point of
      the collaboration fit's confidence region; nothing else differs between profiles.
  """

  seed: int = 0
  latency_scale: float = 0.0
  fixed_latency_s: float | None = None
  fault_rate_429: float = 0.0
  fault_rate_5xx: float = 0.0
  fault_rate_stall: float = 0.0
  stall_s: float = 30.0
  fault_rate_drop: float = 0.0
  fault_rate_malformed: float = 0.0
  retry_after_s: float = 0.05
  strict_quirks: bool = True
  profile: str = P.DEFAULT_PROFILE

  def __post_init__(self):
    if type(self.seed) is not int:
      raise SimConfigError(f"seed must be an int, got {self.seed!r}")
    if self.profile not in P.PROFILES:
      raise SimConfigError(f"profile must be one of {', '.join(P.PROFILES)}, got {self.profile!r}")
    for name in ("fault_rate_429", "fault_rate_5xx", "fault_rate_stall", "fault_rate_drop",
                 "fault_rate_malformed"):
      v = getattr(self, name)
      if not 0.0 <= v <= 1.0:
        raise SimConfigError(f"{name} must be in [0, 1], got {v!r}")
    if self.total_fault_rate > 1.0:
      raise SimConfigError(f"fault rates add up to {self.total_fault_rate} > 1")
    for name in ("latency_scale", "stall_s", "retry_after_s"):
      if getattr(self, name) < 0:
        raise SimConfigError(f"{name} must be >= 0, got {getattr(self, name)!r}")
    if self.fixed_latency_s is not None and self.fixed_latency_s < 0:
      raise SimConfigError(f"fixed_latency_s must be >= 0, got {self.fixed_latency_s!r}")

  @property
  def total_fault_rate(self) -> float:
    return (self.fault_rate_429 + self.fault_rate_5xx + self.fault_rate_stall + self.fault_rate_drop
            + self.fault_rate_malformed)

  def to_args(self) -> list[str]:
    """Command-line flags that recreate this config in `python -m hieramas_jax.sim.serve`."""
    args = []
    for f in dataclasses.fields(self):
      v = getattr(self, f.name)
      if v is None:
        continue
      args.append(f"--{f.name}={int(v) if isinstance(v, bool) else v}")
    return args


class _BadRequest(Exception):
  def __init__(self, status: int, message: str, param: str | None, code: str | None,
               type_: str = "invalid_request_error"):
    super().__init__(message)
    self.status, self.message, self.param, self.code, self.type = status, message, param, code, type_


def error_response(status: int, message: str, *, param: str | None = None, code: str | None = None,
                   type_: str = "invalid_request_error",
                   headers: dict[str, str] | None = None) -> web.Response:
  """An OpenAI-style error body."""
  body = {"error": {"message": message, "type": type_, "param": param, "code": code}}
  return web.Response(status=status, text=json.dumps(body), content_type="application/json",
                      headers=headers)


@functools.lru_cache(maxsize=4)
def _behaviour(seed: int, profile: str = P.DEFAULT_PROFILE) -> BehaviourModel:
  """One behaviour model per (seed, profile) per process (loading takes ~2 s; tests share it)."""
  return BehaviourModel(seed, profile)


def _content_text(content: Any, where: str) -> str:
  if isinstance(content, str):
    return content
  if isinstance(content, list):  # [{"type": "text", "text": ...}, ...]
    parts = []
    for part in content:
      if not isinstance(part, dict) or part.get("type") != "text" or not isinstance(part.get("text"), str):
        raise _BadRequest(400, f"Invalid content part in {where}: only text parts are supported.",
                          where, None)
      parts.append(part["text"])
    return "".join(parts)
  if content is None:
    return ""
  raise _BadRequest(400, f"Invalid type for '{where}.content': expected a string.", where, "invalid_type")


def _number(body: dict, name: str, lo: float, hi: float) -> float | None:
  v = body.get(name)
  if v is None:
    return None
  if isinstance(v, bool) or not isinstance(v, (int, float)) or not lo <= v <= hi:
    raise _BadRequest(400, f"Invalid '{name}': expected a number in [{lo}, {hi}], got {v!r}.",
                      name, "invalid_value")
  return float(v)


def _int(body: dict, name: str, lo: int) -> int | None:
  v = body.get(name)
  if v is None:
    return None
  if isinstance(v, bool) or not isinstance(v, int) or v < lo:
    raise _BadRequest(400, f"Invalid '{name}': expected an integer >= {lo}, got {v!r}.",
                      name, "invalid_value")
  return v


def parse_request(raw: bytes, strict_quirks: bool) -> dict:
  """Validates a chat-completions body like the real API; returns the fields the sim uses."""
  try:
    body = json.loads(raw)
  except (ValueError, UnicodeDecodeError):
    raise _BadRequest(400, "We could not parse the JSON body of your request. (HINT: This likely "
                      "means you aren't using your HTTP library correctly.)", None, None) from None
  if not isinstance(body, dict):
    raise _BadRequest(400, "The request body must be a JSON object.", None, None)
  model = body.get("model")
  if not isinstance(model, str) or not model:
    raise _BadRequest(400, "you must provide a model parameter", "model", None)
  messages = body.get("messages")
  if not isinstance(messages, list) or not messages:
    raise _BadRequest(400, "'messages' must be a non-empty array.", "messages", "invalid_value")
  clean = []
  for i, m in enumerate(messages):
    where = f"messages[{i}]"
    if not isinstance(m, dict) or m.get("role") not in _ROLES:
      raise _BadRequest(400, f"Invalid value for '{where}.role': expected one of {', '.join(_ROLES)}.",
                        f"{where}.role", "invalid_value")
    clean.append({"role": m["role"], "content": _content_text(m.get("content"), where)})
  if model not in MODELS:
    raise _BadRequest(404, f"The model `{model}` does not exist or you do not have access to it.",
                      None, "model_not_found")
  temperature = _number(body, "temperature", 0.0, 2.0)
  top_p = _number(body, "top_p", 0.0, 1.0)
  max_tokens = _int(body, "max_tokens", 1)
  max_completion = _int(body, "max_completion_tokens", 1)
  seed = _int(body, "seed", 0)
  n = _int(body, "n", 1)
  if n not in (None, 1):
    raise _BadRequest(400, "The simulated pool serves n=1 only; send one request per sample "
                      "(the `seed` field is the sample index).", "n", "unsupported_value")
  if body.get("stream"):
    raise _BadRequest(400, "The simulated pool does not stream; set stream=false.", "stream",
                      "unsupported_value")
  spec = MODELS[model]
  if strict_quirks and spec.max_tokens_field == "max_completion_tokens" and max_tokens is not None:
    raise _BadRequest(400, "Unsupported parameter: 'max_tokens' is not supported with this model. "
                      "Use 'max_completion_tokens' instead.", "max_tokens", "unsupported_parameter")
  if strict_quirks and spec.fixed_temperature and temperature is not None and temperature != 1.0:
    raise _BadRequest(400, f"Unsupported value: 'temperature' does not support {body['temperature']} "
                      "with this model. Only the default (1) value is supported.", "temperature",
                      "unsupported_value")
  return {"model": model, "messages": clean, "temperature": temperature, "top_p": top_p,
          "limit": max_completion if max_completion is not None else max_tokens,
          "sample_index": seed or 0}


def completion(config: SimConfig, behaviour: BehaviourModel, req: dict, raw: bytes
               ) -> tuple[dict, float]:
  """The chat.completion object for a parsed request, and how long the call should take."""
  model = req["model"]
  reply = behaviour.reply(model, req["messages"], req["temperature"], req["top_p"],
                          req["sample_index"])
  text, reasoning = reply.text, reply.reasoning_tokens
  visible = count_tokens(text)
  finish = "stop"
  limit = req["limit"]
  if limit is not None and reasoning + visible > limit:
    finish = "length"
    if reasoning >= limit:
      reasoning, text, visible = limit, "", 0
    else:
      visible = limit - reasoning
      text = text[:int(visible * P.CHARS_PER_TOKEN)]
  completion_tokens = visible + reasoning
  n_prompt = prompt_tokens(req["messages"])
  usage: dict[str, Any] = {"prompt_tokens": n_prompt, "completion_tokens": completion_tokens,
                           "total_tokens": n_prompt + completion_tokens}
  behave = P.BEHAVIOUR[model]
  if behave.reasons_hidden:
    usage["completion_tokens_details"] = {"reasoning_tokens": reasoning}
  body = {
      "id": "chatcmpl-" + hashlib.blake2b(raw, digest_size=12, key=str(config.seed).encode()).hexdigest(),
      "object": "chat.completion",
      "created": int(time.time()),
      "model": model,
      "system_fingerprint": f"fp_hieramas_sim_{config.seed}_{config.profile}",
      "choices": [{"index": 0, "message": {"role": "assistant", "content": text, "refusal": None},
                   "logprobs": None, "finish_reason": finish}],
      "usage": usage,
  }
  if config.fixed_latency_s is not None:
    delay = config.fixed_latency_s
  else:
    delay = config.latency_scale * (behave.latency_base_s + behave.latency_per_token_s * completion_tokens)
  return body, delay


def make_app(config: SimConfig = SimConfig()) -> web.Application:
  """The aiohttp application; loads the behaviour model now (errors surface in the caller)."""
  behaviour = _behaviour(config.seed, config.profile)
  attempts: dict[bytes, int] = {}
  faults_on = config.total_fault_rate > 0
  bounds = []
  acc = 0.0
  for kind, rate in (("429", config.fault_rate_429), ("5xx", config.fault_rate_5xx),
                     ("stall", config.fault_rate_stall), ("drop", config.fault_rate_drop),
                     ("malformed", config.fault_rate_malformed)):
    acc += rate
    bounds.append((acc, kind))

  def draw_fault(raw: bytes) -> tuple[str | None, float]:
    key = hashlib.blake2b(raw, digest_size=16).digest()
    if len(attempts) >= _MAX_TRACKED_BODIES:
      # Bounded memory on long runs; a retry in flight just restarts its count (still succeeds).
      attempts.clear()
    attempt = attempts.get(key, 0)
    attempts[key] = attempt + 1
    u, u2 = uniforms("fault", config.seed, key, attempt)[:2]
    for bound, kind in bounds:
      if u < bound:
        return kind, u2
    return None, u2

  async def chat_completions(request: web.Request) -> web.StreamResponse:
    raw = await request.read()
    try:
      req = parse_request(raw, config.strict_quirks)
    except _BadRequest as e:
      return error_response(e.status, e.message, param=e.param, code=e.code, type_=e.type)
    if faults_on:
      fault, u2 = draw_fault(raw)
      if fault == "429":
        return error_response(
            429, "Rate limit reached for requests (simulated). Please try again shortly.",
            code="rate_limit_exceeded", type_="requests",
            headers={"Retry-After": f"{config.retry_after_s:g}",
                     "retry-after-ms": str(int(round(config.retry_after_s * 1000)))})
      if fault == "5xx":
        status = 500 if u2 < 0.5 else 503
        return error_response(status, "The server had an error while processing your request "
                              "(simulated).", type_="server_error")
      if fault == "stall":
        await asyncio.sleep(config.stall_s)
      elif fault == "drop":
        if request.transport is not None:
          request.transport.abort()
        raise asyncio.CancelledError()
      elif fault == "malformed":
        return web.Response(status=200, body=b'{"id": "chatcmpl-sim", "object": "chat.comp',
                            content_type="application/json")
    body, delay = completion(config, behaviour, req, raw)
    if delay > 0:
      await asyncio.sleep(delay)
    return web.Response(text=json.dumps(body), content_type="application/json")

  async def list_models(request: web.Request) -> web.Response:
    data = [{"id": name, "object": "model", "created": 0, "owned_by": "hieramas-sim"} for name in MODELS]
    return web.json_response({"object": "list", "data": data})

  async def get_model(request: web.Request) -> web.Response:
    name = request.match_info["name"]
    if name not in MODELS:
      return error_response(404, f"The model `{name}` does not exist or you do not have access to it.",
                            code="model_not_found")
    return web.json_response({"id": name, "object": "model", "created": 0, "owned_by": "hieramas-sim"})

  @web.middleware
  async def json_errors(request: web.Request, handler: Callable) -> web.StreamResponse:
    try:
      return await handler(request)
    except web.HTTPException as e:
      if e.status < 400:
        raise
      return error_response(e.status, f"{e.reason}: {request.method} {request.path}",
                            code="unknown_url" if e.status == 404 else None)

  app = web.Application(middlewares=[json_errors], client_max_size=64 * 1024 * 1024)
  app.router.add_post("/v1/chat/completions", chat_completions)
  app.router.add_get("/v1/models", list_models)
  app.router.add_get("/v1/models/{name}", get_model)
  app.router.add_get("/health", _health)
  return app


async def _health(request: web.Request) -> web.Response:
  return web.json_response({"status": "ok"})


@dataclasses.dataclass
class SimHandle:
  """A running sim: `base_url` ends in /v1; `close()` stops it (idempotent)."""

  base_url: str
  _closer: Callable[[], None] = dataclasses.field(repr=False)
  _closed: bool = dataclasses.field(default=False, repr=False)

  def close(self) -> None:
    if not self._closed:
      self._closed = True
      self._closer()

  def __enter__(self) -> "SimHandle":
    return self

  def __exit__(self, *exc) -> None:
    self.close()


async def start_site(app: web.Application, host: str, port: int) -> tuple[web.AppRunner, int]:
  """Serves `app` on (host, port) from the running event loop; port 0 picks a free one.

  Returns the runner (to clean up) and the bound port. Shared by the thread server below and the
  sim's program (sim/serve.py), so both bind the same way.
  """
  runner = web.AppRunner(app, access_log=None, handle_signals=False)
  await runner.setup()
  site = web.TCPSite(runner, host, port, backlog=1024)
  await site.start()
  bound = site._server.sockets[0].getsockname()[1]  # pylint: disable=protected-access
  return runner, bound


def start_sim_in_thread(config: SimConfig = SimConfig(), host: str = "127.0.0.1") -> SimHandle:
  """Serves the sim from a daemon thread with its own event loop, on a free port."""
  app = make_app(config)
  loop = asyncio.new_event_loop()
  ready = threading.Event()
  state: dict[str, Any] = {}

  def serve() -> None:
    asyncio.set_event_loop(loop)
    try:
      state["runner"], state["port"] = loop.run_until_complete(start_site(app, host, 0))
    except BaseException as e:  # reported to the caller below
      state["error"] = e
      ready.set()
      return
    ready.set()
    loop.run_forever()
    loop.run_until_complete(state["runner"].cleanup())
    loop.close()

  thread = threading.Thread(target=serve, name=f"hieramas-sim-{config.seed}", daemon=True)
  thread.start()
  ready.wait()
  if "error" in state:
    raise RuntimeError(f"simulated pool failed to start: {state['error']}") from state["error"]

  def close() -> None:
    loop.call_soon_threadsafe(loop.stop)
    thread.join(timeout=10)

  return SimHandle(f"http://{host}:{state['port']}/v1", close)


def start_sim_subprocess(config: SimConfig = SimConfig(), host: str = "127.0.0.1",
                         startup_timeout_s: float = 120.0) -> SimHandle:
  """Serves the sim from its own Python process (so a benchmark's client owns its core).

  The server dies with this process however it ends (SIGKILL included): it asks the kernel for
  SIGTERM when its parent dies (`PARENT_PID_ENV`, `_die_with_parent`). The parent is the calling
  *thread* for the kernel, so call this from a thread that outlives the server (the event loop's).
  """
  cmd = [sys.executable, "-m", "hieramas_jax.sim.serve", f"--host={host}", "--port=0",
         *config.to_args()]
  # The child imports this very package, wherever the caller's working directory is.
  pythonpath = os.pathsep.join(p for p in (str(REPO_DIR), os.environ.get("PYTHONPATH", "")) if p)
  proc = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                          env={**os.environ, "PYTHONUNBUFFERED": "1", "PYTHONPATH": pythonpath,
                               PARENT_PID_ENV: str(os.getpid())})
  deadline = time.monotonic() + startup_timeout_s
  base_url = None
  while time.monotonic() < deadline:
    line = proc.stdout.readline()
    if not line:
      break
    if line.startswith(READY_PREFIX):
      base_url = line[len(READY_PREFIX):].strip()
      break
  if base_url is None:
    proc.kill()
    err = proc.stderr.read()[-2000:] if proc.stderr else ""
    raise RuntimeError(f"simulated pool process did not start: {err.strip() or 'no output'}")

  def close() -> None:
    proc.terminate()
    try:
      proc.wait(timeout=10)
    except subprocess.TimeoutExpired:
      proc.kill()
      proc.wait()
    for stream in (proc.stdout, proc.stderr):
      if stream:
        stream.close()

  return SimHandle(base_url, close)
