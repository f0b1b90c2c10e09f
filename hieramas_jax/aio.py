"""Small asyncio helpers shared by the runtime, the runner, rollouts, the oracle search and entry points."""

from __future__ import annotations

import asyncio
import gc
import logging
import os
import signal
import sys
import threading
import time
from typing import Any, Coroutine, Iterable, NoReturn, TypeVar

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
  main = _interruptible(main)
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


# After Ctrl-C, how long the run may take to stop cleanly (cancelled cells close their writers, the sim
# process is stopped) before the process ends anyway: a thread deep in an encoder batch or an XLA compile
# cannot be cancelled, and waiting for it took 24 s.
INTERRUPT_GRACE_S = 3.0
EXIT_INTERRUPTED = 130  # 128 + SIGINT, as a shell reports a Ctrl-C'd program
INTERRUPTED_LINE = "interrupted: stopped; rerun the same command to resume (finished work is kept)"
_EXIT_LOCK = threading.Lock()


def exit_interrupted() -> NoReturn:
  """Prints the one interrupted line and ends the process now, status 130, without joining worker threads.

  Why `os._exit`: the interpreter's exit joins every executor thread, and one may be minutes into an
  uncancellable computation. Nothing is lost: every result is written atomically or appended as a sealed
  line as it lands, so a rerun resumes; the sim process dies with its parent (PR_SET_PDEATHSIG).
  """
  with _EXIT_LOCK:  # never released: a second caller (the grace timer, a second Ctrl-C) waits for the exit
    try:
      logging.shutdown()
      sys.stdout.flush()
    finally:
      print(INTERRUPTED_LINE, file=sys.stderr, flush=True)
      os._exit(EXIT_INTERRUPTED)  # pylint: disable=protected-access


async def _interruptible(main: Coroutine[Any, Any, T]) -> T:
  """`main`, with Ctrl-C cancelling it (its `finally` blocks run) and raising KeyboardInterrupt, no traceback.

  A second Ctrl-C, or INTERRUPT_GRACE_S without the run ending, ends the process at once
  (`exit_interrupted`). Off the main thread, or where SIGINT is ignored (a background job), `main` runs as is.
  """
  loop = asyncio.get_running_loop()
  task = asyncio.current_task()
  interrupted = False

  def grace() -> None:
    time.sleep(INTERRUPT_GRACE_S)
    exit_interrupted()

  def on_sigint() -> None:
    nonlocal interrupted
    if interrupted:
      exit_interrupted()
    interrupted = True
    task.cancel()
    threading.Thread(target=grace, name="interrupt-grace", daemon=True).start()

  if threading.current_thread() is not threading.main_thread() or signal.getsignal(signal.SIGINT) == signal.SIG_IGN:
    return await main
  loop.add_signal_handler(signal.SIGINT, on_sigint)
  try:
    return await main
  except asyncio.CancelledError:
    if interrupted:
      raise KeyboardInterrupt from None
    raise
  finally:
    loop.remove_signal_handler(signal.SIGINT)
