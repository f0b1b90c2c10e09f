"""The suite's one root of user-facing errors.

A `UserError` says the request or the world is not as the flags say (an unknown name, a damaged run
directory, an unreachable endpoint, a method that cannot run as configured): not a bug. The shared
entry-point body (`experiment/cli.py`) catches it once and prints one `error:` line per problem to
stderr, exit status 2; anything else is a bug and keeps its traceback.

At the bottom of the package (it imports nothing of it), so every layer, llm/ included, can derive
its errors from it.
"""

from __future__ import annotations


class UserError(Exception):
  """A mistake in the request, its files or its endpoints: one clear line, exit 2, no traceback.

  Attributes:
    problems: (optional, on subclasses) several independent problems, printed one line each.
  """
