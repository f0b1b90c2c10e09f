"""The isolation sandbox: untrusted programs run in a confined child; the caller reads its report.

Why longer than ~600 lines: two halves that only make sense together, how a child is confined
(`isolation()`: bubblewrap's command line, the probe, the fallback, provenance) and how one child is
run (`run_child`: spawn off the event loop, feed the job, read report lines under CPU-time budgets,
kill the group and remove its cgroup). Each half is the other's only user, and splitting them would
spread one security boundary over two files.

What runs inside is `_sandbox_child.py` (a program, a function to call on given inputs, a report line
per call); what the lines mean is the caller's: `humaneval.py` judges HumanEval+ candidates with them,
AFlow's operators read outputs back (`methods/aflow/execute.py`). This module knows no task, item or
grade.

**Isolation** (`isolation()`): each program runs under bubblewrap in new user, pid, network, IPC,
UTS and mount namespaces: a read-only root that holds only /usr and the Python installation (not
this repository, its data or the caches: no answer key is readable), a private tmpfs at /tmp
(mounted first, so an interpreter under /tmp stays visible), a /dev of null, zero and random only,
uid 65534 without capabilities, `--die-with-parent`, and a pid namespace whose end kills every
process the program started. In every mode the child loads a seccomp filter (one process, a
read-only file system, no ptrace, no network socket, signals to itself only: `seccomp_program`), so
its rlimits (CPU, address space, open files) bound the whole run, and the parent enforces each
report line's time budget too (`_converse`). Where a cgroup can be had, each child starts in a fresh
pids + memory cgroup that bounds the whole sandbox and is removed afterwards (`cgroups.py`).
Where bubblewrap cannot run, running refuses (`SandboxError` naming the cause and the fix) unless
`HIERAMAS_SANDBOX=fallback` asks for the fallback (a fresh process group in a temporary working
directory, killed after every run); the mode is in every result's provenance
(`experiment/provenance.py`). The messages that reach provenance and logs still name HumanEval+
programs, word for word as before: they are recorded in committed results.
"""

from __future__ import annotations

import asyncio
import contextlib
import dataclasses
import functools
import logging
import os
import pathlib
import pickle
import shutil
import signal
import subprocess
import sys
import tempfile
import threading
import weakref

from hieramas_jax.benchmarks import _sandbox_child as child
from hieramas_jax.benchmarks import cgroups
from hieramas_jax.errors import UserError
from hieramas_jax.paths import PACKAGE_DIR, REPO_DIR, cache_dir

log = logging.getLogger(__name__)

CHILD_SCRIPT = pathlib.Path(child.__file__)
# Passed with `python -I -c`: inside bubblewrap the child's file is not visible (nor is the repo).
CHILD_SOURCE = CHILD_SCRIPT.read_text(encoding="utf-8")

# `HIERAMAS_SANDBOX`: "auto" and "bwrap" (bubblewrap, or a SandboxError naming cause and fix),
# "fallback" (no bubblewrap: asked for, said once, recorded in every result's provenance).
SANDBOX_ENV = "HIERAMAS_SANDBOX"
SANDBOX_UID = 65534  # "nobody"
# After the child exits, how long a pipe still held open (by an escaped process in the fallback
# mode) may keep the parent reading.
_EXIT_GRACE_S = 1.0
# Budgets (`run_child`'s wall and per-line budgets) are CPU seconds of the child's process tree: when one runs out in wall time the parent reads
# the tree's CPU time and waits on while that is under the budget (a loaded machine does not fail a
# program), up to _WALL_FACTOR x the budget in wall time (a program that sleeps uses no CPU).
_WALL_FACTOR = 4.0
_CLOCK_TICK = os.sysconf("SC_CLK_TCK")


def _tree_cpu_s(pid: int) -> float | None:
  """User + system CPU seconds of `pid` and its living descendants (from /proc), None without /proc."""
  parent_of, cpu = {}, {}
  try:
    entries = os.listdir("/proc")
  except OSError:
    return None
  for name in entries:
    if not name.isdigit():
      continue
    try:
      with open(f"/proc/{name}/stat", "rb") as f:
        rest = f.read().rsplit(b")", 1)[1].split()
    except (OSError, IndexError):
      continue
    parent_of[int(name)] = int(rest[1])
    cpu[int(name)] = (int(rest[11]) + int(rest[12])) / _CLOCK_TICK
  if pid not in cpu:
    return None
  tree, frontier = {pid}, [pid]
  children: dict[int, list[int]] = {}
  for child_pid, parent in parent_of.items():
    children.setdefault(parent, []).append(child_pid)
  while frontier:
    for c in children.get(frontier.pop(), ()):
      if c not in tree:
        tree.add(c)
        frontier.append(c)
  return sum(cpu[p] for p in tree)


