"""Where a run's CPU goes: a sampling profiler of this process's threads and of its child processes.

Off unless `HIERAMAS_PROFILE=<file.json>` is set (`experiments/bench_table1.py` sets it for the runs it
times); `cli.run` then wraps the program in `from_env()`, which writes the file when the program ends
(issue 29: profile the table before making it faster, and publish the breakdown).

Why per-thread CPU clocks and not a count of stacks: the runner is one event loop beside thread pools
(JAX steps, gradings, W&B, checkpoints); most threads sleep most of the time, and a thread waiting for
the GIL is not running. Each tick reads every Python thread's own CPU clock
(`time.pthread_getcpuclockid`) and charges the CPU that thread used since the last tick to the
category of the stack it is in now: a statistical attribution whose total is exact. CPU this process
used outside Python threads (XLA's executor threads run the compiled steps; tokenizers' pool; threads
that ended between ticks) is the remainder `unattributed`, with the native threads still alive at the
end listed by name. Child processes (the sim
server, the math-verify worker, HumanEval+ sandboxes; direct children, each with the children it
waited for) are read from /proc every few ticks and classified by command line; short-lived children that no tick saw are the waited-for children's CPU
(`RUSAGE_CHILDREN`) less what the ticks saw. Linux only (per-thread CPU clocks, /proc): elsewhere the
profile says it is unavailable and the program runs as usual.
"""

from __future__ import annotations

import contextlib
import json
import os
import pathlib
import resource
import sys
import threading
import time
from typing import Any, Iterator

ENV = "HIERAMAS_PROFILE"
INTERVAL_S = 0.02
CHILD_EVERY = 10  # ticks between reads of the child processes

# (category, fragments of a frame's file name): a thread's stack is charged to the first category that
# one of its frames matches, walking from the innermost frame outwards (json called by the LLM client is
# the client's; JAX called by a method is JAX's).
CATEGORIES: tuple[tuple[str, tuple[str, ...]], ...] = (
    ("profiler", ("hieramas_jax/experiment/profile.py",)),
    ("response cache lookups", ("hieramas_jax/llm/cache.py",)),
    ("embedding (encoder)", ("hieramas_jax/learn/encoder.py", "hieramas_jax/learn/onnx_encoder.py",
                             "/sentence_transformers/", "/torch/", "/transformers/", "/onnxruntime/")),
    ("checkpoints (orbax, msgpack)", ("/orbax/", "hieramas_jax/learn/checkpoint.py", "/msgpack/")),
    ("JAX (tracing, compiling, steps)", ("/jax/", "/jaxlib/", "/flax/", "/optax/", "/jraph/", "/chex/")),
    ("W&B", ("/wandb/", "hieramas_jax/experiment/writers.py")),
    ("grading", ("hieramas_jax/benchmarks/",)),
    ("LLM client (requests, pricing)", ("hieramas_jax/llm/", "/aiohttp/")),
    ("sim (in-process)", ("hieramas_jax/sim/",)),
    ("MAS runtime (prompts, graphs)", ("hieramas_jax/mas/",)),
    ("method logic", ("hieramas_jax/methods/", "hieramas_jax/learn/")),
    ("runner (run dirs, records, display)", ("hieramas_jax/experiment/", "hieramas_jax/fileio.py",
                                             "hieramas_jax/report/", "hieramas_jax/aio.py")),
)
OTHER = "event loop and other Python"

# Child processes by command line.
CHILD_KINDS: tuple[tuple[str, str], ...] = (
    ("sim server", "hieramas_jax.sim.serve"),
    ("math-verify worker", "symbolic_worker_main"),
    ("HumanEval+ sandboxes", "bwrap"),
)
OTHER_CHILD = "other child processes"
_TICK_S = os.sysconf("SC_CLK_TCK") if hasattr(os, "sysconf") else 100


def category(frame: Any) -> str:
  """The category of a stack, given its innermost frame."""
  while frame is not None:
    name = frame.f_code.co_filename
    for cat, fragments in CATEGORIES:
      if any(f in name for f in fragments):
        return cat
    frame = frame.f_back
  return OTHER


