"""A pids + memory cgroup per grading (`benchmarks/cgroups.py`): it engages, bounds, and goes away."""

from __future__ import annotations

import asyncio
import dataclasses
import os
import signal
import subprocess
import sys
import textwrap
import time

import pytest

from hieramas_jax.benchmarks import cgroups, humaneval, sandbox
from humaneval_runs import FUNC, GOOD_BODY, IN_CI


# Never a quiet skip: in CI (CI=true) a cgroup that cannot be had fails; elsewhere the cause is shown (-rs).
@pytest.fixture(autouse=True)
def _cgroup_required():
  sup = cgroups.support()
  if sup.version is None:
    if IN_CI:
      pytest.fail(f"no cgroup per grading in CI: {sup.detail}")
    pytest.skip(f"no cgroup per grading here: {sup.detail}")


def _ours() -> list[str]:
  return sorted(str(d) for p in cgroups.support().parents for d in p.glob(f"{cgroups.PREFIX}{os.getpid()}-*"))


def _run_in(group: cgroups.Group, source: str) -> subprocess.CompletedProcess:
  return subprocess.run(group.prefix([sys.executable, "-c", source]), capture_output=True, text=True,
                        timeout=120, check=False)


def test_the_group_bounds_threads_and_memory_across_them_and_is_removed():
  # No rlimit and no seccomp here: only the cgroup bounds the program.
  group = cgroups.create(pids_max=8, memory_bytes=256 << 20)
  try:
    threads = _run_in(group, textwrap.dedent("""\
        import threading, time
        n = 0
        try:
            for _ in range(32):
                threading.Thread(target=time.sleep, args=(2,), daemon=True).start()
                n += 1
        except RuntimeError:
            pass
        print(n)
        """))
    assert threads.returncode == 0, threads.stderr
    assert int(threads.stdout) < 8, threads.stdout
    hog = _run_in(group, textwrap.dedent("""\
        import threading
        kept = []
        def eat():
            for _ in range(20):
                kept.append(b"\x01" * (16 << 20))  # written: resident
        ts = [threading.Thread(target=eat) for _ in range(4)]
        for t in ts: t.start()
        for t in ts: t.join()
        print(sum(map(len, kept)) >> 20)
        """))
    assert hog.returncode != 0 or int(hog.stdout) < 256, (hog.returncode, hog.stdout, hog.stderr[-300:])
  finally:
    assert group.remove()
  assert _ours() == [] and all(not d.exists() for d in group.dirs)


def test_a_grading_runs_in_its_own_group_and_removes_it(task0):
  # A correct program still passes with the group's bounds (the HumanEval+ verdicts do not change),
  # its processes were in a group of this process while it ran, and none is left afterwards.
  seen = set()

  async def main():
    async def watch():
      while True:
        for d in _ours():
          try:
            seen.update(open(os.path.join(d, "cgroup.procs")).read().split())
          except OSError:
            pass
        await asyncio.sleep(0.005)
    w = asyncio.ensure_future(watch())
    try:
      return await humaneval.run_candidate(task0, FUNC + GOOD_BODY, use_cache=False)
    finally:
      w.cancel()

  grade = asyncio.run(main())
  assert grade.correct, grade.detail
  assert seen, "no process was seen in the grading's cgroup"
  assert _ours() == []
  assert "cgroup" in sandbox.sandbox_provenance()["limits"]


def test_many_threads_are_bounded_by_the_group(task0):
  limits = dataclasses.replace(sandbox.DEFAULT_LIMITS, pids_max=16)
  code = ("import threading, time\n_ts = [threading.Thread(target=time.sleep, args=(5,), daemon=True)"
          " for _ in range(40)]\nfor _t in _ts:\n    _t.start()\n" + FUNC + GOOD_BODY)
  grade = asyncio.run(humaneval.run_candidate(task0, code, limits, use_cache=False))
  assert not grade.correct and "thread" in grade.detail, grade.detail
  assert _ours() == []


def test_a_killed_grader_leaves_no_process_and_its_group_is_swept(tmp_path):
  # The grader is SIGKILLed mid-grading: its program dies with it, and the group it leaves (empty)
  # is removed by the next process's first grading.
  script = tmp_path / "grader.py"
  script.write_text(textwrap.dedent("""\
      import asyncio
      from hieramas_jax.benchmarks import humaneval
      from hieramas_jax.benchmarks.data import items_by_id
      code = "def has_close_elements(numbers, threshold):\\n    while True:\\n        pass\\n"
      asyncio.run(humaneval.run_candidate(items_by_id("humaneval_plus")["HumanEval/0"], code, use_cache=False))
      """))
  grader = subprocess.Popen([sys.executable, str(script)], env=dict(os.environ))
  parents = cgroups.support().parents
  try:
    deadline = time.monotonic() + 60
    mine = []
    while time.monotonic() < deadline and not mine:
      mine = [d for p in parents for d in p.glob(f"{cgroups.PREFIX}{grader.pid}-*")
              if (d / "cgroup.procs").read_text().split()]
      time.sleep(0.05)
    assert mine, "the grader's group never held a process"
  finally:
    grader.send_signal(signal.SIGKILL)
    grader.wait()
  deadline = time.monotonic() + 10
  while time.monotonic() < deadline and any((d / "cgroup.procs").read_text().split() for d in mine):
    time.sleep(0.05)
  assert not any((d / "cgroup.procs").read_text().split() for d in mine), "a program outlived its grader"
  assert cgroups.sweep(parents) >= 1
  assert not any(d.exists() for d in mine)
