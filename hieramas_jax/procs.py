"""Process helpers shared by every layer (the sandbox's cgroups, the spend ledger).

At the bottom of the package so that `benchmarks/` and `llm/`, which may not import each other, share one.
"""

from __future__ import annotations

import os


def pid_alive(pid: int) -> bool:
  """Whether a process with this pid exists on this machine (signal 0 probes without sending anything).

  Why PermissionError counts as alive: the process exists but belongs to another user, so its lock,
  cgroup or ledger rows are not stale."""
  try:
    os.kill(pid, 0)
  except ProcessLookupError:
    return False
  except PermissionError:
    return True
  return True
