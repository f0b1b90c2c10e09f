"""Small asyncio helpers shared by the runtime, the runner, rollouts, the oracle search and entry points."""

from __future__ import annotations

import asyncio
import gc
from typing import Any, Coroutine, Iterable, TypeVar

T = TypeVar("T")


async def gather_or_cancel(tasks: Iterable[asyncio.Future]) -> list[Any]:
  """`asyncio.gather` over already-started tasks; if one fails (or we are cancelled), cancel the rest.

  Plain `gather` leaves sibling tasks running after the first error, so a failed query would keep
  paying for calls nobody reads, and a killed run would leave requests in flight. The siblings are
  awaited after cancelling so no task is left pending when the error propagates.
  """
  tasks = list(tasks)
  try:
    return list(await asyncio.gather(*tasks))
  except BaseException:
    for t in tasks:
      t.cancel()
    await asyncio.gather(*tasks, return_exceptions=True)
    raise


# Allocations between gen-0 collections while `run` runs (CPython's default is 700).
GC_GEN0_THRESHOLD = 50_000


def run(main: Coroutine[Any, Any, T]) -> T:
  """`asyncio.run(main)` on uvloop when it is installed (it is, through `make install`), with fewer
  cyclic-GC passes; the entry points' one way to run their event loop.

  Why: the runtime sends waves of over a thousand LLM calls at once on two cores, so the client's CPU per
  call stretches the critical path. Measured in `experiments/bench_executor.py` (gc callbacks): with
  CPython's default thresholds the cyclic collector took ~160 us of every call's ~400 us of client CPU,
  each pass walking the thousands of live request objects (gen 2 alone ~65 us); `gc.freeze()` (startup
  objects never rescanned) and a gen-0 threshold of 50,000 cut it to ~35-50 us. uvloop's loop and
  transports cut the rest of the per-call cost by 10-20%. Garbage cycles are still collected, just in
  fewer, larger passes; the thresholds are restored when `main` returns. Other threads (the embedded sim)
  keep their own loops.
  """
  previous = gc.get_threshold()
  gc.collect()
  gc.freeze()
  gc.set_threshold(GC_GEN0_THRESHOLD, *previous[1:])
  try:
    try:
      import uvloop  # pylint: disable=import-outside-toplevel
    except ImportError:
      return asyncio.run(main)
    return uvloop.run(main)
  finally:
    gc.set_threshold(*previous)
    gc.unfreeze()
