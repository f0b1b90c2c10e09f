"""How the HumanEval+ tests run a candidate: HumanEval/0's pieces, tight limits, and the isolation asked for.

The judging tests (test_humaneval.py), the isolation tests (test_sandbox.py) and the cgroup tests
(test_cgroups.py) grade the same task the same way; its fixtures (`task0`, `outcomes`) are in conftest.py.
"""

from __future__ import annotations

import asyncio
import dataclasses
import os

import pytest

from hieramas_jax.benchmarks import humaneval, sandbox

# Tight limits keep the hostile cases fast; the defaults are the same mechanism, only longer.
FAST = dataclasses.replace(sandbox.DEFAULT_LIMITS, wall_s=4.0, cpu_s=8, load_s=2.0)

FUNC = "def has_close_elements(numbers, threshold):\n"
GOOD_BODY = ("    return any(abs(a - b) < threshold\n"
             "               for i, a in enumerate(numbers) for b in numbers[i + 1:])\n")

# An isolation or cgroup test never skips quietly: in CI (CI=true) it fails; elsewhere it skips with the
# cause, which `-rs` (setup.cfg) prints in every run.
IN_CI = os.environ.get("CI", "").strip().lower() not in ("", "0", "false", "no")


def _bwrap_or_why() -> str | None:
  try:
    iso = sandbox.isolation()
  except sandbox.SandboxError as e:
    return str(e)
  return None if iso.mode == "bwrap" else f"{sandbox.SANDBOX_ENV}={iso.mode}"


WHY_NO_BWRAP = _bwrap_or_why()
BWRAP = WHY_NO_BWRAP is None


def require_bwrap() -> None:
  if WHY_NO_BWRAP is not None:
    if IN_CI:
      pytest.fail(f"isolation cannot run in CI: {WHY_NO_BWRAP}")
    pytest.skip(f"isolation cannot run here: {WHY_NO_BWRAP}")


def isolation_for(mode):
  if mode == "bwrap":
    require_bwrap()
    return sandbox.isolation()
  return sandbox.fallback_isolation()


def run_code(item, code, limits=FAST, iso=None):
  """`code` graded on `item` without the grade cache, under bubblewrap (skips, or fails in CI, without it)."""
  return asyncio.run(humaneval.run_candidate(item, code, limits, use_cache=False, iso=iso or isolation_for("bwrap")))
