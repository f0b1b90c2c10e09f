"""The simulated pool's command line: `python -m hieramas_jax.sim.serve --port=8000 --seed=0`.

A program apart from the library (`sim/server.py`), so that its absl flags are defined only when
it runs: the server module is imported by programs with flags of their own (`--seed`), and absl
refuses a flag defined twice. One flag per `SimConfig` field (`SimConfig.to_args` writes them, for
`start_sim_subprocess`), plus `--host` and `--port`. A bad value is one `error:` line and exit 2,
like every program of the suite; the served URL is the first line of stdout (`READY_PREFIX`).
"""

from __future__ import annotations

import asyncio
import dataclasses
import os
import signal
import sys

from absl import flags

from hieramas_jax.llm.registry import MODELS
from hieramas_jax.sim import intent
from hieramas_jax.sim import params as P
from hieramas_jax.sim.server import (PARENT_PID_ENV, READY_PREFIX, SimConfig, SimConfigError, start_site,
                                     make_app)

flags.DEFINE_string("host", "127.0.0.1", "Address to serve on (loopback by default).")
flags.DEFINE_integer("port", 8000, "Port to serve on; 0 = any free port.")


def _define_config_flags() -> None:
  """One flag per SimConfig field, with its default: the dataclass is the one list of settings."""
  defaults = SimConfig()
  for f in dataclasses.fields(SimConfig):
    default = getattr(defaults, f.name)
    if f.name == "strict_quirks":
      flags.DEFINE_enum("strict_quirks", str(int(default)), ("0", "1"),
                        "1: reject what the real APIs reject (GPT-5 temperature, max_tokens).")
    elif f.name == "seed":
      flags.DEFINE_integer("seed", default, "The simulated world's seed.")
    elif f.name == "profile":
      flags.DEFINE_enum("profile", default, tuple(P.PROFILES), "The aggregation profile served.")
    else:
      flags.DEFINE_float(f.name, default, f"SimConfig.{f.name}.")


_define_config_flags()
FLAGS = flags.FLAGS


def config_from_flags() -> SimConfig:
  """The parsed flags as a SimConfig (raises SimConfigError on an invalid combination)."""
  values = {f.name: FLAGS[f.name].value for f in dataclasses.fields(SimConfig)}
  values["strict_quirks"] = values["strict_quirks"] == "1"
  return SimConfig(**values)


def _die_with_parent() -> None:
  """When started by `start_sim_subprocess`: SIGTERM on the parent's death (PR_SET_PDEATHSIG), and
  exit now if it already died before that was set (the server was then adopted by another process)."""
  parent = os.environ.get(PARENT_PID_ENV)
  if not parent:
    return
  import ctypes  # pylint: disable=import-outside-toplevel
  libc = ctypes.CDLL(None, use_errno=True)
  if libc.prctl(1, signal.SIGTERM, 0, 0, 0) != 0:  # PR_SET_PDEATHSIG
    raise OSError(ctypes.get_errno(), "prctl(PR_SET_PDEATHSIG) failed")
  if os.getppid() != int(parent):
    sys.exit(1)


def main(argv: list[str]) -> int:
  """Parses `argv` (program name first), then serves until SIGTERM, SIGHUP or Ctrl-C (exit 0)."""
  _die_with_parent()
  # SIGTERM and SIGHUP end the server like Ctrl-C does (its site is cleaned up, exit 0).
  for signum in (signal.SIGTERM, signal.SIGHUP):
    signal.signal(signum, signal.default_int_handler)
  try:
    FLAGS(argv)
    config = config_from_flags()
  except (flags.Error, SimConfigError) as e:
    print(f"error: {e}", file=sys.stderr)
    return 2
  try:
    intent.load()  # before the ready line: the sim is serving, and so interruptible, once a run uses it
  except intent.IntentReaderError as e:
    print(f"error: {e}", file=sys.stderr)
    return 2
  app = make_app(config)
  host = FLAGS.host

  async def run() -> None:
    runner, port = await start_site(app, host, FLAGS.port)
    print(f"{READY_PREFIX}http://{host}:{port}/v1", flush=True)
    print(f"simulated pool (seed {config.seed}, profile {config.profile}) serving {len(MODELS)} models on "
          f"http://{host}:{port}/v1", file=sys.stderr, flush=True)
    try:
      await asyncio.Event().wait()
    finally:
      await runner.cleanup()

  try:
    asyncio.run(run())
  except KeyboardInterrupt:
    pass
  except OSError as e:
    print(f"error: cannot serve on {host}:{FLAGS.port}: {e}", file=sys.stderr)
    return 1
  return 0


if __name__ == "__main__":
  status = main(sys.argv)
  # os._exit, not sys.exit: the server holds no file to finalise (its site is cleaned up in `main`), and
  # the interpreter's teardown of torch (loaded by the intent reader, sim/intent.py) took 0.9 s after a
  # Ctrl-C: a sim outliving its interrupted run by that long.
  sys.stdout.flush()
  sys.stderr.flush()
  os._exit(status)  # pylint: disable=protected-access
