"""HumanEval+ grading in a sandboxed child process (EvalPlus semantics, asyncio driven).

One child process per candidate runs everything for that candidate (the dataset's
`check(candidate)`, then every base and plus input), so grading costs one interpreter start,
not one per input. The child (`_sandbox_child.py`, run as `python -I`) sets its own rlimits
(CPU seconds, address space, file size), hides its stdout/stderr, applies an EvalPlus-style
reliability guard and reports one result line carrying a one-time token. The parent adds what
the child cannot enforce on itself: a temporary working directory deleted afterwards, a new
session whose whole process group is killed (on wall timeout and after every run, which stops
what a fork bomb leaves behind even as root, where RLIMIT_NPROC does not apply), and a size
cap on what it reads back.

Expected outputs for the base and plus inputs come from running the canonical solution the
same way (not from the dataset, which ships inputs only), with per-input times that set the
candidate's per-input limits as EvalPlus does: max(MIN_TIME_LIMIT_S, 4 x canonical time).
They are cached on disk under `paths.cache_dir()`, keyed by task id and the data file's
sha256; grades are cached by sha256 of (task id, code, data sha256, harness version).
"""

from __future__ import annotations

import asyncio
import dataclasses
import hashlib
import json
import os
import pathlib
import pickle
import secrets
import shutil
import signal
import sys
import tempfile
import weakref

from hieramas_jax.benchmarks.data import Item, data_sha256
from hieramas_jax.benchmarks.graders import Grade, extract_code
from hieramas_jax.fileio import atomic_write_bytes
from hieramas_jax.paths import cache_dir

CHILD_SCRIPT = pathlib.Path(__file__).with_name("_sandbox_child.py")

# Bump when the harness or the comparison changes: old cached grades become stale.
HARNESS_VERSION = "3"

# EvalPlus defaults (evalplus/config.py): per-input limit = max(1 s, 4 x canonical time).
MIN_TIME_LIMIT_S = 1.0
TIME_LIMIT_FACTOR = 4.0


class SandboxError(RuntimeError):
  """The sandbox itself failed (it could not start, or the canonical solution failed)."""


@dataclasses.dataclass(frozen=True)
class SandboxLimits:
  """Resource limits of one sandboxed run.

  Attributes:
    wall_s: wall-clock limit for the whole child; past it the process group is killed.
    cpu_s: RLIMIT_CPU of the child (SIGXCPU, then SIGKILL one second later).
    memory_bytes: RLIMIT_AS (and RLIMIT_DATA): a 50 GB allocation fails at once with
      MemoryError instead of swapping the machine.
    fsize_bytes: RLIMIT_FSIZE: largest file the child may write.
    output_cap_bytes: most bytes of the child's stdout the parent keeps (the rest is read and
      dropped, so a flood can neither block the child nor fill the parent's memory).
    load_s: time limit for running the program's top level (imports, definitions).
    check_s: least time limit for the dataset's `check(candidate)`; the limit used is the
      larger of this and 4 x the canonical solution's time.
  """

  wall_s: float = 60.0
  cpu_s: int = 60
  memory_bytes: int = 4 << 30
  fsize_bytes: int = 16 << 20
  output_cap_bytes: int = 1 << 20
  load_s: float = 5.0
  check_s: float = 2.0


DEFAULT_LIMITS = SandboxLimits()
# Slower in wall time only because the machine may be loaded when expected outputs are made.
# The canonical run also writes every output to a file (some are megabytes).
CANONICAL_LIMITS = SandboxLimits(wall_s=300.0, cpu_s=300, fsize_bytes=1 << 30, load_s=60.0,
                                 check_s=120.0)


@dataclasses.dataclass(frozen=True)
class RunOutcome:
  """What came back from one child: its result record (None when it reported nothing),
  its exit code, whether the wall limit killed it, and the (capped) stdout."""

  record: dict | None
  returncode: int | None
  timed_out: bool
  stdout_bytes: int


