"""Pool files, mixed pools and the preflight, against small OpenAI-compatible servers on loopback."""

from __future__ import annotations

import asyncio
import json
import pathlib

import pytest
from aiohttp import web

from hieramas_jax.llm.cache import ResponseCache
from hieramas_jax.llm.client import PoolClient
from hieramas_jax.llm.registry import UnknownModelError
from hieramas_jax.llm.pool import PoolFileError, load_pool_file
from hieramas_jax.llm.preflight import PreflightError, preflight

REPO = pathlib.Path(__file__).resolve().parents[1]
SECRET = "sk-test-POOL-0123456789abcdef"


class ModelServer:
  """OpenAI-compatible: lists `ids` at GET /models (or 404 with `models_route=False`), answers any id it
  lists with "<server tag>:<id>" and exact usage; refuses a wrong bearer key with 401."""

  def __init__(self, tag: str, ids, *, models_route: bool = True, key: str | None = None, open_list: bool = False):
    self.tag, self.ids, self.models_route, self.key, self.open_list = tag, set(ids), models_route, key, open_list
    self.chats: list[dict] = []
    self.base_url = ""

  def _authorised(self, request) -> bool:
    return self.key is None or request.headers.get("Authorization") == f"Bearer {self.key}"

  async def _models(self, request):
    if not self.open_list and not self._authorised(request):
      return web.json_response({"error": {"message": "bad key"}}, status=401)
    return web.json_response({"object": "list", "data": [{"id": i, "object": "model"} for i in sorted(self.ids)]})

  async def _key(self, request):  # OpenRouter's GET /key: the key's own record, 401 for a wrong key
    if not self._authorised(request):
      return web.json_response({"error": {"message": "No auth credentials found", "code": 401}}, status=401)
    return web.json_response({"data": {"label": "sk-or-v1-...", "limit": None, "usage": 0.0}})

  async def _chat(self, request):
    if not self._authorised(request):
      return web.json_response({"error": {"message": "bad key"}}, status=401)
    body = await request.json()
    self.chats.append(body)
    if body["model"] not in self.ids:
      return web.json_response({"error": {"message": f"model {body['model']} not found"}}, status=404)
    return web.json_response({"choices": [{"index": 0, "finish_reason": "stop",
                                           "message": {"role": "assistant", "content": f"{self.tag}:{body['model']}"}}],
                              "usage": {"prompt_tokens": 1000, "completion_tokens": 500}})

  async def __aenter__(self):
    app = web.Application()
    app.router.add_post("/v1/chat/completions", self._chat)
    if self.models_route:
      app.router.add_get("/v1/models", self._models)
    app.router.add_get("/v1/key", self._key)
    self._runner = web.AppRunner(app, access_log=None)
    await self._runner.setup()
    site = web.TCPSite(self._runner, "127.0.0.1", 0)
    await site.start()
    self.base_url = f"http://127.0.0.1:{site._server.sockets[0].getsockname()[1]}/v1"
    return self

  async def __aexit__(self, *exc):
    await self._runner.cleanup()


def _entry(name, backend, url, model_id, *, key_env=None, price=(1.0, 2.0), **extra):
  lines = [f'[models."{name}"]', f'backend = "{backend}"', f'base_url = "{url}"', f'model_id = "{model_id}"',
           f"price_in = {price[0]}", f"price_out = {price[1]}", 'price_date = "2026-11-30"']
  if key_env:
    lines.append(f'key_env = "{key_env}"')
  lines += [f"{k} = {str(v).lower() if isinstance(v, bool) else json.dumps(v) if isinstance(v, str) else v}"
            for k, v in extra.items()]
  return "\n".join(lines) + "\n"


