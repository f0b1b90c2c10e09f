"""Small asyncio helpers shared by the runtime, the runner, rollouts and the oracle search."""

from __future__ import annotations

import asyncio
from typing import Any, Iterable


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
