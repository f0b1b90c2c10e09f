"""Small asyncio helpers shared by the runtime, the runner, rollouts, the oracle search and entry points."""

from __future__ import annotations

import asyncio
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


def run(main: Coroutine[Any, Any, T]) -> T:
  """`asyncio.run(main)` on uvloop when it is installed (it is, through `make install`), else asyncio's loop.

  Why: every LLM call costs the client tens of microseconds of event-loop and transport work, and the
  runtime sends waves of over a thousand calls at once on two cores; uvloop's loop and transports cut
  that per-call CPU (`experiments/bench_executor.py` measures both loops). Other threads (the embedded
  sim) keep their own loops.
  """
  try:
    import uvloop  # pylint: disable=import-outside-toplevel
  except ImportError:
    return asyncio.run(main)
  return uvloop.run(main)