# One concurrency bound per event loop (asyncio primitives belong to one loop).
_SEMAPHORES: "weakref.WeakKeyDictionary[asyncio.AbstractEventLoop, asyncio.Semaphore]" = (
    weakref.WeakKeyDictionary())
_EXPECTED_LOCKS: "weakref.WeakKeyDictionary[asyncio.AbstractEventLoop, dict]" = (
    weakref.WeakKeyDictionary())
_EXPECTED_MEMO: dict[tuple[str, str], dict] = {}


def max_concurrency() -> int:
  """Children run at once: one per core (grading is CPU bound)."""
  return max(1, os.cpu_count() or 1)


def _semaphore() -> asyncio.Semaphore:
  loop = asyncio.get_running_loop()
  sem = _SEMAPHORES.get(loop)
  if sem is None:
    sem = _SEMAPHORES[loop] = asyncio.Semaphore(max_concurrency())
  return sem


async def _read_capped(stream: asyncio.StreamReader, cap: int) -> tuple[bytes, int]:
  """Read to EOF, keeping at most `cap` bytes; returns (kept, total)."""
  kept = bytearray()
  total = 0
  while True:
    chunk = await stream.read(1 << 16)
    if not chunk:
      return bytes(kept), total
    total += len(chunk)
    if len(kept) < cap:
      kept += chunk[:cap - len(kept)]


async def _exited_within(proc: asyncio.subprocess.Process, seconds: float) -> bool:
  """Whether the child exits within `seconds`.

  Polls `returncode` instead of awaiting `proc.wait()`: in Python 3.11 `wait()` resolves only
  once every pipe is closed, so a grandchild holding stdout would keep it waiting for the
  whole wall limit although the child is long gone.
  """
  loop = asyncio.get_running_loop()
  deadline = loop.time() + seconds
  delay = 0.002
  while proc.returncode is None:
    now = loop.time()
    if now >= deadline:
      return False
    await asyncio.sleep(min(delay, deadline - now))
    delay = min(delay * 2, 0.05)
  return True


def _kill_group(pid: int) -> None:
  try:
    os.killpg(pid, signal.SIGKILL)
  except (ProcessLookupError, PermissionError):
    pass


async def run_job(job: dict, limits: SandboxLimits, *, keep_files: tuple[str, ...] = ()
                  ) -> tuple[RunOutcome, dict[str, bytes]]:
  """Run one job in a fresh child and temporary directory; never raises for the child's sake.

  Args:
    job: the payload for `_sandbox_child.py` (limits and token are filled in here).
    limits: resource limits.
    keep_files: names of files in the working directory to read back before it is deleted.

  Returns:
    The outcome, and the kept files' bytes (missing ones absent).
  """
  token = secrets.token_hex(16)
  job = dict(job, token=token, cpu_s=int(limits.cpu_s), memory_bytes=int(limits.memory_bytes),
             fsize_bytes=int(limits.fsize_bytes), load_s=float(limits.load_s),
             check_s=float(limits.check_s))
  async with _semaphore():
    workdir = tempfile.mkdtemp(prefix="hieramas-sandbox-")
    try:
      payload = os.path.join(workdir, "payload.pkl")
      with open(payload, "wb") as f:
        pickle.dump(job, f, protocol=pickle.HIGHEST_PROTOCOL)
      env = {"PATH": os.environ.get("PATH", "/usr/bin:/bin"), "HOME": workdir, "TMPDIR": workdir,
             "OMP_NUM_THREADS": "1", "OPENBLAS_NUM_THREADS": "1", "MKL_NUM_THREADS": "1",
             "PYTHONHASHSEED": "0", "PYTHONDONTWRITEBYTECODE": "1"}
      try:
        proc = await asyncio.create_subprocess_exec(
            sys.executable, "-I", str(CHILD_SCRIPT), payload, cwd=workdir, env=env,
            stdin=asyncio.subprocess.DEVNULL, stdout=asyncio.subprocess.PIPE,
            stderr=asyncio.subprocess.DEVNULL, start_new_session=True)
      except OSError as e:
        raise SandboxError(f"cannot start the sandbox child: {e}") from e
      reader = asyncio.ensure_future(_read_capped(proc.stdout, limits.output_cap_bytes))
      try:
        timed_out = not await _exited_within(proc, limits.wall_s)
      finally:
        # Always: the group may hold grandchildren even when the child itself has exited.
        _kill_group(proc.pid)
      try:
        out, total = await asyncio.wait_for(reader, timeout=10)
        await asyncio.wait_for(proc.wait(), timeout=10)
      except asyncio.TimeoutError:  # something outside the group holding the pipe open
        reader.cancel()
        out, total = b"", 0
      record = None
      for line in out.splitlines():
        try:
          candidate = json.loads(line)
        except ValueError:
          continue
        if isinstance(candidate, dict) and candidate.get("token") == token:
          record = candidate
          break
      kept = {}
      for name in keep_files:
        path = os.path.join(workdir, name)
        if os.path.isfile(path):
          with open(path, "rb") as f:
            kept[name] = f.read()
      return RunOutcome(record, proc.returncode, timed_out, total), kept
    finally:
      shutil.rmtree(workdir, ignore_errors=True)


