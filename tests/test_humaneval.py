"""HumanEval+ judging (`benchmarks/humaneval.py`): canonical solutions pass base+plus, plus inputs catch
what the base tests miss, floats compare with the task's atol, EvalPlus's `__main__` semantics, the
graders' entry points, grade caches that replay nothing forged, and per-input limits in CPU time.

How a program is contained is `test_sandbox.py`'s; both run candidates through `humaneval_runs.py`."""

from __future__ import annotations

import asyncio
import hashlib
import concurrent.futures
import json
import logging
import os
import secrets
import subprocess
import sys
import time

import pytest

from hieramas_jax.benchmarks import graders, humaneval
from hieramas_jax.benchmarks.data import items_by_id, load_items
from humaneval_runs import FAST, FUNC, GOOD_BODY, run_code


def _canonical_failures(items):
  async def grade_all():
    return await asyncio.gather(*(humaneval.run_candidate(it, it.answer, use_cache=False)
                                  for it in items))

  return [(it.id, g.detail) for it, g in zip(items, asyncio.run(grade_all())) if not g.correct]


def test_a_sample_of_canonical_solutions_pass_base_and_plus():
  """The fast tier's share of the check below: every 20th task (9 of 164)."""
  failed = _canonical_failures(load_items("humaneval_plus")[::20])
  assert not failed, failed


@pytest.mark.slow  # 117 s on a loaded 2-core machine; the sample above stays in the fast tier
def test_all_canonical_solutions_pass_base_and_plus():
  items = load_items("humaneval_plus")

  failed = _canonical_failures(items)
  assert not failed, failed


def test_plus_inputs_catch_what_base_tests_miss(task0):
  # Passes the dataset's check() but not every plus input (EvalPlus's point).
  weak = FUNC + ("    if len(numbers) > 6:  # the base tests have at most 6 numbers\n"
                  "        return False\n" + GOOD_BODY)
  grade = run_code(task0, weak)
  assert not grade.correct
  assert "plus test" in grade.detail, grade.detail


def test_good_code_in_several_shapes_passes(task0):
  full = "from typing import List\n\n" + FUNC + GOOD_BODY
  assert run_code(task0, full).correct
  assert run_code(task0, GOOD_BODY).correct  # a body continuing the prompt
  unindented = "return any(abs(a - b) < threshold for i, a in enumerate(numbers) for b in numbers[i + 1:])\n"
  assert run_code(task0, unindented).correct
  assert not run_code(task0, FUNC + "    return False\n").correct
  assert run_code(task0, "def (:\n").detail == "syntax error"


def test_float_outputs_compared_with_atol():
  item = items_by_id("humaneval_plus")["HumanEval/2"]  # truncate_number, atol 1e-6
  def shifted(delta):  # exact on check()'s 3.5, off by delta on every other input
    return f"def truncate_number(number):\n    return number % 1.0 + (0.0 if number == 3.5 else {delta})\n"
  assert run_code(item, shifted(1e-9)).correct
  off = run_code(item, shifted(1e-3).replace("number == 3.5", "number < 200"))
  assert not off.correct and "plus test" in off.detail, off.detail
  # find_zero (HumanEval/32): any x with |poly(xs, x)| <= atol passes, not only the
  # canonical output: a tighter Newton stops at other floats than the canonical one.
  find_zero = items_by_id("humaneval_plus")["HumanEval/32"]
  newton = ("def find_zero(xs):\n"
            "    dxs = [xs[i] * i for i in range(1, len(xs))]\n"
            "    x = 0.0\n"
            "    for _ in range(1000):\n"
            "        fx = poly(xs, x)\n"
            "        if abs(fx) < 1e-9:\n"
            "            break\n"
            "        x = x - fx / poly(dxs, x)\n"
            "    return x\n")
  assert run_code(find_zero, newton).correct
  assert not run_code(find_zero, newton.replace("return x", "return x + 1e-3")).correct