def _read(path: str) -> str | None:
  try:
    with open(path, "rb") as f:
      return f.read().decode("utf-8", "replace")
  except OSError:
    return None


def _children(pid: int) -> list[int]:
  out = []
  for task in os.listdir(f"/proc/{pid}/task") if os.path.isdir(f"/proc/{pid}/task") else ():
    text = _read(f"/proc/{pid}/task/{task}/children")
    out += [int(c) for c in (text or "").split()]
  return out


def _cpu_s(pid: int) -> float | None:
  """CPU of a process and of the children it has waited for (utime, stime, cutime, cstime of
  /proc/<pid>/stat): what `RUSAGE_CHILDREN` will count for it once it is waited for."""
  text = _read(f"/proc/{pid}/stat")
  if text is None:
    return None
  fields = text[text.rfind(")") + 2:].split()  # after "pid (comm) "; comm may hold spaces
  return sum(int(f) for f in fields[11:15]) / _TICK_S


def _native_threads(python_tids: set[int]) -> dict[str, float]:
  """CPU of this process's threads that Python does not run (XLA's executor, tokenizers' pool, ...), by
  thread name; only those alive now: part of `unattributed`."""
  out: dict[str, float] = {}
  for tid in os.listdir("/proc/self/task"):
    if int(tid) in python_tids:
      continue
    name = (_read(f"/proc/self/task/{tid}/comm") or "?").strip().rstrip("0123456789-_") or "?"
    text = _read(f"/proc/self/task/{tid}/stat")
    if text:
      fields = text[text.rfind(")") + 2:].split()
      out[name] = out.get(name, 0.0) + (int(fields[11]) + int(fields[12])) / _TICK_S
  return out


def child_kind(cmdline: str) -> str:
  for kind, marker in CHILD_KINDS:
    if marker in cmdline:
      return kind
  return OTHER_CHILD