def _build_job(item: Item, program: str, mode: str) -> dict:
  meta = item.meta
  return {"mode": mode, "program": program, "entry_point": meta["entry_point"],
          "test": meta["test"], "base_input": meta["base_input"],
          "plus_input": meta["plus_input"], "atol": float(meta["atol"] or 0.0)}


def _expected_path(item: Item) -> pathlib.Path:
  key = hashlib.sha256(f"{item.id}\0{data_sha256(item.benchmark)}\0{HARNESS_VERSION}".encode())
  return cache_dir() / "humaneval_expected" / f"{key.hexdigest()}.pkl"



async def expected_outputs(item: Item) -> dict:
  """Outputs and timings of the canonical solution on the task's base and plus inputs.

  Computed once per (task, data file) in the sandbox and cached on disk; within one process
  also in memory.

  Raises:
    SandboxError: the canonical solution failed its own tests (a broken data file or harness).
  """
  memo_key = (item.id, data_sha256(item.benchmark))
  if memo_key in _EXPECTED_MEMO:
    return _EXPECTED_MEMO[memo_key]
  loop = asyncio.get_running_loop()
  locks = _EXPECTED_LOCKS.setdefault(loop, {})
  lock = locks.setdefault(item.id, asyncio.Lock())
  async with lock:
    if memo_key in _EXPECTED_MEMO:
      return _EXPECTED_MEMO[memo_key]
    path = _expected_path(item)
    expected = None
    if path.exists():
      try:
        expected = pickle.loads(path.read_bytes())
      except (pickle.UnpicklingError, EOFError, ValueError):
        expected = None  # a torn or foreign file: recompute
    if expected is None:
      program = item.question + item.answer
      outcome, files = await run_job(_build_job(item, program, "expected"), CANONICAL_LIMITS,
                                     keep_files=("expected.pkl",))
      if not (outcome.record and outcome.record.get("ok")) or "expected.pkl" not in files:
        raise SandboxError(f"{item.id}: the canonical solution failed in the sandbox: "
                           f"{(outcome.record or {}).get('error', 'no result')!r} "
                           f"(exit {outcome.returncode}, timed out: {outcome.timed_out})")
      data = files["expected.pkl"]
      expected = pickle.loads(data)
      atomic_write_bytes(path, data)
    _EXPECTED_MEMO[memo_key] = expected
    return expected