def test_grades_are_cached_by_code(task0, outcomes):
  code = FUNC + GOOD_BODY + "# cache probe\n"
  path = humaneval._grade_cache_path(task0, code)
  path.unlink(missing_ok=True)  # a cache directory kept from an earlier run (HIERAMAS_CACHE_DIR set)
  first = asyncio.run(humaneval.run_candidate(task0, code))
  assert path.exists() and first.correct
  ran = len(outcomes)
  again = asyncio.run(humaneval.run_candidate(task0, code))
  assert again == first
  assert len(outcomes) == ran  # replayed: no child ran
  assert humaneval._grade_cache_path(task0, code + "\n") != path


def test_grade_entry_points_for_humaneval(task0):
  text = "Here is my solution:\n```python\nfrom typing import List\n\n" + FUNC + GOOD_BODY + "```\n"
  assert graders.grade(task0, text).correct  # sync, outside an event loop
  assert not graders.grade(task0, "I cannot solve this.").correct
  assert graders.grade(task0, "I cannot solve this.").extracted is None

  async def inside_loop():
    with pytest.raises(graders.GradingError):
      graders.grade(task0, text)
    return await graders.grade_async(task0, text)

  assert asyncio.run(inside_loop()).correct
  with concurrent.futures.ThreadPoolExecutor(2) as pool:  # sync grade() from worker threads
    assert all(g.correct for g in pool.map(lambda t: graders.grade(task0, t), [text, text + " "]))


def test_grades_are_cached_per_isolation_mode(task0):
  code = FUNC + GOOD_BODY
  assert humaneval._grade_cache_path(task0, code, "bwrap") != humaneval._grade_cache_path(task0, code, "fallback")


def test_main_guard_demo_does_not_run(task0):
  # EvalPlus semantics: `if __name__ == "__main__":` blocks (often reading stdin) do not run.
  code = FUNC + GOOD_BODY + "\nif __name__ == '__main__':\n    print(has_close_elements(eval(input()), 0.5))\n"
  assert run_code(task0, code).correct


def test_forged_or_edited_cache_entries_are_not_replayed(task0, caplog):
  # A grade cache entry claiming a wrong program passed (forged, or edited by hand), and edited
  # expected outputs, are recomputed instead of replayed; the warning names the file.
  wrong = FUNC + "    return None\n# forged " + secrets.token_hex(4) + "\n"
  path = humaneval._grade_cache_path(task0, wrong)
  path.parent.mkdir(parents=True, exist_ok=True)
  path.write_text(json.dumps({"task_id": task0.id, "correct": True, "detail": "passed base and plus tests"}))
  with caplog.at_level(logging.WARNING, logger=humaneval.__name__):
    grade = asyncio.run(humaneval.run_candidate(task0, wrong, FAST))
  assert not grade.correct and str(path) in caplog.text
  entry = json.loads(path.read_text())
  assert entry["correct"] is False
  entry["correct"] = True  # flipped, checksum kept
  path.write_text(json.dumps(entry))
  assert not asyncio.run(humaneval.run_candidate(task0, wrong, FAST)).correct
  assert not asyncio.run(humaneval.run_candidate(task0, wrong, FAST)).correct  # the rewrite is honest
  # Expected outputs edited so that `return None` would match: recomputed, not trusted.
  exp_path = humaneval._expected_path(task0)
  asyncio.run(humaneval.expected_outputs(task0))
  exp = json.loads(exp_path.read_text())
  exp["outputs"] = [{"out": None} for _ in exp["outputs"]]
  exp_path.write_text(json.dumps(exp))
  humaneval._EXPECTED_MEMO.clear()
  caplog.clear()
  with caplog.at_level(logging.WARNING, logger=humaneval.__name__):
    again = asyncio.run(humaneval.run_candidate(task0, FUNC + "    return None\n", FAST, use_cache=False))
  assert not again.correct and str(exp_path) in caplog.text
  assert run_code(task0, GOOD_BODY).correct