class SandboxError(UserError, RuntimeError):
  """The sandbox itself failed (it could not start, or the canonical solution failed)."""


@dataclasses.dataclass(frozen=True)
class SandboxLimits:
  """Resource limits of one sandboxed run.

  Attributes:
    wall_s: budget of the whole child, in CPU seconds of its process tree (and at most
      `_WALL_FACTOR` x that in wall time); past it the process group is killed.
    cpu_s: RLIMIT_CPU of the child (SIGXCPU, then SIGKILL one second later).
    memory_bytes: RLIMIT_AS (and RLIMIT_DATA): a 50 GB allocation fails at once with
      MemoryError instead of swapping the machine.
    fsize_bytes: RLIMIT_FSIZE: largest file the child may write.
    tmp_bytes: size of the private tmpfs at /tmp (bubblewrap mode): all files together.
    output_cap_bytes: longest report line the parent accepts (the line is one output; a larger
      output travels as a digest, floats excepted).
    load_s: CPU time limit for running the program's top level (imports, definitions).
    check_s: CPU time limit of the dataset's `check()` (canonical solution only).
    pids_max: tasks (processes and threads) of the whole sandbox, where a cgroup can be had
      (`cgroups.py`; its memory bound is `memory_bytes` for the whole sandbox).
  """

  wall_s: float = 60.0
  cpu_s: int = 60
  memory_bytes: int = 4 << 30
  fsize_bytes: int = 16 << 20
  tmp_bytes: int = 64 << 20
  output_cap_bytes: int = 1 << 20
  load_s: float = 5.0
  check_s: float = 120.0
  pids_max: int = 64


DEFAULT_LIMITS = SandboxLimits()


# ---------------------------------------------------------------------------------------------
# Isolation: how a child process is started.


@dataclasses.dataclass(frozen=True)
class Isolation:
  """How programs are run.

  Attributes:
    mode: "bwrap" (bubblewrap namespaces) or "fallback" (process group and temp dir only).
    detail: how (the uid mapping) or why not (bubblewrap's error).
    argv: the bubblewrap command line up to and including `--` (empty in the fallback).
    host_uid: the host uid the program's process has (None: this process's own uid).
  """

  mode: str
  detail: str
  argv: tuple[str, ...] = ()
  host_uid: int | None = None

  def provenance(self) -> dict[str, str | int | None]:
    return {"mode": self.mode, "detail": self.detail,
            "host_uid": os.geteuid() if self.host_uid is None else self.host_uid,
            "limits": _limits_detail()}

  def spawn_kwargs(self) -> dict:
    if self.host_uid is None:
      return {}
    return {"user": self.host_uid, "group": self.host_uid, "extra_groups": []}


def _under(path: str, root: str) -> bool:
  return path == root or path.startswith(root.rstrip(os.sep) + os.sep)


def _mount_plan() -> list[str]:
  """bubblewrap mount options: /usr and the interpreter's trees read-only, nothing of the suite.

  Top-level /bin, /lib... are recreated as the symlinks they are on merged-/usr systems (bound
  read-only where they are real directories). The interpreter's prefix, base prefix and real
  executable directory are bound at their own paths, so a venv's symlinks resolve. If one of them
  contains this repository, the package or the cache (a venv holding a non-editable install, a
  prefix above the checkout), an empty tmpfs hides those: the canonical solutions and the
  expected outputs must never be readable from inside.
  """
  opts = ["--ro-bind", "/usr", "/usr"]
  for top in ("/bin", "/sbin", "/lib", "/lib32", "/lib64", "/libx32"):
    if os.path.islink(top):
      opts += ["--symlink", os.readlink(top), top]
    elif os.path.isdir(top):
      opts += ["--ro-bind", top, top]
  roots: list[str] = []
  for p in (sys.prefix, sys.exec_prefix, sys.base_prefix, sys.base_exec_prefix,
            os.path.dirname(os.path.realpath(sys.executable))):
    for q in {os.path.abspath(p), os.path.realpath(p)}:
      if q == "/":
        raise SandboxError("the Python installation lives at / itself; it cannot be bound alone")
      if not _under(q, "/usr") and not any(_under(q, r) for r in roots):
        roots = [r for r in roots if not _under(r, q)] + [q]
  for r in sorted(roots):
    opts += ["--ro-bind", r, r]
  hidden = sorted({os.path.realpath(p) for p in (REPO_DIR, PACKAGE_DIR, cache_dir())})
  for h in hidden:
    if any(_under(h, r) for r in roots + ["/usr"]):
      opts += ["--size", "4096", "--tmpfs", h, "--remount-ro", h]
  return opts


