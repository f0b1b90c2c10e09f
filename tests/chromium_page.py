"""Loads a page in headless Chromium over the DevTools protocol: console errors, images, a screenshot.

Only aiohttp (already a dependency) speaks the protocol; Chromium is the Debian `chromium` package
(`make install` installs it where apt-get may).
"""

from __future__ import annotations

import asyncio
import base64
import dataclasses
import json
import pathlib
import re
import shutil
import subprocess
import tempfile

import aiohttp

CHROMIUM_NAMES = ("chromium", "chromium-browser", "google-chrome", "chrome")
CHECK_IMAGES = """JSON.stringify({
  figures: Array.from(document.querySelectorAll('figure[data-figure]')).map(f => {
    const img = f.querySelector('img');
    return {name: f.dataset.figure, loaded: !!img && img.complete && img.naturalWidth > 0,
            width: img ? img.naturalWidth : 0};
  }),
  sections: Array.from(document.querySelectorAll('section[data-section]')).map(s => s.dataset.section),
  missing: Array.from(document.querySelectorAll('.missing')).map(m => m.textContent),
  images: document.images.length,
})"""


def chromium_path() -> str | None:
  for name in CHROMIUM_NAMES:
    path = shutil.which(name)
    if path:
      return path
  return None


@dataclasses.dataclass
class PageLoad:
  errors: list[str]
  figures: list[dict]
  sections: list[str]
  missing: list[str]
  images: int
  screenshot: pathlib.Path
  value: object = None  # what `script` returned


async def _load(ws_url: str, url: str, screenshot: pathlib.Path, timeout_s: float, script: str | None) -> PageLoad:
  errors: list[str] = []
  async with aiohttp.ClientSession() as session:
    async with session.ws_connect(ws_url, max_msg_size=0) as ws:
      ids = iter(range(1, 10_000))
      waiting: dict[int, asyncio.Future] = {}
      loaded = asyncio.Event()

      async def reader():
        async for msg in ws:
          data = json.loads(msg.data)
          if "id" in data and data["id"] in waiting:
            waiting.pop(data["id"]).set_result(data)
            continue
          method, params = data.get("method"), data.get("params", {})
          if method == "Runtime.exceptionThrown":
            errors.append(f"exception: {params['exceptionDetails'].get('text')}")
          elif method == "Runtime.consoleAPICalled" and params.get("type") in ("error", "assert"):
            shown = " ".join(str(a.get("value", a.get("description"))) for a in params["args"])
            errors.append(f"console.error: {shown}")
          elif method == "Log.entryAdded" and params["entry"].get("level") == "error":
            errors.append(f"log: {params['entry'].get('text')} ({params['entry'].get('url', '')})")
          elif method == "Page.loadEventFired":
            loaded.set()

      task = asyncio.ensure_future(reader())

      async def call(method, **params):
        i = next(ids)
        fut = asyncio.get_running_loop().create_future()
        waiting[i] = fut
        await ws.send_str(json.dumps({"id": i, "method": method, "params": params}))
        reply = await asyncio.wait_for(fut, timeout_s)
        if "error" in reply:
          raise RuntimeError(f"{method}: {reply['error']}")
        return reply["result"]

      try:
        for domain in ("Runtime", "Log", "Page"):
          await call(f"{domain}.enable")
        await call("Page.navigate", url=url)
        await asyncio.wait_for(loaded.wait(), timeout_s)
        await asyncio.sleep(0.3)  # late console messages
        result = await call("Runtime.evaluate", expression=CHECK_IMAGES, returnByValue=True)
        state = json.loads(result["result"]["value"])
        value = None
        if script:  # an expression (a promise is awaited) that drives the page; its JSON-able result
          out = await call("Runtime.evaluate", expression=script, returnByValue=True, awaitPromise=True)
          if "exceptionDetails" in out:
            raise RuntimeError(f"script failed: {out['exceptionDetails']}")
          value = out["result"].get("value")
        metrics = await call("Page.getLayoutMetrics")
        size = metrics.get("cssContentSize") or metrics["contentSize"]
        shot = await call("Page.captureScreenshot", format="png", captureBeyondViewport=True,
                          clip={"x": 0, "y": 0, "width": size["width"], "height": min(size["height"], 16000),
                                "scale": 1})
        screenshot.write_bytes(base64.b64decode(shot["data"]))
      finally:
        task.cancel()
  return PageLoad(errors, state["figures"], state["sections"], state["missing"], state["images"], screenshot, value)


def load_page(path: pathlib.Path, screenshot: pathlib.Path, *, timeout_s: float = 60.0,
              script: str | None = None, fragment: str = "") -> PageLoad:
  """Opens `path` (file://, with `#fragment`: a deep link) in a fresh headless Chromium without network
  access; runs `script` (a JS expression; a promise is awaited) before the screenshot and returns its value."""
  binary = chromium_path()
  if binary is None:
    raise FileNotFoundError("chromium is not installed")
  with tempfile.TemporaryDirectory(prefix="chromium-profile-") as profile:
    proc = subprocess.Popen([binary, "--headless=new", "--no-sandbox", "--disable-gpu", "--no-first-run",
                             "--disable-extensions", "--remote-debugging-port=0", f"--user-data-dir={profile}",
                             # No network: a page that fetched anything would log an error.
                             "--proxy-server=127.0.0.1:9", "--proxy-bypass-list=<-loopback>",
                             "--window-size=1280,900", "about:blank"],
                            stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)
    try:
      ws_browser = None
      for line in proc.stderr:
        m = re.search(r"DevTools listening on (ws://\S+)", line)
        if m:
          ws_browser = m.group(1)
          break
      if ws_browser is None:
        raise RuntimeError("chromium did not start its DevTools endpoint")
      port = re.search(r"ws://[^:]+:(\d+)/", ws_browser).group(1)

      async def go():
        async with aiohttp.ClientSession() as session:
          async with session.get(f"http://127.0.0.1:{port}/json/list") as resp:
            targets = await resp.json(content_type=None)
        page = next(t for t in targets if t.get("type") == "page")
        url = path.resolve().as_uri() + (f"#{fragment}" if fragment else "")
        return await _load(page["webSocketDebuggerUrl"], url, screenshot, timeout_s, script)

      return asyncio.run(go())
    finally:
      proc.terminate()
      try:
        proc.wait(10)
      except subprocess.TimeoutExpired:
        proc.kill()
