"""A fresh pids + memory cgroup per grading, where one can be had.

The seccomp filter keeps a graded program to one process, so its rlimits bound it; a cgroup bounds
the whole sandbox as well (bubblewrap's processes, every thread, all their memory), whatever the
filter lets through. `sandbox.run_child` makes one per child, starts the child inside it (a `sh`
that writes its own pid into each `cgroup.procs` and then execs the child, so nothing the child
starts is ever outside it), and after the child kills what is left in it and removes it.

Where: cgroup v2 if the unified hierarchy mounted at /sys/fs/cgroup (or /sys/fs/cgroup/unified)
has both `pids` and `memory` among its controllers and a directory below this process's own cgroup
can be made there with both enabled; else cgroup v1 with the `pids` and `memory` controllers
mounted and writable. The new groups sit below this process's own groups, so every bound set above
still holds. Where neither can be had, `support()` says why and grading keeps the seccomp filter
and rlimits alone (said in `sandbox_provenance()["limits"]`).

A grader killed mid-grading leaves an empty group behind (its programs die with it: bubblewrap's
`--die-with-parent`, or the process group kill): groups are named `hieramas-<grader pid>-<n>`, and
the first grading of a later process removes those of graders no longer alive.
"""

from __future__ import annotations

import dataclasses
import itertools
import logging
import os
import pathlib
import signal
import threading
import time

from hieramas_jax.procs import pid_alive

log = logging.getLogger(__name__)

CGROUP_ROOT = pathlib.Path("/sys/fs/cgroup")
PREFIX = "hieramas-"
# The shell that joins the groups, then execs the child: `sh -c JOIN sh N procs_1..procs_N argv...`.
JOIN = ('n=$1; shift; while [ "$n" -gt 0 ]; do echo $$ > "$1" || exit 125; shift; n=$((n - 1)); done; '
        'exec "$@"')
SH = "/bin/sh"

_counter = itertools.count()
_swept = threading.Event()


@dataclasses.dataclass(frozen=True)
class Support:
  """Which cgroups a grading gets.

  Attributes:
    version: "v2", "v1", or None (none can be had).
    parents: the directories new groups are made in (one per v1 controller; one for v2).
    detail: how, or why not (no path: it goes into results' provenance, which must not depend on
      which session computed them).
  """

  version: str | None
  parents: tuple[pathlib.Path, ...]
  detail: str


def _own_path(controller: str | None) -> str | None:
  """This process's cgroup path in the hierarchy of `controller` (None: the v2 one)."""
  try:
    lines = pathlib.Path("/proc/self/cgroup").read_text().splitlines()
  except OSError:
    return None
  for line in lines:
    parts = line.split(":", 2)
    if len(parts) != 3:
      continue
    if controller is None and parts[0] == "0" and parts[1] == "":
      return parts[2]
    if controller is not None and controller in parts[1].split(","):
      return parts[2]
  return None


def _try_dir(parent: pathlib.Path, files: dict[str, str], label: str) -> str | None:
  """Make, configure and remove a probe group below `parent`; None if it works, else why not
  (naming `label`, not the path: this process's own group differs from session to session)."""
  probe = parent / f"{PREFIX}probe-{os.getpid()}"
  try:
    probe.mkdir()
  except OSError as e:
    return f"cannot make a {label} group: {e.strerror}"
  try:
    for name, value in files.items():
      (probe / name).write_text(value)
    return None
  except OSError as e:
    return f"cannot set {name} in a {label} group: {e.strerror}"
  finally:
    try:
      probe.rmdir()
    except OSError:
      pass


def _probe_v2() -> Support | str:
  for mount in (CGROUP_ROOT, CGROUP_ROOT / "unified"):
    controllers = mount / "cgroup.controllers"
    if not controllers.exists():
      continue
    if not {"pids", "memory"} <= set(controllers.read_text().split()):
      return f"the cgroup v2 hierarchy at {mount} has no pids and memory controllers"
    own = _own_path(None)
    if own is None:
      return "this process has no cgroup v2 path"
    parent = mount / own.lstrip("/")
    try:  # v2: controllers must be enabled for the children of `parent`
      (parent / "cgroup.subtree_control").write_text("+pids +memory")
    except OSError as e:
      return f"cannot enable pids and memory for the groups below this process's cgroup v2: {e.strerror}"
    why = _try_dir(parent, {"pids.max": "64", "memory.max": str(1 << 30)}, "cgroup v2")
    return why or Support("v2", (parent,), "cgroup v2 (pids, memory)")
  return "no cgroup v2 hierarchy"


