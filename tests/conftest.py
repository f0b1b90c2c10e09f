"""Test-wide settings (caches in a throwaway dir, W&B and Hugging Face offline) and the shared fixtures.

Tiers: `make test` runs every test not marked `slow` (minutes), `make test-all` runs them all (CI).
Mark a test slow when it alone takes more than a few seconds on a quiet 2-core machine and a cheaper test
in the fast tier already exercises the same behaviour.
"""

from __future__ import annotations

import os
import tempfile

import pytest

# The real-server tier (tests/real: a real model server, minutes) runs only under `make test-real`.
collect_ignore = [] if os.environ.get("HIERAMAS_REAL_TIER") == "1" else ["real"]

os.environ.setdefault("HIERAMAS_CACHE_DIR", tempfile.mkdtemp(prefix="hieramas-test-cache-"))
os.environ["WANDB_MODE"] = "offline"
os.environ["HF_HUB_OFFLINE"] = "1"
os.environ["TRANSFORMERS_OFFLINE"] = "1"


@pytest.fixture(scope="session")
def session_sim():
  """One simulated pool (seed 0) over real HTTP for the session's shared runs; every test module that
  needs a sim of its own (another seed, another profile) still starts one."""
  from hieramas_jax.sim.server import SimConfig, start_sim_in_thread  # pylint: disable=import-outside-toplevel
  handle = start_sim_in_thread(SimConfig(seed=0))
  yield handle
  handle.close()


@pytest.fixture(scope="session")
def tiny_reproduction(session_sim, tmp_path_factory):
  """Base and a tiny HieraMAS trained once per session on MMLU-Redux (tests/tiny_reproduction.py says
  what and why); tests may add cells under its run root but never change its finished ones."""
  import tiny_reproduction as tiny  # pylint: disable=import-outside-toplevel
  return tiny.reproduce(session_sim, tmp_path_factory.mktemp("tiny-reproduction") / "runs")


@pytest.fixture(scope="module")
def task0():
  """HumanEval/0 (has_close_elements), the task the grading, sandbox and cgroup tests run candidates on."""
  from hieramas_jax.benchmarks.data import items_by_id  # pylint: disable=import-outside-toplevel
  return items_by_id("humaneval_plus")["HumanEval/0"]


@pytest.fixture
def outcomes(monkeypatch):
  """Every `RunOutcome` of the children this test runs, in order: how a run ended, asserted instead
  of how long it took."""
  from hieramas_jax.benchmarks import sandbox  # pylint: disable=import-outside-toplevel
  seen = []
  real = sandbox.run_child

  async def spy(*args, **kwargs):
    outcome = await real(*args, **kwargs)
    seen.append(outcome)
    return outcome

  monkeypatch.setattr(sandbox, "run_child", spy)
  return seen
