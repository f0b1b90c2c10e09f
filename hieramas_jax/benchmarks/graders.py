"""Graders: from a model's free text to correct / incorrect, for every benchmark.

Reading the answer out of the text is `extract.py`'s (pure, shared with the simulator and the voting
methods); this module judges what it read. Three rules hold for every benchmark:
  * extraction is pure and cheap, and the same for every caller (`extract.py`);
  * no LLM judge, ever: MMLU compares letters, MATH compares answers symbolically with
    math-verify, HumanEval+ runs the code against the base and plus tests in a sandbox;
  * grading never hangs and works from any thread: math-verify's own timeouts rely on
    `signal.alarm`, which only works in a main thread, so the symbolic step runs in a small
    worker process (`_SymbolicWorker`) that is killed and restarted if it overruns.
"""

from __future__ import annotations

import asyncio
import dataclasses
import functools
import json
import os
import re
import select
import subprocess
import sys
import threading

from hieramas_jax.benchmarks import humaneval
from hieramas_jax.benchmarks.data import Item, check_benchmark
from hieramas_jax.benchmarks.extract import extract_code, extract_math_answer, extract_mmlu_letter
from hieramas_jax.paths import REPO_DIR


@dataclasses.dataclass(frozen=True)
class Grade:
  """The verdict on one answer.

  Attributes:
    correct: whether the answer counts as right.
    extracted: what the grader read as the answer (a letter, a MATH expression, code), or
      None when it found none; kept so a wrong grade can be inspected.
    detail: a short human-readable reason ("match", "no answer found", "plus test 17 failed").
  """

  correct: bool
  extracted: str | None
  detail: str


class GradingError(RuntimeError):
  """The grader itself failed (not the answer): a broken sandbox, a dead worker."""


# ---------------------------------------------------------------------------------------------
# MATH: equivalence.

_SPACING = re.compile(r"\\[,;:! ]|\\quad|\\qquad|~")
_TEXT_WRAP = re.compile(r"\\(?:text|textbf|mathrm|mbox|mathbf)\s*\{([^{}]*)\}")


def normalize_math(answer: str) -> str:
  """A conservative normal form for the fast string path: only rewrites that cannot change
  the value (spacing, `\\left`/`\\right`, `\\dfrac`, `$`, `\\text{}` wrappers, a trailing dot)."""
  s = answer.strip()
  s = s.replace("$", "")
  s = re.sub(r"\\left\b|\\right\b", "", s)
  s = _SPACING.sub("", s)
  s = s.replace("\\dfrac", "\\frac").replace("\\tfrac", "\\frac")
  prev = None
  while prev != s:
    prev = s
    s = _TEXT_WRAP.sub(r"\1", s)
  s = re.sub(r"\s+", "", s)
  s = s.rstrip(".")
  return s


# Seconds one math-verify comparison may take: the worker's own signal timeout fires first,
# the parent's wall timeout (kill + restart) is the backstop against C-level hangs.
SYMBOLIC_TIMEOUT_S = 5
_WALL_TIMEOUT_S = 3 * SYMBOLIC_TIMEOUT_S + 10
_STARTUP_TIMEOUT_S = 120


def symbolic_worker_main() -> None:
  """Child loop (stdin/stdout, one JSON line each way): [gold, pred] -> [ok, detail].

  Runs math-verify in the child's main thread, so math-verify's `signal.alarm` timeouts work.
  """
  from math_verify import parse, verify  # heavy import, only in the child
  out = sys.stdout
  sys.stdout = sys.stderr  # stray prints from libraries must not corrupt the protocol
  parse("\\boxed{1}", parsing_timeout=SYMBOLIC_TIMEOUT_S)  # warm sympy's lazy imports
  out.write(json.dumps("ready") + "\n")
  out.flush()
  for line in sys.stdin:
    gold, pred = json.loads(line)
    try:
      gold_parsed = parse(f"\\boxed{{{gold}}}", parsing_timeout=SYMBOLIC_TIMEOUT_S)
      pred_parsed = parse(f"\\boxed{{{pred}}}", parsing_timeout=SYMBOLIC_TIMEOUT_S)
      ok = bool(gold_parsed and pred_parsed
                and verify(gold_parsed, pred_parsed, timeout_seconds=SYMBOLIC_TIMEOUT_S))
      reply = [ok, "symbolic match" if ok else "not equivalent"]
    except Exception as e:  # pylint: disable=broad-except
      reply = [False, f"math-verify error: {type(e).__name__}"]
    out.write(json.dumps(reply) + "\n")
    out.flush()


