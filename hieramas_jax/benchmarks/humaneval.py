"""HumanEval+ judging: a candidate program is run in the sandbox on the task's inputs; the verdict is made here.

The sandbox (`sandbox.py`) runs a program isolated and hands back its report lines; it knows nothing of
tasks or verdicts. This module knows HumanEval+: the program to run for extracted code
(`assemble_program`), the canonical solution's outputs (`expected_outputs`), the per-input limits, and
the comparison. The graders call it (`graders.grade_humaneval`); the arrows point one way:
graders -> humaneval -> sandbox.

**The verdict cannot be forged.** The child (`_sandbox_child.py`) runs the program and reports only the
function's outputs for the task's base and plus inputs, one JSON line each. It never receives the
expected outputs (nor the dataset's `check()`, whose source holds expected values); this side compares
every reported output with the canonical solution's, EvalPlus style (exact `==` on plain values,
`np.allclose(rtol=1e-7, atol)` for floats, any root for `find_zero`). So whatever a program does to its
own process (walking the frames to the reporting code, patching the encoder, writing to the result pipe,
returning an object whose `__eq__` says yes) it can only report values it computed. The report is decoded
as plain JSON (never unpickled) and read with a per-line size cap.

Expected outputs and per-input times come from running the canonical solution the same way
(cached on disk under `paths.cache_dir()` as JSON, keyed by task id, data sha256 and harness
version). A candidate's per-input limit is max(MIN_TIME_LIMIT_S, 4 x canonical time) as in EvalPlus,
in CPU time (so that load does not change a grade; docs/benchmarks.md, "Sandbox limits").
Grades are cached by sha256 of (task id, code, data sha256, harness version, isolation mode). Both
caches are written by the parent only, each entry sealed with its key fields and a checksum
(`seal`); a torn or edited entry is recomputed, never replayed.
"""

from __future__ import annotations

import asyncio
import dataclasses
import hashlib
import json
import logging
import math
import pathlib
import weakref

from hieramas_jax.benchmarks import _sandbox_child as child
from hieramas_jax.benchmarks import sandbox
from hieramas_jax.benchmarks.data import Item, data_sha256
from hieramas_jax.benchmarks.extract import defines
from hieramas_jax.fileio import atomic_write_bytes
from hieramas_jax.paths import cache_dir

log = logging.getLogger(__name__)

# Bump when the harness (`_sandbox_child.py`) or the comparison changes: old cached grades become stale.
HARNESS_VERSION = "6"

# EvalPlus defaults (evalplus/config.py): per-input limit = max(1 s, 4 x canonical time).
MIN_TIME_LIMIT_S = 1.0
TIME_LIMIT_FACTOR = 4.0

# The parent's per-input budget is twice the child's own limit plus this (the child's SIGPROF fires
# first unless the program ignores it); the first input also gets the load time and the start.
_LINE_GRACE_S = 2.0
_STARTUP_GRACE_S = 3.0

# Slower in wall time only because the machine may be loaded when expected outputs are made.
CANONICAL_LIMITS = sandbox.SandboxLimits(wall_s=300.0, cpu_s=300, load_s=60.0, output_cap_bytes=64 << 20)

_EXPECTED_LOCKS: "weakref.WeakKeyDictionary[asyncio.AbstractEventLoop, dict]" = (
    weakref.WeakKeyDictionary())
_EXPECTED_MEMO: dict[tuple[str, str], "_Expected"] = {}
# A program this process had to kill (a budget ran out from outside: it ignored its own per-input limit,
# slept, or blocked) rather than one that failed an input.
GRADER_KILL = "time limit exceeded (killed by the grader)"
# One confirmation at a time per event loop (see `run_candidate`).
_CONFIRM_LOCKS: "weakref.WeakKeyDictionary[asyncio.AbstractEventLoop, asyncio.Lock]" = weakref.WeakKeyDictionary()


# ---------------------------------------------------------------------------------------------
# Expected outputs (canonical solution).


@dataclasses.dataclass
class _Expected:
  """The canonical solution's report: per input the encoded output or its digest, and times."""

  outputs: list[dict]
  times: list[float]
  n_base: int
  check_time: float
  values: dict[int, object] = dataclasses.field(default_factory=dict)

  def value(self, i: int):
    if i not in self.values:
      self.values[i] = child.decode(self.outputs[i]["out"])
    return self.values[i]


def _inputs(item: Item) -> list:
  return list(item.meta["base_input"]) + list(item.meta["plus_input"])


def _expected_path(item: Item) -> pathlib.Path:
  key = hashlib.sha256(f"{item.id}\0{data_sha256(item.benchmark)}\0{HARNESS_VERSION}".encode())
  return cache_dir() / "humaneval_expected" / f"{key.hexdigest()}.json"