class Profiler:
  """Samples this process's threads and children on a daemon thread until `stop()`."""

  def __init__(self, interval_s: float = INTERVAL_S):
    self.interval_s = interval_s
    self.by_category: dict[str, float] = {}
    self.children: dict[int, tuple[str, float]] = {}  # pid: (kind, most CPU seen)
    self._last: dict[int, int] = {}  # thread ident: its CPU clock (ns) at the last tick
    self._clocks: dict[int, int] = {}
    self._stop = threading.Event()
    self._thread = threading.Thread(target=self._loop, name="hieramas-profile", daemon=True)
    self.ticks = 0

  def start(self) -> Profiler:
    self._wall0 = time.monotonic()
    self._self0 = resource.getrusage(resource.RUSAGE_SELF)
    self._kids0 = resource.getrusage(resource.RUSAGE_CHILDREN)
    # First reading, here and not on the sampling thread: every thread's clock at start(), so that CPU used
    # before profiling is not charged and CPU used after it is (read on the sampling thread, a thread started
    # right after start() was already busy by then, and its first moments went to `unattributed`).
    for ident in sys._current_frames():  # pylint: disable=protected-access
      cpu = self._thread_cpu_ns(ident)
      if cpu is not None:
        self._last[ident] = cpu
    self._thread.start()
    return self

  def _thread_cpu_ns(self, ident: int) -> int | None:
    """The thread's CPU clock now. A thread ident is reused once its thread has ended, so a cached clock that
    fails (its thread is gone) is looked up again for the thread now holding the ident: kept, the new thread
    (e.g. a pool started mid-run) would never be read and its CPU would land in `unattributed`."""
    clock = self._clocks.get(ident)
    if clock is not None:
      try:
        return time.clock_gettime_ns(clock)
      except OSError:
        self._last.pop(ident, None)  # a new thread: its first reading is its baseline
    try:
      clock = self._clocks[ident] = time.pthread_getcpuclockid(ident)
      return time.clock_gettime_ns(clock)
    except (OSError, OverflowError):
      self._clocks.pop(ident, None)
      return None

  def _tick(self) -> None:
    for ident, frame in sys._current_frames().items():  # pylint: disable=protected-access
      now = self._thread_cpu_ns(ident)
      if now is None:
        continue
      # A thread first seen after profiling began (it was not in the first reading) used all its CPU since:
      # charged from 0 to the stack it is found in, not lost to `unattributed` (a short-lived thread or one
      # born busy between two ticks was; a loaded machine's late first tick lost most of such a thread).
      used = now - self._last.get(ident, 0)
      self._last[ident] = now
      if used > 0:
        cat = category(frame)
        self.by_category[cat] = self.by_category.get(cat, 0.0) + used / 1e9
    if self.ticks % CHILD_EVERY == 0:
      self._read_children()
    self.ticks += 1

  def _read_children(self) -> None:
    for pid in _children(os.getpid()):
      cpu = _cpu_s(pid)
      if cpu is None:
        continue
      kind, before = self.children.get(pid, (None, 0.0))
      if kind is None:
        kind = child_kind((_read(f"/proc/{pid}/cmdline") or "").replace("\0", " "))
      self.children[pid] = (kind, max(cpu, before))

  def _loop(self) -> None:
    while not self._stop.wait(self.interval_s):
      self._tick()

  def stop(self) -> dict[str, Any]:
    """Stops sampling; the profile (seconds of CPU per category and per kind of child process)."""
    self._read_children()
    self._stop.set()
    self._thread.join(timeout=5)
    self._tick()
    wall = time.monotonic() - self._wall0
    me = resource.getrusage(resource.RUSAGE_SELF)
    kids = resource.getrusage(resource.RUSAGE_CHILDREN)
    own = (me.ru_utime - self._self0.ru_utime) + (me.ru_stime - self._self0.ru_stime)
    waited = (kids.ru_utime - self._kids0.ru_utime) + (kids.ru_stime - self._kids0.ru_stime)
    attributed = sum(self.by_category.values())
    native = _native_threads({t.native_id for t in threading.enumerate()})
    by_kind: dict[str, float] = {}
    for kind, cpu in self.children.values():
      by_kind[kind] = by_kind.get(kind, 0.0) + cpu
    seen = sum(by_kind.values())
    # Children no tick saw: the waited-for children's CPU beyond what the ticks saw (a live child's CPU
    # is in both only once it is waited for; this is a floor for the unseen).
    by_kind["short-lived children no tick saw"] = max(0.0, waited - seen)
    return {
        "wall_s": round(wall, 2),
        "process_cpu_s": round(own, 2),
        "process": {**{k: round(v, 2) for k, v in sorted(self.by_category.items(), key=lambda kv: -kv[1])},
                    "unattributed": round(max(0.0, own - attributed), 2)},
        "native_threads_alive_at_end": {k: round(v, 2) for k, v in sorted(native.items(), key=lambda kv: -kv[1])
                                        if v >= 0.01},
        "children_cpu_s": round(max(seen, waited), 2),
        "children": {k: round(v, 2) for k, v in sorted(by_kind.items(), key=lambda kv: -kv[1])},
        "ticks": self.ticks, "interval_s": self.interval_s,
    }


def available() -> bool:
  return sys.platform.startswith("linux") and hasattr(time, "pthread_getcpuclockid")


@contextlib.contextmanager
def from_env() -> Iterator[None]:
  """Profiles the body when HIERAMAS_PROFILE names a file, and writes the profile there at the end
  (also when the body fails, so a failed run's profile is not lost); otherwise does nothing."""
  path = os.environ.get(ENV)
  if not path:
    yield
    return
  target = pathlib.Path(path)
  if not available():
    target.write_text(json.dumps({"unavailable": f"needs Linux per-thread CPU clocks, not {sys.platform}"}) + "\n")
    yield
    return
  prof = Profiler().start()
  try:
    yield
  finally:
    target.write_text(json.dumps(prof.stop(), indent=1) + "\n")