def bwrap_argv(bwrap: str, *, disable_userns: bool = True, tmp_bytes: int = DEFAULT_LIMITS.tmp_bytes
               ) -> list[str]:
  """The bubblewrap command line up to `--` (the program follows it)."""
  argv = [bwrap, "--unshare-user", "--uid", str(SANDBOX_UID), "--gid", str(SANDBOX_UID),
          "--unshare-pid", "--unshare-net", "--unshare-ipc", "--unshare-uts", "--unshare-cgroup-try"]
  if disable_userns:  # no nested user namespace: the kernel surface it opens stays closed
    argv.append("--disable-userns")
  argv += ["--die-with-parent", "--new-session", "--hostname", "sandbox"]
  # The private /tmp first: bubblewrap mounts in argument order, so a tmpfs mounted after the
  # interpreter's binds would hide an interpreter that lives under /tmp (a checkout cloned there).
  argv += ["--size", str(int(tmp_bytes)), "--tmpfs", "/tmp"]
  argv += _mount_plan()
  # A minimal /dev: no ptmx or pts (a program could otherwise hold host ptys, a global budget).
  argv += ["--proc", "/proc", "--size", "65536", "--tmpfs", "/dev"]
  for node in _DEV_NODES:
    argv += ["--dev-bind", node, node]
  argv += ["--symlink", "/proc/self/fd", "/dev/fd", "--remount-ro", "/dev",
           "--remount-ro", "/", "--chdir", "/tmp", "--clearenv"]
  for key, value in _child_env("/tmp").items():
    argv += ["--setenv", key, value]
  return argv + ["--"]


_DEV_NODES = ("/dev/null", "/dev/zero", "/dev/random", "/dev/urandom")


def _child_env(workdir: str) -> dict[str, str]:
  return {"PATH": "/usr/bin:/bin", "HOME": workdir, "TMPDIR": workdir, "OMP_NUM_THREADS": "1",
          "OPENBLAS_NUM_THREADS": "1", "MKL_NUM_THREADS": "1", "PYTHONHASHSEED": "0",
          "PYTHONDONTWRITEBYTECODE": "1"}


# The probe also loads the child's seccomp filter: a sandbox whose filter cannot load is refused here,
# with bubblewrap's and the kernel's own words, rather than at the first grading.
_PROBE = (f"ns = {{'__name__': 'probe'}}; exec({CHILD_SOURCE!r}, ns); ns['_load_seccomp'](); "
          "import sys; sys.stdout.write('sandbox ok')")


def _probe(argv: list[str], kwargs: dict) -> str | None:
  """None if bubblewrap runs the interpreter with these options, else why not."""
  try:
    proc = subprocess.run(argv + [sys.executable, "-I", "-c", _PROBE], capture_output=True,
                          timeout=60, check=False, stdin=subprocess.DEVNULL, **kwargs)
  except (OSError, subprocess.SubprocessError) as e:
    return f"{type(e).__name__}: {e}"
  if proc.returncode == 0 and proc.stdout == b"sandbox ok":
    return None
  err = proc.stderr.decode("utf-8", "replace").strip().splitlines()
  return f"exit {proc.returncode}: {err[-1] if err else 'no output'}"