class _SymbolicWorker:
  """One long-lived child process running math-verify, shared by all threads of this process.

  A plain subprocess (not multiprocessing, which would re-import the caller's `__main__`).
  A lock serialises requests; a request that overruns the wall timeout kills the child (its
  whole state is disposable) and the next request starts a fresh one.
  """

  def __init__(self) -> None:
    self._lock = threading.Lock()
    self._proc: subprocess.Popen | None = None

  def _start(self) -> None:
    env = dict(os.environ)
    env["PYTHONPATH"] = os.pathsep.join(p for p in (str(REPO_DIR), env.get("PYTHONPATH")) if p)
    self._proc = subprocess.Popen(
        [sys.executable, "-c",
         "from hieramas_jax.benchmarks.graders import symbolic_worker_main; symbolic_worker_main()"],
        stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, env=env,
        start_new_session=True)  # a Ctrl-C in the terminal goes to the caller, not to the worker
    # Wait for "ready" so that the import time never counts against a request's timeout.
    ready, _, _ = select.select([self._proc.stdout], [], [], _STARTUP_TIMEOUT_S)
    if not ready or json.loads(self._proc.stdout.readline() or b"null") != "ready":
      self._kill()
      raise GradingError("the math-verify worker did not start")

  def _kill(self) -> None:
    if self._proc is not None:
      self._proc.kill()
      self._proc.wait(timeout=5)
      for f in (self._proc.stdin, self._proc.stdout):
        if f is not None:
          f.close()
    self._proc = None

  def equivalent(self, gold: str, pred: str) -> tuple[bool, str]:
    with self._lock:
      for _ in range(2):
        if self._proc is None or self._proc.poll() is not None:
          self._kill()
          self._start()
        proc = self._proc
        try:
          proc.stdin.write((json.dumps([gold, pred]) + "\n").encode())
          proc.stdin.flush()
          ready, _, _ = select.select([proc.stdout], [], [], _WALL_TIMEOUT_S)
          if not ready:
            self._kill()
            return False, f"math-verify timed out after {_WALL_TIMEOUT_S}s"
          line = proc.stdout.readline()
          if line:
            ok, detail = json.loads(line)
            return bool(ok), str(detail)
        except (BrokenPipeError, ConnectionResetError, OSError, ValueError):
          pass
        self._kill()  # the child died (e.g. out of memory): retry once on a fresh one
      return False, "math-verify worker died twice"


_SYMBOLIC = _SymbolicWorker()


# A numeral in another base, as MATH writes it: 52_8, 4210_{5}. math-verify reads the
# subscript as noise (52_8 == 52_9 to it), so these are compared digit by digit here.
_BASE_NUMERAL = re.compile(r"^([0-9A-Za-z]+)_\{?(\d+)\}?$")


def _base_numeral(normalized: str) -> tuple[str, str | None] | None:
  m = _BASE_NUMERAL.match(normalized)
  if m:
    return m.group(1).upper(), m.group(2)
  return None


# `\text {x}` (a space before the brace) is legal LaTeX that math-verify does not parse.
_SPACED_TEXT = re.compile(r"\\(text|textbf|textit|textrm|mathrm|mathbf|mbox|operatorname)\s+\{")
# A trailing percent sign or word: "7.2\%", "7.2%", "7.2 percent", "7.2\text{ percent}".
_PERCENT = re.compile(r"\s*(?:\\%|%|\\(?:text|mbox|mathrm)\{\s*(?:percent|\\%)\s*\}|\bpercent\b)\s*$")


def _comparable(answer: str) -> tuple[str, bool]:
  r"""The answer with `\text {` respaced and a trailing percent removed, and whether one was.

  MATH golds and model answers write percentages either way ("7.2\%" and "7.2"); math-verify
  treats some as equal (10\% and 10) and not others (7.2\% and 7.2), so both sides drop it.
  """
  s = _SPACED_TEXT.sub(r"\\\1{", answer.strip())
  stripped = _PERCENT.sub("", s)
  return (stripped, True) if stripped and stripped != s else (s, False)


