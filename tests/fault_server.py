"""A tiny OpenAI-compatible aiohttp server with switchable faults, for the client's tests.

Run it inside the test's event loop (`async with FaultServer(...) as server:`), on 127.0.0.1:0.
Each request either gets a fault, drawn at `fault_rate` from the enabled kinds with a seeded
Generator, or a deterministic answer whose `usage` is a pure function of the request, so a test can
recompute every call's expected cost. A scripted queue (`server.script`) overrides the draw for the
next requests, for tests of one exact behaviour.
"""

from __future__ import annotations

import asyncio
import collections
import contextlib

import numpy as np
from aiohttp import web

FAULTS = ("429", "500", "503", "stall", "drop", "malformed")


def answer_for(body: dict) -> tuple[str, int, int]:
  """(text, prompt_tokens, completion_tokens) the server gives for a request body."""
  prompt = " ".join(str(m.get("content", "")) for m in body["messages"])
  text = f"echo[{body['model']}|{body.get('seed')}]: {prompt[-40:]}"
  return text, len(prompt.split()) + 3, len(text.split())


class FaultServer:
  """OpenAI chat-completions endpoint with injected faults.

  Args:
    fault_rate: probability that a request gets a fault.
    faults: the kinds to draw from (subset of `FAULTS`).
    seed: seeds the fault draws.
    retry_after: value of the Retry-After header on 429s.
    stall_s: how long a "stall" holds the request before answering 504 (set it past the client timeout).
    api_key: when set, requests without `Authorization: Bearer <api_key>` get 401.
  """

  def __init__(self, *, fault_rate: float = 0.0, faults=FAULTS, seed: int = 0, retry_after: str = "0",
               stall_s: float = 1.0, api_key: str | None = None):
    self.fault_rate = fault_rate
    self.faults = tuple(faults)
    self.retry_after = retry_after
    self.stall_s = stall_s
    self.api_key = api_key
    self.rng = np.random.default_rng(seed)
    self.script: collections.deque[str] = collections.deque()  # fault names or "ok", "400"
    self.requests: list[dict] = []  # every parsed body received
    self.request_times: list[float] = []
    self.served_ok = 0  # 200 answers actually sent
    self.fault_counts = collections.Counter()
    self._runner: web.AppRunner | None = None
    self.base_url = ""

  async def __aenter__(self) -> FaultServer:
    app = web.Application()
    app.router.add_post("/v1/chat/completions", self._chat)
    self._runner = web.AppRunner(app, access_log=None)
    await self._runner.setup()
    site = web.TCPSite(self._runner, "127.0.0.1", 0)
    await site.start()
    port = site._server.sockets[0].getsockname()[1]
    self.base_url = f"http://127.0.0.1:{port}/v1"
    return self

  async def __aexit__(self, *exc) -> None:
    await self._runner.cleanup()

  def _next_action(self) -> str:
    if self.script:
      return self.script.popleft()
    if self.fault_rate and self.rng.random() < self.fault_rate:
      return self.faults[int(self.rng.integers(len(self.faults)))]
    return "ok"

  async def _chat(self, request: web.Request) -> web.StreamResponse:
    self.request_times.append(asyncio.get_running_loop().time())
    if self.api_key is not None and request.headers.get("Authorization") != f"Bearer {self.api_key}":
      return web.json_response({"error": {"message": "Incorrect API key provided: sk-te***23",
                                          "type": "invalid_request_error"}}, status=401)
    body = await request.json()
    self.requests.append(body)
    action = self._next_action()
    self.fault_counts[action] += 1
    if action == "ok":
      text, pt, ct = answer_for(body)
      self.served_ok += 1
      return web.json_response({
          "id": f"chatcmpl-{len(self.requests)}", "object": "chat.completion", "model": body["model"],
          "choices": [{"index": 0, "message": {"role": "assistant", "content": text},
                       "finish_reason": "stop"}],
          "usage": {"prompt_tokens": pt, "completion_tokens": ct, "total_tokens": pt + ct}})
    if action == "429":
      return web.json_response({"error": {"message": "Rate limit reached", "type": "rate_limit"}},
                               status=429, headers={"Retry-After": self.retry_after})
    if action in ("500", "503"):
      return web.json_response({"error": {"message": "upstream failure", "type": "server_error"}},
                               status=int(action))
    if action == "400":
      return web.json_response({"error": {"message": "max_tokens is too large", "type":
                                          "invalid_request_error"}}, status=400)
    if action == "stall":
      await asyncio.sleep(self.stall_s)
      return web.json_response({"error": {"message": "stalled"}}, status=504)
    if action == "drop":
      request.transport.close()  # the client sees the server disconnect with no response
      return web.Response(status=500)
    if action == "malformed":
      return web.Response(body=b'{"choices": [{"message": {"content": "trunc', status=200,
                          content_type="application/json")
    raise ValueError(f"unknown fault action {action!r}")


@contextlib.asynccontextmanager
async def serve_chat(handler, get_routes=None):
  """A server (POST /v1/chat/completions -> `handler`, and GET /v1/<path> -> handler for each of
  `get_routes`) on 127.0.0.1:0; yields its base URL."""
  app = web.Application()
  app.router.add_post("/v1/chat/completions", handler)
  for path, get in (get_routes or {}).items():
    app.router.add_get(f"/v1/{path}", get)
  runner = web.AppRunner(app, access_log=None)
  await runner.setup()
  site = web.TCPSite(runner, "127.0.0.1", 0)
  await site.start()
  try:
    yield f"http://127.0.0.1:{site._server.sockets[0].getsockname()[1]}/v1"
  finally:
    await runner.cleanup()