def seal(record: dict) -> bytes:
  """A cache entry (here and AFlow's example runs) with the sha256 of its own canonical JSON: an edited entry no longer matches."""
  body = json.dumps(record, sort_keys=True, separators=(",", ":"))
  return json.dumps(dict(record, sha256=hashlib.sha256(body.encode()).hexdigest()), sort_keys=True).encode()


def unseal(path: pathlib.Path, **expect) -> dict | None:
  """The entry at `path` if it is whole, its checksum holds and it is for `expect`; else None.

  A missing entry is silent; a torn, edited or foreign one is said (naming the file) and recomputed,
  never replayed. The parent alone writes these files: no graded program can see them (bubblewrap)."""
  try:
    text = path.read_text(encoding="utf-8")
  except FileNotFoundError:
    return None
  except OSError as e:
    log.warning("%s: unreadable (%s); recomputing it", path, e)
    return None
  try:
    data = json.loads(text)
    claimed = data.pop("sha256")
    body = json.dumps(data, sort_keys=True, separators=(",", ":"))
    ok = claimed == hashlib.sha256(body.encode()).hexdigest() and all(data.get(k) == v for k, v in expect.items())
  except (ValueError, TypeError, KeyError, AttributeError, RecursionError):
    ok = False
  if not ok:
    log.warning("%s: torn, edited or not this entry's (checksum or key fields differ); recomputing it "
                "instead of replaying it", path)
    return None
  return data


def _load_expected(path: pathlib.Path, item: Item) -> _Expected | None:
  n = len(_inputs(item))
  data = unseal(path, task_id=item.id, data_sha256=data_sha256(item.benchmark), harness=HARNESS_VERSION)
  if data is None:
    return None
  try:
    exp = _Expected(list(data["outputs"]), [float(t) for t in data["times"]], int(data["n_base"]),
                    float(data["check_time"]))
  except (ValueError, KeyError, TypeError):
    return None
  if len(exp.outputs) != n or len(exp.times) != n:
    return None
  return exp


async def _run_expected(item: Item) -> _Expected:
  inputs = _inputs(item)
  records: list[dict] = []
  check_time = [0.0]
  failure: list[str] = []

  def on_line(line: bytes) -> sandbox.Stop | None:
    try:
      rec = json.loads(line)
    except ValueError:
      failure.append("a malformed report line")
      return sandbox.Stop("malformed")
    if "check_time" in rec:
      check_time[0] = float(rec["check_time"])
    elif "done" in rec:
      return sandbox.Stop("done", let_exit=True)
    elif "error" in rec:
      where = f"input {rec['i']}" if "i" in rec else rec.get("stage", "?")
      failure.append(f"{where}: {rec['error']}")
      return sandbox.Stop("error")
    elif rec.get("i") == len(records) and ("out" in rec or "digest" in rec):
      records.append(rec)
    else:
      failure.append("an out-of-order report line")
      return sandbox.Stop("malformed")
    return None

  job = {"mode": "expected", "program": item.question + item.answer,
         "entry_point": item.meta["entry_point"], "test": item.meta["test"], "inputs": inputs,
         "time_limits": [CANONICAL_LIMITS.load_s] * len(inputs)}
  outcome = await sandbox.run_child(job, CANONICAL_LIMITS, on_line)
  if failure or len(records) != len(inputs):
    raise sandbox.SandboxError(f"{item.id}: the canonical solution failed in the sandbox: "
                       f"{failure[0] if failure else f'{len(records)} of {len(inputs)} outputs'} "
                       f"(exit {outcome.returncode}, timed out: {outcome.timed_out})")
  outputs = [{k: rec[k] for k in ("out", "digest") if k in rec} for rec in records]
  return _Expected(outputs, [float(rec.get("t", 0.0)) for rec in records],
                   len(item.meta["base_input"]), check_time[0])


async def expected_outputs(item: Item) -> _Expected:
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
    expected = _load_expected(path, item)
    if expected is None:
      expected = await _run_expected(item)
      atomic_write_bytes(path, seal({
          "task_id": item.id, "data_sha256": data_sha256(item.benchmark), "harness": HARNESS_VERSION,
          "outputs": expected.outputs, "times": expected.times, "n_base": expected.n_base,
          "check_time": expected.check_time}))
    _EXPECTED_MEMO[memo_key] = expected
    return expected


# ---------------------------------------------------------------------------------------------
# Judging a candidate, outside the sandbox.


def _poly(xs, x):
  return sum(coeff * math.pow(x, i) for i, coeff in enumerate(xs))


