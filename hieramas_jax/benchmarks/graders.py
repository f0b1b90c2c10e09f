"""Graders: from a model's free text to correct / incorrect, for every benchmark.

Three rules hold for every benchmark:
  * extraction is pure and cheap (the simulator imports the `extract_*` helpers too);
  * no LLM judge, ever: MMLU compares letters, MATH compares answers symbolically with
    math-verify, HumanEval+ runs the code against the base and plus tests in a sandbox;
  * grading never hangs and works from any thread: math-verify's own timeouts rely on
    `signal.alarm`, which only works in a main thread, so the symbolic step runs in a small
    worker process (`_SymbolicWorker`) that is killed and restarted if it overruns.
"""

from __future__ import annotations

import ast
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
from typing import Sequence

from hieramas_jax.benchmarks.data import LETTERS, Item, check_benchmark
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
# MMLU: letter extraction.

# Markdown emphasis and LaTeX wrappers that models put around a letter.
_BOLD_LETTER = re.compile(r"\*\*\s*\(?([A-D])\)?(?:[.:)]\s*[^*\n]*)?\s*\*\*")
# An explicit statement: "answer is (B)", "Answer: B", "correct option is C", "final choice: d".
_ANSWER_STATEMENT = re.compile(
    r"(?:\banswer\b(?:\s+to\s+(?:this|the)\s+question)?"
    r"(?:\s+(?:is|would\s+be|should\s+be|must\s+be))?"
    r"|\bcorrect\s+(?:option|choice|letter)(?:\s+is)?"
    r"|\b(?:final|best)\s+(?:option|choice)(?:\s+is)?"
    r"|\bi\s+(?:choose|pick|select))"
    r"\s*(?:[:=\-]\s*)?(?:(?:option|choice|letter)\s*)?[:\-]?\s*"
    r"[(\[{]?\s*(?:\\text\{\s*)?([A-Da-d])(?![A-Za-z0-9_])",
    re.IGNORECASE)
_BOXED_LETTER = re.compile(
    r"\\(?:boxed|fbox)\s*\{\s*(?:\\text(?:bf)?\{\s*)?\(?([A-Da-d])\)?(?:[.:)][^{}]*)?\s*\}?\s*\}")
# A line that is only a letter: "B", "(B)", "B.", "[B]", "Option B".
_BARE_LINE = re.compile(r"^\s*(?:option\s+|choice\s+)?[(\[]?([A-D])[)\]]?[.:]?\s*$", re.IGNORECASE)
# A line that starts with a letter and its option text: "B. Niacin", "(B) Niacin", "B) Niacin".
_LEAD_LINE = re.compile(r"^\s*(?:\(([A-D])\)|([A-D])[.):])\s+\S")


def _lowercase_ok(text: str, end: int) -> bool:
  """Lower-case letters count only when nothing word-like follows ("answer is a bit" is not 'A')."""
  return re.match(r"\s*(?:[)\]}.,:;*!]|$)", text[end:]) is not None


def _strip_markup(text: str) -> str:
  """Blank out markdown emphasis, keeping every character's position (so matches found in
  the stripped text and in the raw text can be ordered together)."""
  return text.replace("**", "  ").replace("__", "  ").replace("`", " ")


def extract_mmlu_letter(text: str | None, options: Sequence[str] | None = None) -> str | None:
  """The option letter (A-D) a model's answer commits to, or None.

  Preference, highest first: the last explicit answer statement ("The answer is (B)",
  "Answer: b", "\\boxed{B}", "**B**"), then the last line that is only a letter ("(C)"),
  then the last line that starts with one option ("B. Niacin", ignored when the model merely
  lists all options), then, if `options` are given, an option text quoted in the last line.
  Models restate the question and argue about several options before committing, so the
  last commitment wins over the first mention.

  Args:
    text: the model's full output.
    options: the option texts in A-D order, to map "The answer is Niacin" to a letter.

  Returns:
    An upper-case letter in "ABCD", or None when the text commits to none.
  """
  if not text:
    return None
  explicit: list[tuple[int, str]] = []
  for m in _BOXED_LETTER.finditer(text):
    explicit.append((m.start(), m.group(1).upper()))
  for m in _BOLD_LETTER.finditer(text):
    explicit.append((m.start(), m.group(1)))
  plain = _strip_markup(text)
  for m in _ANSWER_STATEMENT.finditer(plain):
    letter = m.group(1)
    if letter.islower() and not _lowercase_ok(plain, m.end(1)):
      continue
    explicit.append((m.start(), letter.upper()))
  if explicit:
    return max(explicit)[1]

  lines = [ln for ln in plain.splitlines() if ln.strip()]
  for line in reversed(lines):
    m = _BARE_LINE.match(line)
    if m:
      return m.group(1).upper()
  leads = [(m.group(1) or m.group(2)) for ln in lines if (m := _LEAD_LINE.match(ln))]
  if leads and len(set(leads)) < 3:
    return leads[-1]
  if options and lines and not _LEAD_LINE.match(lines[-1]):
    last = lines[-1].lower()
    hits = [LETTERS[i] for i, opt in enumerate(options[:4])
            if str(opt).strip() and str(opt).strip().lower() in last]
    if len(hits) == 1:
      return hits[0]
  return None


# ---------------------------------------------------------------------------------------------
# MATH: answer extraction.

_BOX_COMMAND = re.compile(r"\\(?:boxed|fbox)\b")
_FINAL_ANSWER = re.compile(
    r"(?:final\s+answer\s*(?:is|:)|\banswer\s*(?:is|:))\s*:?\s*(.+)", re.IGNORECASE)


