"""Nothing outlives a run: the sim server dies with its parent on every signal and on error paths."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import textwrap
import time

import pytest

from hieramas_jax.paths import REPO_DIR


def _children(pid: int) -> list[int]:
  out = []
  for entry in os.listdir("/proc"):
    if entry.isdigit():
      try:
        with open(f"/proc/{entry}/stat") as f:
          fields = f.read().rsplit(")", 1)[1].split()
      except OSError:
        continue
      if int(fields[1]) == pid and fields[0] != "Z":
        out.append(int(entry))
  return out


def _alive(pid: int) -> bool:
  try:
    with open(f"/proc/{pid}/stat") as f:
      return f.read().rsplit(")", 1)[1].split()[0] != "Z"
  except OSError:
    return False


# A run in miniature: the sim served from its own process, then the run hangs until it is killed.
# Signal dispositions as in a terminal: a run started under `nohup` or as a background job of a script
# inherits SIGHUP / SIGINT ignored, and would then (rightly) not die of them at all.
RUN = textwrap.dedent("""\
    import signal, sys, time
    signal.signal(signal.SIGHUP, signal.SIG_DFL)
    signal.signal(signal.SIGINT, signal.default_int_handler)
    from hieramas_jax.sim import server
    handle = server.start_sim_subprocess(server.SimConfig(seed=0))
    print("ready", flush=True)
    time.sleep(600)
    """)


@pytest.mark.parametrize("signum", [signal.SIGKILL, signal.SIGTERM, signal.SIGINT, signal.SIGHUP])
def test_the_sim_process_dies_with_a_killed_run(signum):
  run = subprocess.Popen([sys.executable, "-c", RUN], cwd=REPO_DIR, stdout=subprocess.PIPE, text=True,
                         env=dict(os.environ, PYTHONPATH=str(REPO_DIR)))
  try:
    assert run.stdout.readline().strip() == "ready"
    sims = _children(run.pid)
    assert len(sims) == 1, sims
    run.send_signal(signum)
    run.wait(timeout=30)
    deadline = time.monotonic() + 10
    while _alive(sims[0]) and time.monotonic() < deadline:
      time.sleep(0.05)
    assert not _alive(sims[0]), f"the sim server (pid {sims[0]}) outlived its run ({signum!r})"
  finally:
    run.kill()
    run.wait()


def test_a_failing_cache_close_still_stops_the_sim(monkeypatch, tmp_path):
  # The disk-full path: closing the response cache raises; the sim's process must stop all the same.
  import asyncio
  import types
  from hieramas_jax.experiment import backend as backend_lib
  from hieramas_jax.llm.cache import ResponseCache

  def broken_close(self):
    raise OSError(28, "No space left on device")

  monkeypatch.setattr(ResponseCache, "close", broken_close)
  flags = types.SimpleNamespace(backend="sim", base_url=None, api_key_env=None, model_map=None,
                                max_concurrency=4, request_timeout_s=30.0, max_retries=1)
  seen = []
  before = set(_children(os.getpid()))  # long-lived helpers of earlier tests (the symbolic grader's worker)

  async def go():
    async with backend_lib.open_backend(flags, seed=0, cache_root=tmp_path, sim_process=True):
      seen.extend(p for p in _children(os.getpid()) if p not in before)

  with pytest.raises(OSError, match="No space left"):
    asyncio.run(go())
  assert seen
  deadline = time.monotonic() + 10
  while any(_alive(p) for p in seen) and time.monotonic() < deadline:
    time.sleep(0.05)
  assert not any(_alive(p) for p in seen)