def probe_bwrap() -> Isolation | str:
  """The first bubblewrap setup that works here, strongest first, or why none does.

  As root, the program's process should be an unprivileged host uid (65534) too; that needs the
  interpreter's directories to be reachable by that uid (not, e.g., a pyenv under a 0700 /root).
  Otherwise bubblewrap runs as this user and maps it to uid 65534 inside its user namespace,
  where the process has no capabilities and sees only the read-only mounts listed above.
  """
  bwrap = shutil.which("bwrap")
  if bwrap is None:
    return "bwrap is not installed (Debian/Ubuntu package `bubblewrap`)"
  try:
    plain = bwrap_argv(bwrap)
    no_disable = bwrap_argv(bwrap, disable_userns=False)
  except SandboxError as e:
    return str(e)
  attempts = []
  if os.geteuid() == 0:
    attempts.append((plain, SANDBOX_UID, "uid 65534 inside and on the host"))
  me = os.geteuid()
  mapped = f"uid 65534 inside, mapped to host uid {me}, no capabilities"
  if me == 0:
    mapped += " (the interpreter is not reachable by an unprivileged host uid)"
  attempts += [(plain, None, mapped), (no_disable, None, mapped + "; nested user namespaces allowed")]
  errors = []
  for argv, uid, detail in attempts:
    kwargs = {} if uid is None else {"user": uid, "group": uid, "extra_groups": []}
    why = _probe(argv, kwargs)
    if why is None:
      return Isolation("bwrap", detail, tuple(argv), uid)
    errors.append(why)
  return "; ".join(dict.fromkeys(errors))


def fallback_isolation(reason: str = "asked for") -> Isolation:
  return Isolation("fallback", f"no bubblewrap ({reason}): rlimits, guard and process-group kill only")


_ISOLATION_LOCK = threading.Lock()


def isolation() -> Isolation:
  """The isolation this process uses, decided once (`HIERAMAS_SANDBOX`, then a probe).

  Thread-safe: graders run from worker threads too, and the fallback warning is said once.
  `isolation.cache_clear()` forgets the decision (tests).

  Raises:
    SandboxError: `HIERAMAS_SANDBOX` is unknown, or is "bwrap" where bubblewrap cannot run.
  """
  with _ISOLATION_LOCK:
    return _decide_isolation()


@functools.lru_cache(maxsize=1)
def _decide_isolation() -> Isolation:
  wanted = os.environ.get(SANDBOX_ENV, "auto").strip().lower() or "auto"
  if wanted not in ("auto", "bwrap", "fallback"):
    raise SandboxError(f"{SANDBOX_ENV}={wanted!r}: expected auto, bwrap or fallback")
  if wanted == "fallback":
    return fallback_isolation(f"{SANDBOX_ENV}=fallback")
  found = probe_bwrap()
  if isinstance(found, Isolation):
    return found
  # Never quietly weaker: a run that cannot isolate refuses to grade (one error, exit 2).
  raise SandboxError(f"bubblewrap cannot isolate HumanEval+ programs here: {found}. Fix: install "
                     f"bubblewrap (apt-get install bubblewrap) and allow unprivileged user namespaces, "
                     f"or set {SANDBOX_ENV}=fallback to grade without isolation (recorded in the results)")


isolation.cache_clear = _decide_isolation.cache_clear  # type: ignore[attr-defined]


def _limits_detail() -> str:
  """How a whole grading is bounded: a cgroup per grading, or the seccomp filter and rlimits alone."""
  sup = cgroups.support()
  if sup.version is None:
    return f"seccomp and rlimits per process ({sup.detail})"
  return f"seccomp, rlimits, and a pids + memory cgroup per grading: {sup.detail}"


_WARNED_FALLBACK = threading.Event()


def warn_if_fallback(iso: Isolation) -> None:
  """Says once per process, when a HumanEval+ program is about to run unisolated, that it is.

  Only then: a run without HumanEval+ (which still records the mode in its provenance) says nothing.
  """
  with _ISOLATION_LOCK:
    if iso.mode != "fallback" or _WARNED_FALLBACK.is_set():
      return
    _WARNED_FALLBACK.set()
    log.warning("%s=fallback: HumanEval+ programs run WITHOUT namespace isolation (seccomp, rlimits, "
                "a guard and a process-group kill only); results record sandbox mode 'fallback'", SANDBOX_ENV)


