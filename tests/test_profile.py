"""The sampling profiler behind bench_table1's breakdown: CPU lands in the category its stack names, a
sleeping thread is charged nothing, child processes are classified by command line, and the file is
written only when HIERAMAS_PROFILE asks for it."""

from __future__ import annotations

import json
import subprocess
import sys
import threading
import time

import pytest

from hieramas_jax.experiment import profile

pytestmark = pytest.mark.skipif(not profile.available(), reason="per-thread CPU clocks are Linux's")


def _burn(seconds: float) -> None:
  end = time.thread_time() + seconds
  x = 0
  while time.thread_time() < end:
    x += 1


def test_a_busy_thread_is_charged_to_its_category_and_a_sleeping_one_to_nothing(monkeypatch):
  monkeypatch.setattr(profile, "CATEGORIES", (("this test", (__file__,)),) + profile.CATEGORIES)
  prof = profile.Profiler(interval_s=0.01).start()
  sleeper = threading.Thread(target=time.sleep, args=(0.8,))
  sleeper.start()
  busy = threading.Thread(target=_burn, args=(0.6,))
  busy.start()
  busy.join()
  sleeper.join()
  result = prof.stop()
  charged = result["process"]["this test"]
  assert 0.45 <= charged <= 0.75, result
  assert charged <= result["process_cpu_s"] + 0.05
  # The busy thread is the only test-file stack that ran; everything else is small.
  assert sum(v for k, v in result["process"].items() if k not in ("this test", "unattributed")) < 0.3, result


def test_a_thread_that_reuses_an_ended_threads_ident_is_still_read():
  # A cached CPU clock of an ended thread fails; the thread now holding its ident must be read afresh, else
  # its CPU (an encoder pool started mid-run: half a cold table's embedding) lands in `unattributed`.
  prof = profile.Profiler()
  ended = threading.Thread(target=time.sleep, args=(0.01,))
  ended.start()
  dead_clock = time.pthread_getcpuclockid(ended.ident)
  ended.join()
  time.sleep(0.05)
  me = threading.get_ident()
  prof._clocks[me] = dead_clock  # pylint: disable=protected-access  # as if this thread had reused its ident
  with pytest.raises(OSError):
    time.clock_gettime_ns(dead_clock)  # the case under test: the stale clock no longer reads
  _burn(0.05)
  now = prof._thread_cpu_ns(me)  # pylint: disable=protected-access
  assert now is not None and abs(now - time.thread_time_ns()) < 20_000_000
  assert prof._clocks[me] == time.pthread_getcpuclockid(me)  # pylint: disable=protected-access


def test_a_child_process_is_classified_by_its_command_line(monkeypatch):
  monkeypatch.setattr(profile, "CHILD_KINDS", (("burner", "hieramas_profile_burner"),))
  prof = profile.Profiler(interval_s=0.01).start()
  code = ("import time\nend = time.process_time() + 0.5\n"
          "while time.process_time() < end: pass\n# hieramas_profile_burner")
  child = subprocess.Popen([sys.executable, "-c", code])
  child.wait()
  result = prof.stop()
  assert result["children"]["burner"] + result["children"]["short-lived children no tick saw"] >= 0.4, result
  assert result["children"]["burner"] >= 0.2, result  # a tick saw it while it ran


def test_the_profile_is_written_only_when_asked(tmp_path, monkeypatch):
  monkeypatch.delenv(profile.ENV, raising=False)
  with profile.from_env():
    pass
  assert not list(tmp_path.iterdir())
  target = tmp_path / "p.json"
  monkeypatch.setenv(profile.ENV, str(target))
  with pytest.raises(RuntimeError):
    with profile.from_env():
      _burn(0.05)
      raise RuntimeError("a failed run keeps its profile")
  written = json.loads(target.read_text())
  assert written["process_cpu_s"] >= 0.04 and "children" in written and written["ticks"] >= 1


def _chain(*files: str):
  """The innermost frame of calls through functions compiled as if they lived in `files` (outermost first)."""
  ns: dict = {"sys": sys}
  call = "sys._getframe()"
  for depth, name in enumerate(reversed(files)):
    exec(compile(f"def f{depth}():\n  return {call}\n", name, "exec"), ns)  # pylint: disable=exec-used
    call = f"f{depth}()"
  return ns[f"f{len(files) - 1}"]()


def test_a_stack_is_charged_to_its_innermost_known_frame():
  # json called by the LLM client is the client's; the cache called by a method is the cache's.
  assert profile.category(_chain("/r/hieramas_jax/methods/m.py", "/r/hieramas_jax/llm/client.py",
                                 "/usr/lib/python3/json/encoder.py")) == "LLM client (requests, pricing)"
  assert profile.category(_chain("/r/hieramas_jax/methods/m.py", "/r/hieramas_jax/llm/cache.py")) == \
      "response cache lookups"
  assert profile.category(_chain("/r/hieramas_jax/methods/m.py", "/site/jax/_src/api.py")) == \
      "JAX (tracing, compiling, steps)"
  assert profile.category(_chain("/usr/lib/python3/asyncio/events.py")) == profile.OTHER


def test_the_bench_breakdown_divides_cpu_by_the_calls_it_served():
  from hieramas_jax.bench.table1 import breakdown  # pylint: disable=import-outside-toplevel
  prof = {"process_cpu_s": 20.0, "children_cpu_s": 12.0,
          "process": {"response cache lookups": 2.0, "grading": 1.0, "JAX (tracing, compiling, steps)": 5.0,
                      "embedding (encoder)": 3.0, "W&B": 1.5, "profiler": 0.2, "unattributed": 4.0},
          "children": {"sim server": 8.0, "math-verify worker": 1.0, "HumanEval+ sandboxes": 0.5,
                       "short-lived children no tick saw": 2.5}}
  stats = {"test_calls": 1000, "training_calls": 3000, "test_calls_replayed": 500, "training_calls_replayed": 1500}
  b = breakdown(prof, stats)
  assert (b["calls"], b["calls_made"]) == (4000, 2000)
  assert b["runner_cpu_us_per_call"] == 5000.0  # 20 s over 4,000 calls
  assert b["sim_cpu_us_per_call_made"] == 4000.0  # 8 s over the 2,000 calls made
  assert b["grading_cpu_s"] == 5.0 and b["jax_cpu_s"] == 9.0 and b["embedding_cpu_s"] == 3.0
  assert breakdown({"unavailable": "x"}, stats) == {"unavailable": "x"}
  warm = breakdown(prof, {**stats, "test_calls_replayed": 1000, "training_calls_replayed": 3000})
  assert warm["calls_made"] == 0 and warm["sim_cpu_us_per_call_made"] is None