def _probe_v1() -> Support | str:
  parents = []
  for controller, files in (("pids", {"pids.max": "64"}),
                            ("memory", {"memory.limit_in_bytes": str(1 << 30)})):
    mount = CGROUP_ROOT / controller
    if not (mount / "cgroup.procs").exists():
      return f"no cgroup v1 {controller} controller mounted at {mount}"
    own = _own_path(controller)
    parent = mount / (own or "/").lstrip("/")
    why = _try_dir(parent, files, f"cgroup v1 {controller}")
    if why:
      return why
    parents.append(parent)
  return Support("v1", tuple(parents), "cgroup v1 (pids, memory)")


_support: Support | None = None
_support_lock = threading.Lock()


def support() -> Support:
  """Probed once per process: which cgroups a grading can have (`Support`)."""
  global _support
  with _support_lock:
    if _support is None:
      why = []
      for probe in (_probe_v2, _probe_v1):
        try:
          found = probe()
        except OSError as e:
          found = f"{probe.__name__}: {e}"
        if isinstance(found, Support):
          _support = found
          break
        why.append(found)
      else:
        _support = Support(None, (), "no cgroup: " + "; ".join(why))
    return _support


@dataclasses.dataclass
class Group:
  """One grading's cgroup(s): `prefix(argv)` starts a command inside them; `remove()` ends them."""

  dirs: tuple[pathlib.Path, ...]

  def prefix(self, argv: list[str]) -> list[str]:
    procs = [str(d / "cgroup.procs") for d in self.dirs]
    return [SH, "-c", JOIN, "sh", str(len(procs)), *procs, *argv]

  def pids(self) -> list[int]:
    out = set()
    for d in self.dirs:
      try:
        out.update(int(p) for p in (d / "cgroup.procs").read_text().split())
      except (OSError, ValueError):
        pass
    return sorted(out)

  def remove(self, timeout_s: float = 10.0) -> bool:
    """Kill what is left inside and remove the group; False (with a warning) if it could not be."""
    deadline = time.monotonic() + timeout_s
    while True:
      left = self.pids()
      for pid in left:
        try:
          os.kill(pid, signal.SIGKILL)
        except OSError:
          pass
      removed = True
      for d in self.dirs:
        try:
          d.rmdir()
        except FileNotFoundError:
          pass
        except OSError:
          removed = False
      if removed:
        return True
      if time.monotonic() > deadline:
        log.warning("cgroup %s not removed: processes %s still in it",
                    ", ".join(map(str, self.dirs)), left)
        return False
      time.sleep(0.01)


def sweep(parents: tuple[pathlib.Path, ...]) -> int:
  """Remove the groups of graders that are no longer alive (a killed grader's); how many."""
  n = 0
  for parent in parents:
    try:
      entries = list(parent.iterdir())
    except OSError:
      continue
    for d in entries:
      parts = d.name[len(PREFIX):].split("-")
      if not (d.name.startswith(PREFIX) and d.is_dir() and len(parts) == 2 and parts[0].isdigit()):
        continue
      if int(parts[0]) == os.getpid() or pid_alive(int(parts[0])):
        continue
      if Group((d,)).remove(timeout_s=2.0):
        n += 1
  return n


def create(pids_max: int, memory_bytes: int, owner_uid: int | None = None) -> Group | None:
  """A fresh group bounded to `pids_max` tasks (processes and threads) and `memory_bytes` (with
  swap, where v1 accounts it); None where no cgroup can be had (`support()` says why).

  `owner_uid`: the uid the joining shell runs as, given the group's `cgroup.procs` (only that file).

  Raises:
    OSError: the group could not be made or bounded although the probe could.
  """
  sup = support()
  if sup.version is None:
    return None
  if not _swept.is_set():
    _swept.set()
    sweep(sup.parents)
  name = f"{PREFIX}{os.getpid()}-{next(_counter)}"
  dirs = tuple(parent / name for parent in sup.parents)
  group = Group(())
  try:
    for d in dirs:
      d.mkdir()
      group.dirs += (d,)
      if sup.version == "v2":
        (d / "pids.max").write_text(str(pids_max))
        (d / "memory.max").write_text(str(memory_bytes))
        if (d / "memory.swap.max").exists():
          (d / "memory.swap.max").write_text("0")
      elif (d / "pids.max").exists():
        (d / "pids.max").write_text(str(pids_max))
      else:
        (d / "memory.limit_in_bytes").write_text(str(memory_bytes))
        if (d / "memory.memsw.limit_in_bytes").exists():
          (d / "memory.memsw.limit_in_bytes").write_text(str(memory_bytes))
      if owner_uid is not None:
        os.chown(d / "cgroup.procs", owner_uid, -1)
  except OSError:
    group.remove(timeout_s=1.0)
    raise
  return group