def sandbox_provenance() -> dict[str, str | int | None]:
  """The isolation mode for a result's provenance ("unavailable" where grading would refuse:
  results without HumanEval+ are still written, and say so)."""
  try:
    return isolation().provenance()
  except SandboxError as e:
    return {"mode": "unavailable", "detail": str(e), "host_uid": os.geteuid(), "limits": _limits_detail()}


# ---------------------------------------------------------------------------------------------
# Running one child.


@dataclasses.dataclass(frozen=True)
class Stop:
  """What a report reader returns to end a run: why, and whether the child may first exit on its own
  (it reported everything and is exiting: a clean exit, not a kill; a failing program is killed)."""

  reason: str
  let_exit: bool = False


@dataclasses.dataclass(frozen=True)
class RunOutcome:
  """How a run ended: the exit code (None if it had to be killed), whether a time budget ran out,
  and the parent's own reason for stopping early (a decision, or a malformed report).

  `budget` says which budget ran out when `timed_out`: "line" (a report line's, `line_budget`) or
  "wall" (the whole child's, `wall_s`). Tests assert on it instead of on elapsed seconds, which a
  loaded machine stretches.
  """

  returncode: int | None
  timed_out: bool
  stopped: str | None = None
  budget: str | None = None


# One concurrency bound per event loop (asyncio primitives belong to one loop).
_SEMAPHORES: "weakref.WeakKeyDictionary[asyncio.AbstractEventLoop, asyncio.Semaphore]" = (
    weakref.WeakKeyDictionary())


def max_concurrency() -> int:
  """Children run at once: one per core (grading is CPU bound)."""
  return max(1, os.cpu_count() or 1)


def _semaphore() -> asyncio.Semaphore:
  loop = asyncio.get_running_loop()
  sem = _SEMAPHORES.get(loop)
  if sem is None:
    sem = _SEMAPHORES[loop] = asyncio.Semaphore(max_concurrency())
  return sem


def _kill_group(pid: int) -> None:
  try:
    os.killpg(pid, signal.SIGKILL)
  except (ProcessLookupError, PermissionError):
    pass


class _Child:
  """A sandbox child started by `subprocess.Popen` on a worker thread; its stdout read by the event loop.

  Why not `asyncio.create_subprocess_exec`: under uvloop (`aio.run`) libuv starts a child with fork(), which
  copies the parent's page tables while the event loop waits. From a Table 1 run holding ~3 GB (models,
  caches) that measured ~33 ms per child, against ~7 ms for CPython's vfork-based Popen, and a HumanEval+
  training cell starts a child per candidate program: the run's one event loop spent most of its time in
  spawns, and every other cell stalled behind it. Here the spawn is off the loop and cheap.

  The pipes are ours, closed exactly once: not handed to `connect_read_pipe`, because uvloop's pipe
  transport lets libuv close the fd and then closes the file object again, and with children started on
  other threads that second close can hit a number just reused by another spawn (seen: EBADF in Popen).
  stdout is read with `add_reader` into a StreamReader; the job goes to stdin from a worker thread.

  The surface is what `run_child` and `_converse` use: `pid`, `returncode` (polled, never blocking),
  `stdout` (a StreamReader), `send(payload)`, and `close()` for our pipe ends.
  """

  def __init__(self, popen: subprocess.Popen, limit: int):
    self._popen = popen
    self.pid = popen.pid
    self._loop = asyncio.get_running_loop()
    self.stdout = asyncio.StreamReader(limit=limit, loop=self._loop)
    # Past this much unread output the child has overrun every report cap: stop reading (EOF).
    self._cap = 4 * limit
    self._buffered = 0
    self._fd = popen.stdout.fileno()
    os.set_blocking(self._fd, False)
    self._reading = True
    self._loop.add_reader(self._fd, self._on_readable)

  @property
  def returncode(self) -> int | None:
    return self._popen.poll()

  def _on_readable(self) -> None:
    try:
      data = os.read(self._fd, 1 << 16)
    except (BlockingIOError, InterruptedError):
      return
    except OSError:
      data = b""
    if data:
      self._buffered += len(data)
      self.stdout.feed_data(data)
    if not data or self._buffered > self._cap:
      self._stop_reading()
      self.stdout.feed_eof()

  def _stop_reading(self) -> None:
    if self._reading:
      self._reading = False
      self._loop.remove_reader(self._fd)

  async def send(self, payload: bytes, timeout: float) -> None:
    """Write the job to the child's stdin and close it; a child that died first simply gets nothing."""
    stdin = self._popen.stdin

    def write_all() -> None:
      try:
        view = memoryview(payload)
        while view:
          view = view[stdin.write(view):]
      except (BrokenPipeError, ConnectionResetError, ValueError, OSError):
        pass
      finally:
        with contextlib.suppress(OSError):
          stdin.close()

    # The thread ends when the child reads, dies or is killed (its pipe closes): `run_child` always kills.
    with contextlib.suppress(asyncio.TimeoutError):
      await asyncio.wait_for(asyncio.shield(self._loop.run_in_executor(None, write_all)), timeout=timeout)

  def close(self) -> None:
    self._stop_reading()
    with contextlib.suppress(OSError):
      self._popen.stdout.close()