def test_a_mixed_pool_routes_each_model_to_its_server_with_its_price_budget_and_key(tmp_path):
  async def main():
    async with ModelServer("gpt", {"gpt-5-mini"}, key=SECRET) as gpt, ModelServer("local", {"smol"}) as local:
      path = tmp_path / "pool.toml"
      path.write_text(_entry("gpt-5-mini", "openai", gpt.base_url, "gpt-5-mini", key_env="MY_OPENAI_KEY",
                             price=(0.25, 2.0), max_tokens=64, think="keep")
                      + _entry("qwen3-8b", "custom", local.base_url, "smol", price=(0.0, 0.0))
                      + _entry("llama-8b", "custom", local.base_url, "smol", price=(0.02, 0.03)))
      pool = load_pool_file(path, environ={"MY_OPENAI_KEY": SECRET})
      assert len(pool.endpoints) == 2 and pool.name.startswith("pool:pool:")
      report = await preflight(pool.endpoints, ["gpt-5-mini", "qwen3-8b", "llama-8b"])
      assert len(report.checked) == 3 and report.probe_cost_usd == 0.0
      with ResponseCache(tmp_path / "cache") as cache:
        async with PoolClient(pool.endpoints, cache=cache) as client:
          a = await client.chat("gpt-5-mini", [{"role": "user", "content": "hi"}], temperature=0.2, max_tokens=900)
          b = await client.chat("qwen3-8b", [{"role": "user", "content": "hi"}], temperature=0.2, max_tokens=900)
          c = await client.chat("llama-8b", [{"role": "user", "content": "hi"}], temperature=0.2, max_tokens=900)
          with pytest.raises(UnknownModelError):
            await client.chat("deepseek-v3", [{"role": "user", "content": "hi"}], temperature=0.2, max_tokens=9)
      return a, b, c, gpt.chats, local.chats, pool

  a, b, c, gpt_chats, local_chats, pool = asyncio.run(main())
  assert (a.text, b.text, c.text) == ("gpt:gpt-5-mini", "local:smol", "local:smol")
  # The file's dated prices, not the registry's: 1000 * 0.25 + 500 * 2.0 per 1M; 1000 * 0.02 + 500 * 0.03.
  assert a.cost_usd == pytest.approx(1.25e-3) and b.cost_usd == 0.0 and c.cost_usd == pytest.approx(3.5e-5)
  # GPT-5's quirks on OpenAI, and its per-model budget; a local server gets standard fields.
  assert gpt_chats[0]["max_completion_tokens"] == 64 and "temperature" not in gpt_chats[0]
  assert local_chats[0]["max_tokens"] == 900 and local_chats[0]["temperature"] == 0.2
  # Two names on one served id are two pool members: both were sent, neither replayed the other.
  assert len(local_chats) == 2 and not c.cached
  assert SECRET not in str(pool.describe()) and pool.describe()["models"]["gpt-5-mini"]["price_date"] == "2026-11-30"


def test_preflight_lists_every_missing_model_and_refused_key_in_one_error():
  async def main():
    async with ModelServer("a", {"served"}) as a, ModelServer("b", {"x"}, key=SECRET) as b:
      from hieramas_jax.llm.endpoint import Endpoint
      ep_a = Endpoint(name="custom:a", base_url=a.base_url, model_ids={"qwen3-8b": "served", "llama-8b": "typo"},
                      provider_quirks=False)
      ep_b = Endpoint(name="custom:b", base_url=b.base_url, api_key="wrong", model_ids={"gemma-3-27b": "x"},
                      provider_quirks=False)
      with pytest.raises(PreflightError) as err:
        await preflight([ep_a, ep_b], ["qwen3-8b", "llama-8b", "gemma-3-27b", "deepseek-v3"])
      return str(err.value), a.chats + b.chats

  message, chats = asyncio.run(main())
  assert "3 problem(s)" in message or "4 problem(s)" in message
  assert "'typo'" in message and "key was refused" in message and "deepseek-v3: no endpoint" in message
  assert "wrong" not in message and chats == []  # nothing was paid


def test_an_unreachable_host_does_not_hide_the_other_endpoints_problems():
  import socket
  with socket.socket() as sock:  # a port nobody listens on
    sock.bind(("127.0.0.1", 0))
    dead = f"http://127.0.0.1:{sock.getsockname()[1]}/v1"

  async def main():
    async with ModelServer("a", {"served"}) as a:
      from hieramas_jax.llm.endpoint import Endpoint
      ep_dead = Endpoint(name=f"custom:{dead}", base_url=dead, model_ids={"gemma-3-27b": "g"}, provider_quirks=False)
      ep_a = Endpoint(name="custom:a", base_url=a.base_url, model_ids={"llama-8b": "typo"}, provider_quirks=False)
      with pytest.raises(PreflightError) as err:
        await preflight([ep_dead, ep_a], ["gemma-3-27b", "llama-8b"], reach_attempts=1)
      return err.value

  error = asyncio.run(main())
  assert len(error.problems) == 2  # one line each, as the entry point prints them
  assert f"endpoint {dead} is unreachable" in error.problems[0] and "'typo'" in error.problems[1]


def test_a_wrong_openrouter_key_fails_the_preflight_though_its_model_list_is_public():
  async def main():
    async with ModelServer("or", {"qwen/qwen3-8b"}, key=SECRET, open_list=True) as server:
      from hieramas_jax.llm.endpoint import Endpoint
      def ep(key):
        return Endpoint(name=f"openrouter:{server.base_url}", base_url=server.base_url, api_key=key,
                        model_ids={"qwen3-8b": "qwen/qwen3-8b"})
      with pytest.raises(PreflightError, match="key was refused .*GET /key") as err:
        await preflight([ep("sk-or-v1-wrong")], ["qwen3-8b"])
      report = await preflight([ep(SECRET)], ["qwen3-8b"])
      return str(err.value), report, server.chats

  message, report, chats = asyncio.run(main())
  assert "wrong" not in message and [m for _, m, _ in report.checked] == ["qwen3-8b"] and chats == []