def _burning(seconds: float) -> str:
  """HumanEval/0 solved, after burning `seconds` of CPU time on the first input only."""
  return ("import time\n_first = [True]\n" + FUNC +
          f"    if _first[0]:\n        _first[0] = False\n        t0 = time.process_time()\n"
          f"        while time.process_time() - t0 < {seconds}:\n            pass\n" + GOOD_BODY)


def test_time_limits_are_cpu_time_so_load_does_not_change_a_grade(task0):
  # A fresh clone graded two HumanEval+ candidates differently from the committed run: each sat near
  # its per-input limit, timed in wall time on a machine whose load varied. Limits are CPU time now:
  # with the cores saturated by spinners, a program using 0.6 s of CPU (limit 1 s) still passes, in
  # more wall time than CPU time, and one using 1.5 s still fails.
  # Each spinner in a session of its own: the scheduler's autogroups share a core per session.
  spin = [subprocess.Popen([sys.executable, "-c", "while True:\n    pass\n"], start_new_session=True)
          for _ in range(2 * (os.cpu_count() or 1))]
  try:
    time.sleep(0.5)
    fits = run_code(task0, _burning(0.6))
    over = run_code(task0, _burning(1.5))
  finally:
    for p in spin:
      p.kill()
      p.wait()
  assert fits.correct, fits.detail
  assert not over.correct and "time limit exceeded" in over.detail, over.detail


def test_a_grader_kill_is_confirmed_by_a_second_run_and_never_cached(task0, monkeypatch):
  """A budget that runs out from outside is partly this machine's clock: a busy grading process once
  killed trivial programs. The first kill is regraded; only a second one is the verdict; no kill is cached."""
  from hieramas_jax.benchmarks import sandbox  # pylint: disable=import-outside-toplevel
  real, calls = sandbox.run_child, []

  def flaky(kills: int):
    async def run_child(job, limits, on_line, iso=None, line_budget=None):
      calls.append(job["mode"])
      if job["mode"] == "candidate" and calls.count("candidate") <= kills:
        return sandbox.RunOutcome(returncode=None, timed_out=True, budget="line")  # killed before any line
      return await real(job, limits, on_line, iso, line_budget)
    return run_child

  good = FUNC + GOOD_BODY + "# confirmation probe\n"
  path = humaneval._grade_cache_path(task0, good)
  path.unlink(missing_ok=True)
  monkeypatch.setattr(sandbox, "run_child", flaky(1))
  grade = asyncio.run(humaneval.run_candidate(task0, good))
  assert grade.correct and calls.count("candidate") == 2, (grade, calls)
  assert path.exists()  # the confirmed pass is cached

  calls.clear()
  other = good + "# killed twice\n"
  other_path = humaneval._grade_cache_path(task0, other)
  other_path.unlink(missing_ok=True)
  monkeypatch.setattr(sandbox, "run_child", flaky(2))
  grade = asyncio.run(humaneval.run_candidate(task0, other))
  assert not grade.correct and grade.detail == humaneval.GRADER_KILL and calls.count("candidate") == 2
  assert not other_path.exists()  # a kill is never cached

  # A kill cached by an older version is not replayed: the program runs (and passes).
  calls.clear()
  monkeypatch.setattr(sandbox, "run_child", flaky(0))
  key = {"task_id": task0.id, "code_sha256": hashlib.sha256(other.encode()).hexdigest(),
         "data_sha256": humaneval.data_sha256(task0.benchmark), "harness": humaneval.HARNESS_VERSION,
         "mode": sandbox.isolation().mode}
  other_path.parent.mkdir(parents=True, exist_ok=True)
  other_path.write_bytes(humaneval.seal(dict(key, correct=False, detail=humaneval.GRADER_KILL)))
  grade = asyncio.run(humaneval.run_candidate(task0, other))
  assert grade.correct and calls.count("candidate") == 1, (grade, calls)