async def _spawn(argv: list[str], *, cwd, env, limit: int, spawn_kwargs: dict) -> _Child:
  """Start `argv` with piped stdin/stdout in its own session (see `_Child` for why not asyncio's spawn).

  Raises:
    OSError: the child could not be started.
  """
  loop = asyncio.get_running_loop()
  popen = await loop.run_in_executor(None, functools.partial(
      subprocess.Popen, argv, cwd=cwd, env=env, stdin=subprocess.PIPE, stdout=subprocess.PIPE,
      stderr=subprocess.DEVNULL, start_new_session=True, bufsize=0, close_fds=True, **spawn_kwargs))
  try:
    return _Child(popen, limit)
  except BaseException:
    _kill_group(popen.pid)
    for pipe in (popen.stdin, popen.stdout):
      with contextlib.suppress(OSError):
        pipe.close()
    popen.wait()
    raise


async def _wait_returncode(proc: _Child) -> None:
  """Until the child exits. Polls: in Python 3.11 `proc.wait()` also waits for every pipe to
  close, which a process holding stdout (an escaped grandchild in the fallback) can delay."""
  delay = 0.002
  while proc.returncode is None:
    await asyncio.sleep(delay)
    delay = min(delay * 2, 0.05)


async def _converse(proc: _Child, wall_s: float, on_line, line_budget=None) -> tuple[str | None, Stop | None]:
  """Feed report lines to `on_line` until it decides (returns a Stop), EOF, or a budget runs out.

  `line_budget(n)`, if given, is how many seconds report line n may take after line n - 1 (or
  after the start): the per-input limits enforced from outside, so a program that ignores or
  blocks the child's SIGPROF is still stopped near its input's limit, not at the wall limit.
  `wall_s` is the budget of the whole child. Budgets are CPU seconds of the child's process tree,
  read from /proc only when one has passed in wall time (so that load does not fail a program):
  the tree may use, by report line n, the budgets of lines 0..n together, and `wall_s` in all; and
  no line waits more than `_WALL_FACTOR` x its budget in wall time (a sleeping program uses no CPU).

  Returns:
    (the budget that ran out, "line" or "wall", or None; the Stop or None).
  """
  loop = asyncio.get_running_loop()
  exited = asyncio.ensure_future(_wait_returncode(proc))
  read = None
  n_lines = 0
  start = line_start = loop.time()
  budget = line_budget(0) if line_budget is not None else wall_s
  cumulative = budget
  line_deadline = min(start + wall_s, line_start + budget)
  try:
    while True:
      if read is None:
        read = asyncio.ensure_future(proc.stdout.readline())
      now = loop.time()
      if now >= line_deadline:
        cpu = _tree_cpu_s(proc.pid)
        if now - start >= _WALL_FACTOR * wall_s:
          return "wall", None
        if now - line_start >= _WALL_FACTOR * budget:
          return ("line" if line_budget is not None else "wall"), None
        if cpu is None:  # no /proc: the deadline that passed, in wall time
          return ("wall" if start + wall_s <= line_start + budget else "line"), None
        left = min(wall_s, cumulative) - cpu
        if left <= 0:
          return ("wall" if wall_s <= cumulative else "line"), None
        line_deadline = now + max(left, 0.05)
      remaining = line_deadline - now
      if exited.done():
        done, _ = await asyncio.wait({read}, timeout=min(remaining, _EXIT_GRACE_S))
        if not done:  # exited, yet someone holds the pipe: nothing more will come from the child
          return None, None
      else:
        done, _ = await asyncio.wait({read, exited}, timeout=remaining,
                                     return_when=asyncio.FIRST_COMPLETED)
        if not done:
          continue
      if read in done:
        try:
          line = read.result()
        except (ValueError, asyncio.LimitOverrunError):
          return None, Stop("a report line over the size cap")
        read = None
        if not line:
          return None, None
        stop = on_line(line)
        if stop is not None:
          return None, stop
        n_lines += 1
        if line_budget is not None:
          line_start = loop.time()
          budget = line_budget(n_lines)
          cumulative += budget
          line_deadline = min(start + wall_s, line_start + budget)
  finally:
    for task in (read, exited):
      if task is not None and not task.done():
        task.cancel()