def test_preflight_probes_a_server_without_a_model_list_with_one_billed_token():
  async def main():
    async with ModelServer("p", {"smol"}, models_route=False) as server:
      from hieramas_jax.llm.endpoint import Endpoint
      ep = Endpoint(name="custom:p", base_url=server.base_url, model_ids={"qwen3-8b": "smol", "llama-8b": "nope"},
                    provider_quirks=False, prices={"qwen3-8b": (1.0, 1.0), "llama-8b": (1.0, 1.0)})
      report = await preflight([ep], ["qwen3-8b"])
      with pytest.raises(PreflightError, match="llama-8b: a one-token request"):
        await preflight([ep], ["llama-8b"])
      return report, server.chats

  report, chats = asyncio.run(main())
  assert report.probes == ("qwen3-8b",) and report.probe_cost_usd == pytest.approx(1.5e-3)
  assert chats[0]["max_tokens"] == 1


@pytest.mark.parametrize("body,message", [
    ('[models."gpt-6"]\nbackend = "openai"\n', "unknown model 'gpt-6'"),
    ('[models."qwen3-8b"]\nbackend = "custom"\nmodel_id = "m"\nprice_in = 1\nprice_out = 1\nprice_date = "d"\n',
     "needs an http(s) base URL"),
    ('[models."qwen3-8b"]\nbackend = "vllm"\nbase_url = "http://h/v1"\nmodel_id = "m"\nprice_in = 1\n'
     'price_out = 1\nprice_date = "d"\n', "'vllm' is not one of"),
    ('[models."qwen3-8b"]\nbackend = "custom"\nbase_url = "http://h/v1"\nmodel_id = "m"\nprice_in = "cheap"\n'
     'price_out = 1\nprice_date = "d"\nkey = "sk-123"\n', "unknown field 'key'"),
    ('[models."qwen3-8b"]\nbackend = "custom"\n', "missing 'model_id'"),
    ('[models."qwen3-8b"]\nbackend = "custom"\nbase_url = "http://h/v1"\nmodel_id = "m"\nprice_in = 1\n'
     'price_out = 1\nprice_date = "2026"\n', "price_date: a date YYYY-MM-DD"),
    ("[models]\n", "at least one model"),
    ("not toml [", "not valid TOML"),
])
def test_pool_file_errors_name_the_file_and_every_problem(tmp_path, body, message):
  path = tmp_path / "bad.toml"
  path.write_text(body)
  with pytest.raises(PoolFileError, match="bad.toml") as err:
    load_pool_file(path, environ={})
  assert message in str(err.value)


def test_pool_file_lists_every_missing_key_variable(tmp_path):
  path = tmp_path / "keys.yaml"
  path.write_text("models:\n"
                  "  gpt-5-mini: {backend: openai, model_id: gpt-5-mini, price_in: 0.25, price_out: 2, price_date: '2025-08-07'}\n"
                  "  qwen3-80b: {backend: openrouter, model_id: q, price_in: 0.1, price_out: 0.8, price_date: '2025-10-30'}\n")
  with pytest.raises(PoolFileError, match="OPENAI_API_KEY, OPENROUTER_API_KEY"):
    load_pool_file(path, environ={})
  with pytest.raises(PoolFileError, match="no such pool file"):
    load_pool_file(tmp_path / "missing.toml")


def test_shipped_pool_files_parse_and_date_every_price_by_day():
  shipped = sorted((REPO / "launch" / "pools").glob("*.toml"))
  assert {p.stem for p in shipped} >= {"openrouter_paper", "openai_plus_vllm", "local_smoke"}
  for path in shipped:
    env = {"OPENROUTER_API_KEY": SECRET, "OPENAI_API_KEY": SECRET}
    pool = load_pool_file(path, environ=env, sim_base_url="http://127.0.0.1:1/v1")
    assert pool.models and pool.endpoints


def _entry_point(tmp_path, *args, cache="cache"):
  import os
  import subprocess
  import sys
  env = dict(os.environ, PYTHONPATH=str(REPO), HIERAMAS_CACHE_DIR=str(tmp_path / cache), WANDB_MODE="offline")
  return subprocess.run([sys.executable, "experiments/reproduce_table1.py", "--nowandb", "--noprogress",
                         "--nosim_process", f"--out_dir={tmp_path / 'out'}", f"--run_root={tmp_path / 'runs'}", *args],
                        cwd=REPO, capture_output=True, text=True, timeout=1200, env=env)


