"""Shared entry-point plumbing: user mistakes end in one clear error line and a non-zero exit."""

from __future__ import annotations

import logging
import sys
from typing import Any, Callable

from hieramas_jax.benchmarks.data import DataError, UnknownBenchmarkError
from hieramas_jax.benchmarks.sandbox import SandboxError
from hieramas_jax.llm.errors import LLMError
from hieramas_jax.llm.registry import UnknownModelError, UnknownPoolError
from hieramas_jax.mas.config import ConfigError
from hieramas_jax.mas.roles import UnknownRoleError
from hieramas_jax.methods.api import UnknownMethodError

EXIT_USER_ERROR = 2

# Errors that mean "the request was wrong / the world is not as the flags say", not a bug: they get
# one line, no traceback. Anything else is a bug and keeps its traceback.
USER_ERRORS: tuple[type[BaseException], ...] = (
    UnknownMethodError, UnknownBenchmarkError, UnknownPoolError, UnknownModelError, UnknownRoleError,
    LLMError, DataError, ConfigError, SandboxError)


def run_or_exit(fn: Callable[[], Any], extra_errors: tuple[type[BaseException], ...] = ()) -> Any:
  """Calls `fn`; on a user error prints `error: <message>` to stderr and exits with status 2."""
  try:
    return fn()
  except USER_ERRORS + extra_errors as e:
    logging.shutdown()
    for problem in getattr(e, "problems", None) or [e]:  # a preflight names every conflict, one line each
      print(f"error: {problem}", file=sys.stderr, flush=True)
    sys.exit(EXIT_USER_ERROR)


def parse_flags_or_exit(argv: list[str]) -> list[str]:
  """absl `flags_parser` for `app.run`: a malformed or unknown flag is one `error:` line, exit 2.

  absl's own parser prints a FATAL line plus a help hint and exits 1; every other user mistake in
  the suite exits 2 with one line, so flags do the same.
  """
  from absl import flags  # pylint: disable=import-outside-toplevel
  try:
    return flags.FLAGS(argv)
  except flags.Error as e:
    print(f"error: {e}", file=sys.stderr, flush=True)
    sys.exit(EXIT_USER_ERROR)


# Appended to every --run_root help whose entry point uses `default_run_root`.
LIMITED_ROOT_HELP = (" When not given, a run with limits uses the default root named by them (e.g. "
                     "runs/table1-limit3-train8).")


def default_run_root(flag_values: Any, spec: Any) -> str:
  """--run_root, or, when it was not given, the default root named by the run's limits.

  A quick look (`--limit=3 --train_limit=8`) then writes under `runs/table1-limit3-train8` and the full
  table under `runs/table1`: the two never share a run directory, so neither refuses the other.
  """
  run_root = flag_values["run_root"].value
  if not flag_values["run_root"].using_default_value:
    return run_root
  return run_root + spec.limits_suffix()


def selected_flags(flag_values: Any, names) -> dict[str, Any]:
  """The values of the named flags (for config.json and provenance; redacted there)."""
  return {n: flag_values[n].value for n in names if n in flag_values}