async def run_child(job: dict, limits: SandboxLimits, on_line, iso: Isolation | None = None,
                    line_budget=None) -> RunOutcome:
  """Run one job in a fresh child under `iso` (default: `isolation()`); never raises for the
  child's sake.

  Args:
    job: the payload for `_sandbox_child.py` (the rlimits are filled in here).
    limits: resource limits.
    on_line: called with each report line (bytes); returns None to go on, or a Stop.
    iso: the isolation.
    line_budget: seconds each report line may take (see `_converse`); None: the wall limit only.

  Raises:
    SandboxError: the child could not be started at all.
  """
  iso = iso or isolation()
  warn_if_fallback(iso)
  job = dict(job, cpu_s=int(limits.cpu_s), memory_bytes=int(limits.memory_bytes),
             fsize_bytes=int(limits.fsize_bytes), load_s=float(limits.load_s),
             check_s=float(limits.check_s))
  payload = pickle.dumps(job, protocol=pickle.HIGHEST_PROTOCOL)
  async with _semaphore():
    loop = asyncio.get_running_loop()
    workdir = None
    if iso.mode == "bwrap":
      argv = list(iso.argv)
      if limits.tmp_bytes != DEFAULT_LIMITS.tmp_bytes:
        argv[argv.index("--size") + 1] = str(int(limits.tmp_bytes))
      argv += [sys.executable, "-I", "-c", CHILD_SOURCE]
      cwd, env = None, {"PATH": os.environ.get("PATH", "/usr/bin:/bin")}
    else:
      workdir = tempfile.mkdtemp(prefix="hieramas-sandbox-")
      argv = [sys.executable, "-I", "-c", CHILD_SOURCE]
      cwd, env = workdir, dict(_child_env(workdir), PATH=os.environ.get("PATH", "/usr/bin:/bin"))
    group = None
    try:
      try:
        group = cgroups.create(int(limits.pids_max), int(limits.memory_bytes), iso.host_uid)
      except OSError as e:
        raise SandboxError(f"cannot make the grading's cgroup: {e}") from e
      if group is not None:  # the child starts inside it (see cgroups.JOIN); exit 125 if it cannot join
        argv = group.prefix(argv)
      try:
        proc = await _spawn(argv, cwd=cwd, env=env, limit=max(int(limits.output_cap_bytes), 1 << 16),
                            spawn_kwargs=iso.spawn_kwargs())
      except OSError as e:
        raise SandboxError(f"cannot start the sandbox child: {e}") from e
      try:
        await proc.send(payload, timeout=limits.wall_s)  # a child dead before reading reports nothing: failed
        budget, stop = await _converse(proc, limits.wall_s, on_line, line_budget)
        if stop is not None and stop.let_exit:
          with contextlib.suppress(asyncio.TimeoutError):
            await asyncio.wait_for(_wait_returncode(proc), timeout=_EXIT_GRACE_S)
      finally:
        # Always: in the fallback the group may hold grandchildren after the child has exited;
        # under bubblewrap this kills the monitor, and with it the whole pid namespace.
        _kill_group(proc.pid)
        try:
          await asyncio.wait_for(_wait_returncode(proc), timeout=10)
        except asyncio.TimeoutError:
          pass
        proc.close()  # our ends of the pipes, even if an escaped process holds theirs
      return RunOutcome(proc.returncode, budget is not None, stop.reason if stop else None, budget)
    finally:
      if group is not None:  # kills whatever is left inside, then removes the group
        await loop.run_in_executor(None, group.remove)
      if workdir is not None:
        shutil.rmtree(workdir, ignore_errors=True)