def _rows_by_endpoint(cache_dir):
  import sqlite3
  db = sqlite3.connect(cache_dir / "responses" / "responses.sqlite3")
  try:
    return dict(db.execute("SELECT endpoint, COUNT(*) FROM responses GROUP BY endpoint").fetchall())
  finally:
    db.close()


def test_a_mixed_pool_runs_in_one_command(tmp_path):
  # The backbone of the Qwen setting on a second server (another sim process standing in for a local
  # vLLM, reached as a custom endpoint), everything else on the embedded sim: one command, both used.
  from hieramas_jax.sim.server import SimConfig, start_sim_in_thread
  from hieramas_jax.llm.registry import MODELS
  with start_sim_in_thread(SimConfig(seed=0)) as other:
    text = "".join(
        _entry(name, "custom", other.base_url, name, price=(MODELS[name].price_in, MODELS[name].price_out))
        if name == "qwen3-80b" else
        _entry(name, "sim", "", name, price=(MODELS[name].price_in, MODELS[name].price_out))
        for name in MODELS).replace('base_url = ""\n', "")
    (tmp_path / "mixed.toml").write_text(text)
    result = _entry_point(tmp_path, f"--pool_file={tmp_path / 'mixed.toml'}", "--methods=base",
                          "--benchmarks=mmlu_redux", "--pools=gpt-5-mini,qwen3-80b", "--limit=3")
  assert result.returncode == 0, result.stderr[-3000:]
  table = json.loads((tmp_path / "out" / "table1_limit3.json").read_text())
  assert {c["pool"] for c in table["cells"].values()} == {"gpt-5-mini", "qwen3-80b"}
  assert table["endpoint"].startswith("pool:mixed:")
  rows = _rows_by_endpoint(tmp_path / "cache")
  assert rows.get(f"custom:{other.base_url}") == 3  # the Qwen backbone's 3 calls went to the other server
  assert sum(n for name, n in rows.items() if name.startswith("sim:seed0:")) == 3  # gpt-5-mini on the embedded sim


# Slow (two runs of the entry point in a subprocess); the cap's arithmetic, its stop before the call that could
# cross it and the resume without paying twice are in the fast tier at the client (tests/test_client.py).
@pytest.mark.slow
def test_the_spend_cap_stops_a_run_cleanly_and_a_rerun_resumes_without_paying_twice(tmp_path):
  args = ["--methods=base,cot", "--benchmarks=mmlu_redux", "--pools=gpt-5-mini", "--limit=8", "--max_concurrency=1",
          "--max_queries=1"]
  # A gpt-5-mini call's worst case is ~$0.0042 (2,048 completion tokens at $2/1M): a $0.0055 cap lets a
  # few ~$0.0005 calls through, then refuses the one whose worst case could cross it.
  stopped = _entry_point(tmp_path, *args, "--max_usd=0.0055")
  assert stopped.returncode == 2, stopped.stderr[-3000:]
  assert "spending cap reached" in stopped.stderr and "--max_usd=$0.0055" in stopped.stderr
  spent = float(stopped.stderr.split("this run root counts $")[1].split(" ")[0])
  assert 0 < spent <= 0.0055
  paid_first = sum(_rows_by_endpoint(tmp_path / "cache").values())
  assert 0 < paid_first < 16
  resumed = _entry_point(tmp_path, *args, "--max_usd=1")
  assert resumed.returncode == 0, resumed.stderr[-3000:]
  table = json.loads((tmp_path / "out" / "table1_limit8.json").read_text())
  calls = sum(c["n_calls"] for c in table["cells"].values())
  assert calls == 16
  # Every call answered before the stop is replayed, not paid again: the store holds each call once.
  assert sum(_rows_by_endpoint(tmp_path / "cache").values()) == 16


def test_an_unknown_model_or_pool_name_gets_the_close_known_one():
  from hieramas_jax.llm.registry import UnknownPoolError  # pylint: disable=import-outside-toplevel
  assert str(UnknownModelError("llama8b")).startswith("unknown model 'llama8b' (did you mean 'llama-8b'?); known: ")
  assert str(UnknownPoolError("Qwen3-80B")).startswith("unknown pool setting 'Qwen3-80B' (did you mean 'qwen3-80b'?)")
  assert "did you mean" not in str(UnknownModelError("claude"))
  # A known model that an endpoint does not serve is not "meant" as another one.
  assert "did you mean" not in str(UnknownModelError("qwen3-8b"))