def _balanced_group(text: str, start: int) -> tuple[str, int] | None:
  """Contents of the `{...}` group opening at text[start], honouring nesting and escapes."""
  if start >= len(text) or text[start] != "{":
    return None
  depth = 0
  i = start
  while i < len(text):
    ch = text[i]
    if ch == "\\":
      i += 2
      continue
    if ch == "{":
      depth += 1
    elif ch == "}":
      depth -= 1
      if depth == 0:
        return text[start + 1:i], i + 1
    i += 1
  return None


def last_boxed(text: str) -> str | None:
  """Contents of the last `\\boxed{...}` / `\\fbox{...}` (or `\\boxed 5`) with a closed group."""
  for m in reversed(list(_BOX_COMMAND.finditer(text))):
    rest = m.end()
    while rest < len(text) and text[rest] == " ":
      rest += 1
    if rest < len(text) and text[rest] == "{":
      group = _balanced_group(text, rest)
      if group is not None:
        return group[0].strip()
      continue
    # `\boxed 5`: the argument is the next token.
    token = re.match(r"([^\s$]+)", text[rest:])
    if token and rest > m.end():
      return token.group(1).rstrip(".")
  return None


def _clean_final_answer(raw: str) -> str | None:
  s = raw.strip()
  s = re.split(r"\.\s+I hope|\s+I hope", s)[0].strip()
  if s.startswith("$"):
    inner = re.match(r"\$+((?:\\\$|[^$])+)\$+", s)  # an escaped \$ is money, not math mode
    if inner:
      s = inner.group(1)
  s = s.strip()
  s = re.sub(r"^\$+", "", s)
  s = re.sub(r"(?<!\\)\$+$", "", s).strip()
  s = re.sub(r"[.\s]+$", "", s)
  return s or None


def extract_math_answer(text: str | None) -> str | None:
  """The final answer of a MATH solution, as a LaTeX string, or None.

  The last closed `\\boxed{...}` (or `\\fbox{...}`) wins, nested braces included: that is the
  format the prompts ask for and that MATH solutions use. Without one, the last
  "final answer is ..." / "answer: ..." line is used (Minerva style "The final answer is $5$.
  I hope it is correct." included).
  """
  if not text:
    return None
  boxed = last_boxed(text)
  if boxed is not None:
    return boxed or None
  matches = list(_FINAL_ANSWER.finditer(text))
  for m in reversed(matches):
    raw = m.group(1)
    while (inner := _FINAL_ANSWER.search(raw)) is not None:  # "Final Answer: The final answer is $5$"
      raw = inner.group(1)
    cleaned = _clean_final_answer(raw)
    if cleaned:
      return cleaned
  return None


# ---------------------------------------------------------------------------------------------
# HumanEval+: code extraction.

_FENCE = re.compile(r"```[ \t]*([A-Za-z0-9_+\-]*)[^\n]*\n(.*?)(?:```|\Z)", re.DOTALL)
_PYTHON_TAGS = {"", "python", "py", "python3", "py3"}


def _defines(code: str, entry_point: str) -> bool:
  return re.search(rf"^\s*(?:async\s+)?def\s+{re.escape(entry_point)}\s*\(", code, re.MULTILINE) is not None


def _parses(code: str) -> bool:
  try:
    ast.parse(code)
  except (SyntaxError, ValueError):
    return False
  return True


def extract_code(text: str | None, entry_point: str) -> str | None:
  """The Python program in a model's answer, or None.

  Fenced blocks first (```python, ```py or a bare ```): the last one that defines
  `entry_point` if any does (models often show a usage example after the solution), else the
  last Python block. An unterminated fence (output cut by max_tokens) runs to the end. With no
  fence, a raw `def entry_point(...)` with the imports and helpers around it is taken, trimmed
  of trailing prose until it parses.

  Returns:
    The code (not checked for correctness; a block without `def entry_point` is the body that
    continues the prompt, which the sandbox handles), or None when there is no code.
  """
  if not text:
    return None
  blocks = [m.group(2) for m in _FENCE.finditer(text) if m.group(1).lower() in _PYTHON_TAGS]
  blocks = [b for b in blocks if b.strip()]
  if blocks:
    defining = [b for b in blocks if _defines(b, entry_point)]
    return (defining or blocks)[-1].rstrip() + "\n"
  lines = text.splitlines()
  def_line = next((i for i, ln in enumerate(lines)
                   if re.match(rf"\s*(?:async\s+)?def\s+{re.escape(entry_point)}\s*\(", ln)), None)
  if def_line is None:
    return None
  start = def_line
  code_start = re.compile(r"^(?:from\s+\S+\s+import|import\s|def\s|async\s+def\s|class\s|@|#)")
  while start > 0 and (code_start.match(lines[start - 1]) or not lines[start - 1].strip()):
    start -= 1
  while start < def_line and not lines[start].strip():
    start += 1
  end = len(lines)
  # Trim trailing prose a line at a time (bounded: a model's answer is not a long program).
  while end > max(def_line + 1, len(lines) - 400):
    candidate = "\n".join(lines[start:end])
    if _parses(candidate):
      return candidate.rstrip() + "\n"
    end -= 1
  candidate = "\n".join(lines[start:])
  return candidate.rstrip() + "\n"


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


@functools.lru_cache(maxsize=65536)
def math_equivalent(gold: str, pred: str) -> tuple[bool, str]:
  """Whether a predicted MATH answer equals the gold one, and why.

  A normalised-string match answers most cases in microseconds; numerals in another base
  (`52_8`) compare digit by digit (the base may be omitted in the prediction); the rest go to
  math-verify (symbolic and numeric equivalence, sets, intervals, tuples) in the worker process.
  """
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
  from hieramas_jax.benchmarks import sandbox  # pylint: disable=import-outside-toplevel
  return await sandbox.grade_humaneval_async(item, text)
