"""Running model-written code for AFlow's Programmer and Test operators, in the suite's sandbox.

Both go through `benchmarks.sandbox.run_child`, the graders' own isolation (bubblewrap where it runs, a
fresh process group and rlimits otherwise): the child runs the program and reports each call's output
as plain JSON; this side decodes and compares. The Programmer's `solve()` is called once with no
arguments and its value read back; the Test operator calls the function on the arguments of the
prompt's public examples and compares with their expected values here. Nothing model-written ever runs
in this process.
"""

from __future__ import annotations

import ast
import hashlib
import json
import pathlib
import re
from typing import Any

from hieramas_jax.benchmarks import humaneval, sandbox
from hieramas_jax.benchmarks.data import Item, data_sha256
from hieramas_jax.fileio import atomic_write_bytes
from hieramas_jax.paths import cache_dir

LIMITS = sandbox.SandboxLimits(wall_s=15.0, cpu_s=10, load_s=5.0)
CALL_S = 5.0


async def _run(program: str, entry_point: str, inputs: list[list[Any]]) -> tuple[list[dict], str | None]:
  """Runs `entry_point(*args)` for each input; returns (the per-input report records, a failure or None)."""
  records: list[dict] = []
  failure: list[str] = []

  def on_line(line: bytes):
    try:
      rec = json.loads(line)
    except ValueError:
      failure.append("malformed report from the sandbox")
      return sandbox.Stop("malformed")
    if not isinstance(rec, dict):
      failure.append("malformed report from the sandbox")
      return sandbox.Stop("malformed")
    if "done" in rec:
      return sandbox.Stop("done", let_exit=True)
    if "i" not in rec:
      failure.append(str(rec.get("error", "no result"))[:300])
      return sandbox.Stop("error")
    records.append(rec)
    return None

  job = {"mode": "candidate", "program": program, "entry_point": entry_point, "inputs": inputs,
         "time_limits": [CALL_S] * len(inputs)}
  outcome = await sandbox.run_child(job, LIMITS, on_line)
  if failure:
    return records, failure[0]
  if outcome.timed_out:
    return records, "time limit exceeded"
  if len(records) < len(inputs):
    return records, f"no result (exit code {outcome.returncode})"
  return records, None


def _value(rec: dict) -> Any:
  if "error" in rec:
    raise ValueError(str(rec["error"])[:300])
  if "out" not in rec:
    raise ValueError("the output is too large to read back")
  return sandbox.child.decode(rec["out"])


async def run_solve(code: str) -> tuple[bool, str]:
  """Runs a program that defines `solve()`; returns (ok, repr of its result or the error)."""
  records, failure = await _run(code, "solve", [[]])
  if failure:
    return False, failure
  try:
    return True, repr(_value(records[0]))[:2000]
  except (ValueError, TypeError) as e:
    return False, str(e)


def public_examples(item: Item) -> list[tuple[str, str]]:
  """(call, expected) pairs from the task's docstring examples (`>>> f(x)` / `f(x) => y` forms) whose
  arguments and expected value are literals.

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
    if _literal_args(call) is not None and _literal(expected) is not None:
      pairs.append((call, expected))
  return pairs


def _literal(text: str) -> tuple[Any] | None:
  try:
    return (ast.literal_eval(text),)
  except (ValueError, SyntaxError, TypeError, MemoryError, RecursionError):
    return None


def _literal_args(call: str) -> list[Any] | None:
  try:
    node = ast.parse(call, mode="eval").body
  except SyntaxError:
    return None
  if not isinstance(node, ast.Call) or node.keywords:
    return None
  try:
    return [ast.literal_eval(a) for a in node.args]
  except (ValueError, SyntaxError, TypeError, MemoryError, RecursionError):
    return None


def _examples_cache_path(item: Item, program: str, mode: str) -> pathlib.Path:
  key = hashlib.sha256(f"examples\0{item.id}\0{program}\0{data_sha256(item.benchmark)}\0"
                       f"{humaneval.HARNESS_VERSION}\0{mode}".encode()).hexdigest()
  return cache_dir() / "humaneval_examples" / key[:2] / f"{key}.json"


async def run_examples(item: Item, program: str, *, use_cache: bool = True) -> tuple[bool, str]:
  """Runs `program` (the prompt + the candidate) on the public examples: (passed, what failed).

  Results are cached on disk like the graders' (`humaneval.seal`: keyed by task, program, data, harness
  and isolation mode, written by the parent only), so a rerun replays them instead of running the code
  again (GDesigner checks every code output an agent reads; a warm table run makes no sandbox call).
  """
  mode = sandbox.isolation().mode
  path = _examples_cache_path(item, program, mode)
  key = {"task_id": item.id, "program_sha256": hashlib.sha256(program.encode()).hexdigest(),
         "data_sha256": data_sha256(item.benchmark), "harness": humaneval.HARNESS_VERSION, "mode": mode}
  if use_cache:
    cached = humaneval.unseal(path, **key)
    if cached is not None and type(cached.get("passed")) is bool and isinstance(cached.get("feedback"), str):
      return cached["passed"], cached["feedback"]
  passed, feedback = await _run_examples(item, program)
  if use_cache:
    entry = humaneval.seal(dict(key, passed=passed, feedback=feedback))
    atomic_write_bytes(path, entry)
  return passed, feedback


async def _run_examples(item: Item, program: str) -> tuple[bool, str]:
  examples = public_examples(item)
  records, failure = await _run(program, item.meta["entry_point"], [_literal_args(c) for c, _ in examples])
  for (call, expected), rec in zip(examples, records):
    try:
      got = _value(rec)
    except (ValueError, TypeError) as e:
      return False, f"{call} raised: {e}"
    want = ast.literal_eval(expected)
    if got != want:
      return False, f"{call} should be {expected}, got {got!r}"[:500]
  if failure:
    return False, failure
  return True, ""
