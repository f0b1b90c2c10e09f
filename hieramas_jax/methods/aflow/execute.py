"""Running model-written code for AFlow's Programmer and Test operators, in the suite's sandbox.

Both go through `benchmarks.sandbox.run_job` (a fresh child process with rlimits, the reliability guard,
a temporary directory and a process-group kill): the Programmer's `solve()` writes its result to a file
the parent reads back; the Test operator's public examples run as a `check` function. Nothing
model-written ever runs in this process.
"""

from __future__ import annotations

import ast
import re

from hieramas_jax.benchmarks import sandbox
from hieramas_jax.benchmarks.data import Item

LIMITS = sandbox.SandboxLimits(wall_s=15.0, cpu_s=10, load_s=5.0, check_s=5.0)
RESULT_FILE = "result.txt"
_CAPTURE = (f"def check(candidate):\n"
            f"  value = candidate()\n"
            f"  with open({RESULT_FILE!r}, 'w') as f:\n"
            f"    f.write(repr(value)[:2000])\n")


def _job(program: str, entry_point: str, test: str) -> dict:
  return {"mode": "candidate", "program": program, "entry_point": entry_point, "test": test, "base_input": [],
          "plus_input": [], "atol": 0.0, "expected": {"base": [], "plus": [], "base_digest": [], "plus_digest": []},
          "time_limits": {"base": [], "plus": []}}


async def run_solve(code: str) -> tuple[bool, str]:
  """Runs a program that defines `solve()` and returns (ok, repr of its result or the error)."""
  outcome, files = await sandbox.run_job(_job(code, "solve", _CAPTURE), LIMITS, keep_files=(RESULT_FILE,))
  if outcome.timed_out:
    return False, "time limit exceeded"
  record = outcome.record or {}
  if record.get("ok") and RESULT_FILE in files:
    return True, files[RESULT_FILE].decode("utf-8", "replace")
  return False, str(record.get("error") or f"no result (exit {outcome.returncode})")


def _is_expression(text: str) -> bool:
  try:
    ast.parse(text, mode="eval")
    return True
  except SyntaxError:
    return False


def public_examples(item: Item) -> list[tuple[str, str]]:
  """(call, expected) pairs from the task's docstring examples (`>>> f(x)` / `f(x) => y` forms).

  These are the examples the prompt shows every solver, not the hidden base or plus tests.
  """
  entry = re.escape(item.meta["entry_point"])
  lines = item.question.splitlines()
  pairs = []
  for i, line in enumerate(lines):
    doc = re.match(rf"^\s*>>>\s*({entry}\(.*\))\s*$", line)
    if doc and i + 1 < len(lines):
      call, expected = doc.group(1), lines[i + 1].strip()
    else:
      arrow = re.match(rf"^\s*({entry}\(.*\))\s*(?:==>|=>|➞|->|==|should return)\s*(.+?)\s*$", line)
      if not arrow:
        continue
      call, expected = arrow.group(1), arrow.group(2).rstrip(".")
    if expected and _is_expression(call) and _is_expression(expected):
      pairs.append((call, expected))
  return pairs


def examples_check(examples: list[tuple[str, str]]) -> str:
  body = "".join(f"  assert ({call}) == ({expected}), {call + ' should be ' + expected!r}\n"
                 for call, expected in examples)
  return "def check(candidate):\n" + (body or "  pass\n")


async def run_examples(item: Item, program: str) -> tuple[bool, str]:
  """Runs `program` (the prompt + the candidate) against the public examples: (passed, error message)."""
  examples = public_examples(item)
  outcome, _ = await sandbox.run_job(_job(program, item.meta["entry_point"], examples_check(examples)), LIMITS)
  if outcome.timed_out:
    return False, "time limit exceeded"
  record = outcome.record or {}
  if record.get("ok"):
    return True, ""
  return False, str(record.get("error") or f"no result (exit {outcome.returncode})")