def compare_output(entry_point: str, inp, got: dict, expected: _Expected, i: int, atol: float
                   ) -> str | None:
  """None if the reported output `got` (a report record) matches expected output `i`, else why not.

  EvalPlus's comparison (evalplus/eval/__init__.py): exact `==`; for float outputs (or a task
  atol) same type and length and `np.allclose(rtol=1e-7, atol)`; `find_zero` accepts any x with
  |poly(xs, x)| <= atol. Large outputs compare by the digest of their canonical encoding.
  """
  exp = expected.outputs[i]
  try:
    if entry_point == "find_zero":
      x = child.decode(got["out"]) if "out" in got else None
      if type(x) not in (int, float):
        return "not a number"
      return None if abs(_poly(*inp, x)) <= atol else "not a root"
    if "digest" in exp or "digest" in got:
      got_digest = got.get("digest") or child.tree_digest(got["out"])
      exp_digest = exp.get("digest") or child.tree_digest(exp["out"])
      return None if got_digest == exp_digest else "output differs"
    out = child.decode(got["out"])
    want = expected.value(i)
    if atol == 0 and child.is_floats(want):
      atol = 1e-6
    if out == want:
      return None
    if atol == 0:
      return "output differs"
    if type(out) is not type(want):
      return f"type {type(out).__name__} != {type(want).__name__}"
    if isinstance(want, (list, tuple)) and len(out) != len(want):
      return "length differs"
    import numpy as np  # pylint: disable=import-outside-toplevel
    return None if bool(np.allclose(out, want, rtol=1e-07, atol=atol)) else "not close"
  except (ValueError, TypeError, KeyError, OverflowError, RecursionError, ArithmeticError):
    return "output cannot be compared"


@dataclasses.dataclass(frozen=True)
class Verdict:
  """Whether a candidate passed every base and plus test, and if not, why.

  Not `graders.Grade`: judging sits below the graders (graders -> humaneval -> sandbox), and the
  graders add what they extracted (`graders.grade_humaneval`).

  Attributes:
    correct: whether every output matched.
    detail: why ("passed base and plus tests", "failed at plus test 17: output differs", ...).
  """

  correct: bool
  detail: str


class _Judge:
  """Reads a candidate's report line by line and decides as soon as it can."""

  def __init__(self, item: Item, expected: _Expected):
    self.entry_point = item.meta["entry_point"]
    self.atol = float(item.meta["atol"] or 0.0)
    self.inputs = _inputs(item)
    self.expected = expected
    self.matched = 0
    self.verdict: Verdict | None = None

  def _where(self, i: int) -> str:
    n_base = self.expected.n_base
    return f"base test {i}" if i < n_base else f"plus test {i - n_base}"

  def _decide(self, correct: bool, detail: str) -> sandbox.Stop:
    self.verdict = Verdict(correct, detail)
    return sandbox.Stop(detail, let_exit=correct)  # a failing program is killed at once

  def on_line(self, line: bytes) -> sandbox.Stop | None:
    try:
      rec = json.loads(line)
    except (ValueError, RecursionError):
      return self._decide(False, "malformed report from the sandbox")
    if type(rec) is not dict:
      return self._decide(False, "malformed report from the sandbox")
    if "done" in rec and self.matched == len(self.inputs):  # only reached for a task without inputs
      return self._decide(True, "passed base and plus tests")
    if rec.get("stage") == "seccomp":  # the sandbox did not engage: never a grade
      raise sandbox.SandboxError(f"{rec.get('error')}; grading refuses to run programs without it "
                         "(is this a Linux x86_64/aarch64 kernel with seccomp?)")
    if "i" not in rec:  # the child's own account of a failure before the first input
      if rec.get("stage") in ("load", "guard") and isinstance(rec.get("error"), str):
        return self._decide(False, f"failed at {rec['stage']}: {rec['error'][:300]}")
      return self._decide(False, "malformed report from the sandbox")
    i = rec.get("i")
    if type(i) is not int or i != self.matched:
      return self._decide(False, "malformed report from the sandbox")
    where = self._where(i)
    if "error" in rec:
      return self._decide(False, f"failed at {where}: {str(rec['error'])[:300]}")
    why = compare_output(self.entry_point, self.inputs[i], rec, self.expected, i, self.atol)
    if why is not None:
      return self._decide(False, f"failed at {where}: {why}")
    self.matched += 1
    if self.matched == len(self.inputs):
      return self._decide(True, "passed base and plus tests")
    return None

  def result(self, outcome: sandbox.RunOutcome) -> Verdict:
    if self.verdict is not None:
      return self.verdict
    if outcome.stopped:
      return Verdict(False, f"failed: {outcome.stopped}")
    if outcome.timed_out:
      return Verdict(False, GRADER_KILL)
    if self.matched == 0:
      return Verdict(False, f"no result from the sandbox (exit code {outcome.returncode})")
    return Verdict(False, f"no result for {self._where(self.matched)} (exit code {outcome.returncode})")