@functools.lru_cache(maxsize=65536)
def math_equivalent(gold: str, pred: str) -> tuple[bool, str]:
  r"""Whether a predicted MATH answer equals the gold one, and why.

  A normalised-string match answers most cases in microseconds; numerals in another base
  (`52_8`) compare digit by digit (the base may be omitted in the prediction); the rest go to
  math-verify (symbolic and numeric equivalence, sets, intervals, tuples) in the worker process.
  Percent signs and `\text {...}` spacing are equivalent both ways (`_comparable`); where a
  percent sign was dropped, math-verify also sees the answers as written (7.2\% = 0.072).
  """
  raw_gold, raw_pred = gold, pred
  (gold, gold_pct), (pred, pred_pct) = _comparable(gold), _comparable(pred)
  ok, detail = _equivalent(gold, pred)
  if not ok and (gold_pct or pred_pct) and len(raw_pred) <= 2000:
    as_written = _SYMBOLIC.equivalent(_SPACED_TEXT.sub(r"\\\1{", raw_gold),
                                      _SPACED_TEXT.sub(r"\\\1{", raw_pred))
    if as_written[0]:
      return as_written
  return ok, detail


def _equivalent(gold: str, pred: str) -> tuple[bool, str]:
  gold_norm, pred_norm = normalize_math(gold), normalize_math(pred)
  if gold_norm == pred_norm:
    return True, "string match"
  gold_base = _base_numeral(gold_norm)
  if gold_base is not None:
    pred_base = _base_numeral(pred_norm) or (pred_norm.upper(), None)
    ok = pred_base[0] == gold_base[0] and pred_base[1] in (None, gold_base[1])
    return ok, "base numeral match" if ok else "base numeral differs"
  if len(pred) > 2000:
    return False, "answer too long to compare"
  return _SYMBOLIC.equivalent(gold, pred)


# ---------------------------------------------------------------------------------------------
# Grading entry points.


def grade_mmlu(item: Item, text: str | None) -> Grade:
  letter = extract_mmlu_letter(text, options=item.meta.get("choices"))
  if letter is None:
    return Grade(False, None, "no answer letter found")
  ok = letter == item.answer
  return Grade(ok, letter, "match" if ok else f"expected {item.answer}")


def grade_math(item: Item, text: str | None) -> Grade:
  answer = extract_math_answer(text)
  if answer is None:
    return Grade(False, None, "no final answer found")
  ok, detail = math_equivalent(item.answer, answer)
  return Grade(ok, answer, detail)


async def grade_humaneval(item: Item, text: str | None) -> Grade:
  """Extract the code from a model's answer and judge it in the sandbox (`humaneval.run_candidate`)."""
  code = extract_code(text, item.meta["entry_point"])
  if code is None:
    return Grade(False, None, "no code found")
  verdict = await humaneval.run_candidate(item, code)
  return Grade(verdict.correct, code, verdict.detail)


def grade(item: Item, text: str | None) -> Grade:
  """Grade one answer synchronously. For HumanEval+ this runs the sandbox (a subprocess);
  inside a running event loop use `await grade_async(...)` instead."""
  check_benchmark(item.benchmark)
  if item.benchmark == "mmlu_redux":
    return grade_mmlu(item, text)
  if item.benchmark == "math":
    return grade_math(item, text)
  try:
    asyncio.get_running_loop()
  except RuntimeError:
    return asyncio.run(grade_async(item, text))
  raise GradingError("grade() on HumanEval+ was called inside a running event loop; "
                     "use `await grade_async(item, text)`")


async def grade_async(item: Item, text: str | None) -> Grade:
  """Grade one answer without blocking the event loop: HumanEval+ runs in a sandboxed
  subprocess; MATH's symbolic step runs in a thread (it waits on the worker process)."""
  check_benchmark(item.benchmark)
  if item.benchmark == "mmlu_redux":
    return grade_mmlu(item, text)
  if item.benchmark == "math":
    return await asyncio.to_thread(grade_math, item, text)
  return await grade_humaneval(item, text)