def assemble_program(item: Item, code: str) -> str | None:
  """The program to run for extracted code, or None when it cannot compile.

  Code that defines the entry point runs after the whole prompt (its imports and helper
  functions, e.g. `poly` for `find_zero`; the prompt's own stub is then redefined). Code that
  does not is the body that continues the prompt; if it compiles only once indented, it is
  indented (models often drop the body's leading indentation).
  """
  prompt = item.question
  entry_point = item.meta["entry_point"]
  from hieramas_jax.benchmarks.graders import _defines  # pylint: disable=import-outside-toplevel
  if _defines(code, entry_point):
    candidates = [prompt.rstrip() + "\n\n\n" + code]
  else:
    body = code if code.endswith("\n") else code + "\n"
    indented = "".join(("    " + ln if ln.strip() else ln) for ln in body.splitlines(True))
    candidates = [prompt + body, prompt + indented]
  for program in candidates:
    try:
      compile(program, "<candidate>", "exec")
    except (SyntaxError, ValueError, OverflowError, RecursionError, MemoryError):
      continue
    return program
  return None


def _time_limits(times: list[float]) -> list[float]:
  return [max(MIN_TIME_LIMIT_S, TIME_LIMIT_FACTOR * t) for t in times]


def _grade_cache_path(item: Item, code: str) -> pathlib.Path:
  key = hashlib.sha256(
      f"{item.id}\0{code}\0{data_sha256(item.benchmark)}\0{HARNESS_VERSION}".encode())
  return cache_dir() / "humaneval_grades" / key.hexdigest()[:2] / f"{key.hexdigest()}.json"


async def run_candidate(item: Item, code: str, limits: SandboxLimits = DEFAULT_LIMITS,
                        *, use_cache: bool = True) -> Grade:
  """Run extracted code against the task's base and plus tests; pass only if all pass."""
  cache_path = _grade_cache_path(item, code)
  if use_cache and cache_path.exists():
    try:
      cached = json.loads(cache_path.read_text())
      return Grade(bool(cached["correct"]), code, str(cached["detail"]))
    except (ValueError, KeyError):
      pass
  program = assemble_program(item, code)
  if program is None:
    grade = Grade(False, code, "syntax error")
  else:
    expected = await expected_outputs(item)
    job = _build_job(item, program, "candidate")
    job["expected"] = {key: expected[key]
                       for key in ("base", "plus", "base_digest", "plus_digest")}
    job["time_limits"] = {"base": _time_limits(expected["base_times"]),
                          "plus": _time_limits(expected["plus_times"])}
    check_s = max(limits.check_s, TIME_LIMIT_FACTOR * expected.get("check_time", 0.0))
    # Tasks whose canonical solution itself needs seconds (HumanEval/15, /139...) get a
    # proportionally longer wall and CPU budget; a cheap task keeps the plain limits.
    canonical_s = sum(expected["base_times"]) + sum(expected["plus_times"])
    wall_s = max(limits.wall_s, limits.load_s + 2 * TIME_LIMIT_FACTOR * canonical_s)
    run_limits = dataclasses.replace(limits, check_s=check_s, wall_s=wall_s,
                                     cpu_s=max(limits.cpu_s, int(wall_s) + 1))
    outcome, _ = await run_job(job, run_limits)
    grade = _to_grade(outcome, code)
  if use_cache:
    atomic_write_bytes(cache_path, json.dumps({"task_id": item.id, "correct": grade.correct,
                                          "detail": grade.detail}).encode())
  return grade


def _to_grade(outcome: RunOutcome, code: str) -> Grade:
  record = outcome.record
  if outcome.timed_out:
    return Grade(False, code, "wall time limit exceeded (process group killed)")
  if record is None:
    return Grade(False, code, f"no result from the sandbox (exit code {outcome.returncode})")
  if record.get("ok"):
    return Grade(True, code, "passed base and plus tests")
  stage, index = record.get("stage"), record.get("index", -1)
  where = f"{stage} test {index}" if index is not None and index >= 0 else str(stage)
  return Grade(False, code, f"failed at {where}: {record.get('error', '')}")


async def grade_humaneval_async(item: Item, text: str | None,
                                limits: SandboxLimits = DEFAULT_LIMITS) -> Grade:
  """Extract the code from a model's answer and grade it in the sandbox."""
  code = extract_code(text, item.meta["entry_point"])
  if code is None:
    return Grade(False, None, "no code found")
  return await run_candidate(item, code, limits)