def assemble_program(item: Item, code: str) -> str | None:
  """The program to run for extracted code, or None when it cannot compile.

  Code that defines the entry point runs after the whole prompt (its imports and helper
  functions, e.g. `poly` for `find_zero`; the prompt's own stub is then redefined). Code that
  does not is the body that continues the prompt; if it compiles only once indented, it is
  indented (models often drop the body's leading indentation).
  """
  prompt = item.question
  entry_point = item.meta["entry_point"]
  if defines(code, entry_point):
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


def _grade_cache_path(item: Item, code: str, mode: str | None = None) -> pathlib.Path:
  mode = mode or sandbox.isolation().mode
  key = hashlib.sha256(
      f"{item.id}\0{code}\0{data_sha256(item.benchmark)}\0{HARNESS_VERSION}\0{mode}".encode())
  return cache_dir() / "humaneval_grades" / key.hexdigest()[:2] / f"{key.hexdigest()}.json"


async def run_candidate(item: Item, code: str, limits: sandbox.SandboxLimits = sandbox.DEFAULT_LIMITS,
                        *, use_cache: bool = True, iso: sandbox.Isolation | None = None) -> Verdict:
  """Run extracted code on the task's base and plus inputs; it passes only if every output matches.

  Args:
    item: the HumanEval+ task.
    code: the extracted code (see `assemble_program`).
    limits: resource limits (the per-input and wall limits grow with the canonical solution's time).
    use_cache: read and write the on-disk grade cache.
    iso: the isolation (default: `sandbox.isolation()`).
  """
  iso = iso or sandbox.isolation()
  cache_path = _grade_cache_path(item, code, iso.mode)
  key = {"task_id": item.id, "code_sha256": hashlib.sha256(code.encode()).hexdigest(),
         "data_sha256": data_sha256(item.benchmark), "harness": HARNESS_VERSION, "mode": iso.mode}
  if use_cache:
    cached = unseal(cache_path, **key)
    if (cached is not None and type(cached.get("correct")) is bool and isinstance(cached.get("detail"), str)
        and cached["detail"] != GRADER_KILL):  # a kill is never replayed (older caches kept some)
      return Verdict(cached["correct"], cached["detail"])
  program = assemble_program(item, code)
  if program is None:
    verdict = Verdict(False, "syntax error")
  else:
    verdict = await _judge_program(item, program, limits, iso)
    if verdict.detail == GRADER_KILL:
      # A budget that ran out from outside is measured on this machine's clock as well as the program's
      # CPU: a busy or starved grading process (seen with four suite processes on 2 cores: two trivial
      # HumanEval+ programs of ~1,000 inputs killed in 42 calibration gradings, each passed when
      # regraded) must not fail a program. The kill is confirmed by a second run, one at a time in this
      # event loop; only a second kill is the verdict, and a kill is never cached.
      async with _CONFIRM_LOCKS.setdefault(asyncio.get_running_loop(), asyncio.Lock()):
        verdict = await _judge_program(item, program, limits, iso)
      log.warning("%s: the grader killed a program; regraded alone: %s", item.id, verdict.detail)
  if use_cache and verdict.detail != GRADER_KILL:
    atomic_write_bytes(cache_path, seal(dict(key, correct=verdict.correct, detail=verdict.detail)))
  return verdict


async def _judge_program(item: Item, program: str, limits: sandbox.SandboxLimits,
                         iso: sandbox.Isolation) -> Verdict:
  """One run of an assembled program on every base and plus input, judged line by line."""
  expected = await expected_outputs(item)
  job = {"mode": "candidate", "program": program, "entry_point": item.meta["entry_point"],
         "inputs": _inputs(item), "time_limits": _time_limits(expected.times)}
  # Tasks whose canonical solution itself needs seconds (HumanEval/15, /139...) get a
  # proportionally longer wall and CPU budget; a cheap task keeps the plain limits.
  wall_s = max(limits.wall_s, limits.load_s + 2 * TIME_LIMIT_FACTOR * sum(expected.times))
  run_limits = dataclasses.replace(limits, wall_s=wall_s, cpu_s=max(limits.cpu_s, int(wall_s) + 1))
  judge = _Judge(item, expected)
  limits_s = job["time_limits"]

  def line_budget(n: int) -> float:  # twice the child's own limit plus a grace: a loaded machine, and
    first = limits.load_s + _STARTUP_GRACE_S if n == 0 else 0.0  # the output's encoding is not timed
    return first + 2 * (limits_s[n] if n < len(limits_s) else 0.0) + _LINE_GRACE_S

  outcome = await sandbox.run_child(job, run_limits, judge.on_line, iso, line_budget)
  return judge.result(outcome)
