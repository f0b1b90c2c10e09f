"""HumanEval+ grading: untrusted programs run isolated; the verdict is made outside, by the parent.

Two guarantees, kept apart on purpose:

* **The verdict cannot be forged.** The child (`_sandbox_child.py`) runs the program and reports
  only the function's outputs for the task's base and plus inputs, one JSON line each. It never
  receives the expected outputs (nor the dataset's `check()`, whose source holds expected values);
  the parent compares every reported output with the canonical solution's, EvalPlus style
  (exact `==` on plain values, `np.allclose(rtol=1e-7, atol)` for floats, any root for
  `find_zero`). So whatever a program does to its own process (walking the frames to the
  reporting code, patching the encoder, writing to the result pipe, returning an object whose
  `__eq__` says yes) it can only report values it computed. The report is decoded as plain JSON
  (never unpickled) and read with a per-line size cap.
* **Isolation** (`isolation()`): each program runs under bubblewrap in new user, pid, network, IPC,
  UTS and mount namespaces: a read-only root that holds only /usr and the Python installation (not
  this repository, its data or the caches: no answer key is readable), a private tmpfs at /tmp
  (mounted first, so an interpreter under /tmp stays visible), a /dev of null, zero and random only,
  uid 65534 without capabilities, `--die-with-parent`, and a pid namespace whose end kills every
  process the program started. In every mode the child loads a seccomp filter (one process, a
  read-only file system, no ptrace, no network socket, signals to itself only: `seccomp_program`), so
  its rlimits (CPU, address space, open files) bound the whole grading, and the parent enforces each
  input's time limit too (`_converse`). Where a cgroup can be had, each child starts in a fresh
  pids + memory cgroup that bounds the whole sandbox and is removed afterwards (`cgroups.py`).
  Where bubblewrap cannot run, grading refuses (`SandboxError`
  naming the cause and the fix) unless `HIERAMAS_SANDBOX=fallback` asks for the fallback (a fresh
  process group in a temporary working directory, killed after every run); the mode is in every
  result's provenance (`experiment/provenance.py`).

Expected outputs and per-input times come from running the canonical solution the same way
(cached on disk under `paths.cache_dir()` as JSON, keyed by task id, data sha256 and harness
version). A candidate's per-input limit is max(MIN_TIME_LIMIT_S, 4 x canonical time) as in EvalPlus,
in CPU time (so that load does not change a grade; docs/benchmarks.md, "Sandbox limits").
Grades are cached by sha256 of (task id, code, data sha256, harness version, isolation mode). Both
caches are written by the parent only, each entry sealed with its key fields and a checksum
(`_seal`); a torn or edited entry is recomputed, never replayed.
"""

from __future__ import annotations

import asyncio
import contextlib
import dataclasses
import functools
import hashlib
import json
import logging
import math
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
from hieramas_jax.benchmarks.data import Item, data_sha256
from hieramas_jax.benchmarks.graders import Grade, extract_code
from hieramas_jax.errors import UserError
from hieramas_jax.fileio import atomic_write_bytes
from hieramas_jax.paths import PACKAGE_DIR, REPO_DIR, cache_dir

log = logging.getLogger(__name__)

CHILD_SCRIPT = pathlib.Path(child.__file__)
# Passed with `python -I -c`: inside bubblewrap the child's file is not visible (nor is the repo).
CHILD_SOURCE = CHILD_SCRIPT.read_text(encoding="utf-8")

# Bump when the harness or the comparison changes: old cached grades become stale.
HARNESS_VERSION = "6"

# EvalPlus defaults (evalplus/config.py): per-input limit = max(1 s, 4 x canonical time).
MIN_TIME_LIMIT_S = 1.0
TIME_LIMIT_FACTOR = 4.0

# `HIERAMAS_SANDBOX`: "auto" and "bwrap" (bubblewrap, or a SandboxError naming cause and fix),
# "fallback" (no bubblewrap: asked for, said once, recorded in every result's provenance).
SANDBOX_ENV = "HIERAMAS_SANDBOX"
SANDBOX_UID = 65534  # "nobody"
# After the child exits, how long a pipe still held open (by an escaped process in the fallback
# mode) may keep the parent reading.
_EXIT_GRACE_S = 1.0
# The parent's per-input budget is twice the child's own limit plus this (the child's SIGPROF fires
# first unless the program ignores it); the first input also gets the load time and the start.
# Budgets are CPU seconds of the child's process tree: when one runs out in wall time the parent reads
# the tree's CPU time and waits on while that is under the budget (a loaded machine does not fail a
# program), up to _WALL_FACTOR x the budget in wall time (a program that sleeps uses no CPU).
_LINE_GRACE_S = 2.0
_STARTUP_GRACE_S = 3.0
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
# Slower in wall time only because the machine may be loaded when expected outputs are made.
CANONICAL_LIMITS = SandboxLimits(wall_s=300.0, cpu_s=300, load_s=60.0, output_cap_bytes=64 << 20)


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
  """How a run ended: the exit code (None if it had to be killed), whether the wall limit hit,
  and the parent's own reason for stopping early (a decision, or a malformed report)."""

  returncode: int | None
  timed_out: bool
  stopped: str | None = None


# One concurrency bound per event loop (asyncio primitives belong to one loop).
_SEMAPHORES: "weakref.WeakKeyDictionary[asyncio.AbstractEventLoop, asyncio.Semaphore]" = (
    weakref.WeakKeyDictionary())
_EXPECTED_LOCKS: "weakref.WeakKeyDictionary[asyncio.AbstractEventLoop, dict]" = (
    weakref.WeakKeyDictionary())
_EXPECTED_MEMO: dict[tuple[str, str], "_Expected"] = {}


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


async def _converse(proc: _Child, wall_s: float, on_line, line_budget=None) -> tuple[bool, Stop | None]:
  """Feed report lines to `on_line` until it decides (returns a Stop), EOF, or a budget runs out.

  `line_budget(n)`, if given, is how many seconds report line n may take after line n - 1 (or
  after the start): the per-input limits enforced from outside, so a program that ignores or
  blocks the child's SIGPROF is still stopped near its input's limit, not at the wall limit.
  `wall_s` is the budget of the whole child. Budgets are CPU seconds of the child's process tree,
  read from /proc only when one has passed in wall time (so that load does not fail a program):
  the tree may use, by report line n, the budgets of lines 0..n together, and `wall_s` in all; and
  no line waits more than `_WALL_FACTOR` x its budget in wall time (a sleeping program uses no CPU).

  Returns:
    (timed_out, the Stop or None).
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
        if cpu is None or now - line_start >= _WALL_FACTOR * budget or now - start >= _WALL_FACTOR * wall_s:
          return True, None
        left = min(wall_s, cumulative) - cpu
        if left <= 0:
          return True, None
        line_deadline = now + max(left, 0.05)
      remaining = line_deadline - now
      if exited.done():
        done, _ = await asyncio.wait({read}, timeout=min(remaining, _EXIT_GRACE_S))
        if not done:  # exited, yet someone holds the pipe: nothing more will come from the child
          return False, None
      else:
        done, _ = await asyncio.wait({read, exited}, timeout=remaining,
                                     return_when=asyncio.FIRST_COMPLETED)
        if not done:
          continue
      if read in done:
        try:
          line = read.result()
        except (ValueError, asyncio.LimitOverrunError):
          return False, Stop("a report line over the size cap")
        read = None
        if not line:
          return False, None
        stop = on_line(line)
        if stop is not None:
          return False, stop
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
        timed_out, stop = await _converse(proc, limits.wall_s, on_line, line_budget)
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
      return RunOutcome(proc.returncode, timed_out, stop.reason if stop else None)
    finally:
      if group is not None:  # kills whatever is left inside, then removes the group
        await loop.run_in_executor(None, group.remove)
      if workdir is not None:
        shutil.rmtree(workdir, ignore_errors=True)


# ---------------------------------------------------------------------------------------------
# Expected outputs (canonical solution).


@dataclasses.dataclass
class _Expected:
  """The canonical solution's report: per input the encoded output or its digest, and times."""

  outputs: list[dict]
  times: list[float]
  n_base: int
  check_time: float
  values: dict[int, object] = dataclasses.field(default_factory=dict)

  def value(self, i: int):
    if i not in self.values:
      self.values[i] = child.decode(self.outputs[i]["out"])
    return self.values[i]


def _inputs(item: Item) -> list:
  return list(item.meta["base_input"]) + list(item.meta["plus_input"])


def _expected_path(item: Item) -> pathlib.Path:
  key = hashlib.sha256(f"{item.id}\0{data_sha256(item.benchmark)}\0{HARNESS_VERSION}".encode())
  return cache_dir() / "humaneval_expected" / f"{key.hexdigest()}.json"


def _seal(record: dict) -> bytes:
  """A cache entry with the sha256 of its own canonical JSON: an edited entry no longer matches."""
  body = json.dumps(record, sort_keys=True, separators=(",", ":"))
  return json.dumps(dict(record, sha256=hashlib.sha256(body.encode()).hexdigest()), sort_keys=True).encode()


def _unseal(path: pathlib.Path, **expect) -> dict | None:
  """The entry at `path` if it is whole, its checksum holds and it is for `expect`; else None.

  A missing entry is silent; a torn, edited or foreign one is said (naming the file) and recomputed,
  never replayed. The parent alone writes these files: no graded program can see them (bubblewrap)."""
  try:
    text = path.read_text(encoding="utf-8")
  except FileNotFoundError:
    return None
  except OSError as e:
    log.warning("%s: unreadable (%s); recomputing it", path, e)
    return None
  try:
    data = json.loads(text)
    claimed = data.pop("sha256")
    body = json.dumps(data, sort_keys=True, separators=(",", ":"))
    ok = claimed == hashlib.sha256(body.encode()).hexdigest() and all(data.get(k) == v for k, v in expect.items())
  except (ValueError, TypeError, KeyError, AttributeError, RecursionError):
    ok = False
  if not ok:
    log.warning("%s: torn, edited or not this entry's (checksum or key fields differ); recomputing it "
                "instead of replaying it", path)
    return None
  return data


def _load_expected(path: pathlib.Path, item: Item) -> _Expected | None:
  n = len(_inputs(item))
  data = _unseal(path, task_id=item.id, data_sha256=data_sha256(item.benchmark), harness=HARNESS_VERSION)
  if data is None:
    return None
  try:
    exp = _Expected(list(data["outputs"]), [float(t) for t in data["times"]], int(data["n_base"]),
                    float(data["check_time"]))
  except (ValueError, KeyError, TypeError):
    return None
  if len(exp.outputs) != n or len(exp.times) != n:
    return None
  return exp


async def _run_expected(item: Item) -> _Expected:
  inputs = _inputs(item)
  records: list[dict] = []
  check_time = [0.0]
  failure: list[str] = []

  def on_line(line: bytes) -> Stop | None:
    try:
      rec = json.loads(line)
    except ValueError:
      failure.append("a malformed report line")
      return Stop("malformed")
    if "check_time" in rec:
      check_time[0] = float(rec["check_time"])
    elif "done" in rec:
      return Stop("done", let_exit=True)
    elif "error" in rec:
      where = f"input {rec['i']}" if "i" in rec else rec.get("stage", "?")
      failure.append(f"{where}: {rec['error']}")
      return Stop("error")
    elif rec.get("i") == len(records) and ("out" in rec or "digest" in rec):
      records.append(rec)
    else:
      failure.append("an out-of-order report line")
      return Stop("malformed")
    return None

  job = {"mode": "expected", "program": item.question + item.answer,
         "entry_point": item.meta["entry_point"], "test": item.meta["test"], "inputs": inputs,
         "time_limits": [CANONICAL_LIMITS.load_s] * len(inputs)}
  outcome = await run_child(job, CANONICAL_LIMITS, on_line)
  if failure or len(records) != len(inputs):
    raise SandboxError(f"{item.id}: the canonical solution failed in the sandbox: "
                       f"{failure[0] if failure else f'{len(records)} of {len(inputs)} outputs'} "
                       f"(exit {outcome.returncode}, timed out: {outcome.timed_out})")
  outputs = [{k: rec[k] for k in ("out", "digest") if k in rec} for rec in records]
  return _Expected(outputs, [float(rec.get("t", 0.0)) for rec in records],
                   len(item.meta["base_input"]), check_time[0])


async def expected_outputs(item: Item) -> _Expected:
  """Outputs and timings of the canonical solution on the task's base and plus inputs.

  Computed once per (task, data file) in the sandbox and cached on disk; within one process
  also in memory.

  Raises:
    SandboxError: the canonical solution failed its own tests (a broken data file or harness).
  """
  memo_key = (item.id, data_sha256(item.benchmark))
  if memo_key in _EXPECTED_MEMO:
    return _EXPECTED_MEMO[memo_key]
  loop = asyncio.get_running_loop()
  locks = _EXPECTED_LOCKS.setdefault(loop, {})
  lock = locks.setdefault(item.id, asyncio.Lock())
  async with lock:
    if memo_key in _EXPECTED_MEMO:
      return _EXPECTED_MEMO[memo_key]
    path = _expected_path(item)
    expected = _load_expected(path, item)
    if expected is None:
      expected = await _run_expected(item)
      atomic_write_bytes(path, _seal({
          "task_id": item.id, "data_sha256": data_sha256(item.benchmark), "harness": HARNESS_VERSION,
          "outputs": expected.outputs, "times": expected.times, "n_base": expected.n_base,
          "check_time": expected.check_time}))
    _EXPECTED_MEMO[memo_key] = expected
    return expected


# ---------------------------------------------------------------------------------------------
# Judging a candidate, outside the sandbox.


def _poly(xs, x):
  return sum(coeff * math.pow(x, i) for i, coeff in enumerate(xs))


def compare_output(entry_point: str, inp, got: dict, expected: _Expected, i: int, atol: float
                   ) -> str | None:
  """None if the reported output `got` (a report record) matches expected output `i`, else why not.

  EvalPlus's comparison (evalplus/eval/__init__.py): exact `==`; for float outputs (or a task
  atol) same type and length and `np.allclose(rtol=1e-7, atol)`; `find_zero` accepts any x with
  |poly(xs, x)| <= atol. Large outputs compare by the digest of their canonical encoding.
  """
  exp = expected.outputs[i]
  try:
    if entry_point == "find_zero":
      x = child.decode(got["out"]) if "out" in got else None
      if type(x) not in (int, float):
        return "not a number"
      return None if abs(_poly(*inp, x)) <= atol else "not a root"
    if "digest" in exp or "digest" in got:
      got_digest = got.get("digest") or child.tree_digest(got["out"])
      exp_digest = exp.get("digest") or child.tree_digest(exp["out"])
      return None if got_digest == exp_digest else "output differs"
    out = child.decode(got["out"])
    want = expected.value(i)
    if atol == 0 and child.is_floats(want):
      atol = 1e-6
    if out == want:
      return None
    if atol == 0:
      return "output differs"
    if type(out) is not type(want):
      return f"type {type(out).__name__} != {type(want).__name__}"
    if isinstance(want, (list, tuple)) and len(out) != len(want):
      return "length differs"
    import numpy as np  # pylint: disable=import-outside-toplevel
    return None if bool(np.allclose(out, want, rtol=1e-07, atol=atol)) else "not close"
  except (ValueError, TypeError, KeyError, OverflowError, RecursionError, ArithmeticError):
    return "output cannot be compared"


class _Judge:
  """Reads a candidate's report line by line and decides as soon as it can."""

  def __init__(self, item: Item, expected: _Expected, code: str):
    self.entry_point = item.meta["entry_point"]
    self.atol = float(item.meta["atol"] or 0.0)
    self.inputs = _inputs(item)
    self.expected = expected
    self.code = code
    self.matched = 0
    self.grade: Grade | None = None

  def _where(self, i: int) -> str:
    n_base = self.expected.n_base
    return f"base test {i}" if i < n_base else f"plus test {i - n_base}"

  def _decide(self, correct: bool, detail: str) -> Stop:
    self.grade = Grade(correct, self.code, detail)
    return Stop(detail, let_exit=correct)  # a failing program is killed at once

  def on_line(self, line: bytes) -> Stop | None:
    try:
      rec = json.loads(line)
    except (ValueError, RecursionError):
      return self._decide(False, "malformed report from the sandbox")
    if type(rec) is not dict:
      return self._decide(False, "malformed report from the sandbox")
    if "done" in rec and self.matched == len(self.inputs):  # only reached for a task without inputs
      return self._decide(True, "passed base and plus tests")
    if rec.get("stage") == "seccomp":  # the sandbox did not engage: never a grade
      raise SandboxError(f"{rec.get('error')}; grading refuses to run programs without it "
                         "(is this a Linux x86_64/aarch64 kernel with seccomp?)")
    if "i" not in rec:  # the child's own account of a failure before the first input
      if rec.get("stage") in ("load", "guard") and isinstance(rec.get("error"), str):
        return self._decide(False, f"failed at {rec['stage']}: {rec['error'][:300]}")
      return self._decide(False, "malformed report from the sandbox")
    i = rec.get("i")
    if type(i) is not int or i != self.matched:
      return self._decide(False, "malformed report from the sandbox")
    where = self._where(i)
    if "error" in rec:
      return self._decide(False, f"failed at {where}: {str(rec['error'])[:300]}")
    why = compare_output(self.entry_point, self.inputs[i], rec, self.expected, i, self.atol)
    if why is not None:
      return self._decide(False, f"failed at {where}: {why}")
    self.matched += 1
    if self.matched == len(self.inputs):
      return self._decide(True, "passed base and plus tests")
    return None

  def result(self, outcome: RunOutcome) -> Grade:
    if self.grade is not None:
      return self.grade
    if outcome.stopped:
      return Grade(False, self.code, f"failed: {outcome.stopped}")
    if outcome.timed_out:
      return Grade(False, self.code, "time limit exceeded (killed by the grader)")
    if self.matched == 0:
      return Grade(False, self.code, f"no result from the sandbox (exit code {outcome.returncode})")
    return Grade(False, self.code, f"no result for {self._where(self.matched)} "
                                   f"(exit code {outcome.returncode})")


def assemble_program(item: Item, code: str) -> str | None:
  """The program to run for extracted code, or None when it cannot compile.

  Code that defines the entry point runs after the whole prompt (its imports and helper
  functions, e.g. `poly` for `find_zero`; the prompt's own stub is then redefined). Code that
  does not is the body that continues the prompt; if it compiles only once indented, it is
  indented (models often drop the body's leading indentation).
  """
  prompt = item.question
  entry_point = item.meta["entry_point"]
  from hieramas_jax.benchmarks.graders import _defines  # pylint: disable=import-outside-toplevel
  if _defines(code, entry_point):
    candidates = [prompt.rstrip() + "\n\n\n" + code]
  else:
    body = code if code.endswith("\n") else code + "\n"
    indented = "".join(("    " + ln if ln.strip() else ln) for ln in body.splitlines(True))
    candidates = [prompt + body, prompt + indented]
  for program in candidates:
    try:
      compile(program, "<candidate>", "exec")
    except (SyntaxError, ValueError, OverflowError, RecursionError, MemoryError):
      continue
    return program
  return None


def _time_limits(times: list[float]) -> list[float]:
  return [max(MIN_TIME_LIMIT_S, TIME_LIMIT_FACTOR * t) for t in times]


def _grade_cache_path(item: Item, code: str, mode: str | None = None) -> pathlib.Path:
  mode = mode or isolation().mode
  key = hashlib.sha256(
      f"{item.id}\0{code}\0{data_sha256(item.benchmark)}\0{HARNESS_VERSION}\0{mode}".encode())
  return cache_dir() / "humaneval_grades" / key.hexdigest()[:2] / f"{key.hexdigest()}.json"


async def run_candidate(item: Item, code: str, limits: SandboxLimits = DEFAULT_LIMITS,
                        *, use_cache: bool = True, iso: Isolation | None = None) -> Grade:
  """Run extracted code on the task's base and plus inputs; it passes only if every output matches.

  Args:
    item: the HumanEval+ task.
    code: the extracted code (see `assemble_program`).
    limits: resource limits (the per-input and wall limits grow with the canonical solution's time).
    use_cache: read and write the on-disk grade cache.
    iso: the isolation (default: `isolation()`).
  """
  iso = iso or isolation()
  cache_path = _grade_cache_path(item, code, iso.mode)
  key = {"task_id": item.id, "code_sha256": hashlib.sha256(code.encode()).hexdigest(),
         "data_sha256": data_sha256(item.benchmark), "harness": HARNESS_VERSION, "mode": iso.mode}
  if use_cache:
    cached = _unseal(cache_path, **key)
    if cached is not None and type(cached.get("correct")) is bool and isinstance(cached.get("detail"), str):
      return Grade(cached["correct"], code, cached["detail"])
  program = assemble_program(item, code)
  if program is None:
    grade = Grade(False, code, "syntax error")
  else:
    expected = await expected_outputs(item)
    job = {"mode": "candidate", "program": program, "entry_point": item.meta["entry_point"],
           "inputs": _inputs(item), "time_limits": _time_limits(expected.times)}
    # Tasks whose canonical solution itself needs seconds (HumanEval/15, /139...) get a
    # proportionally longer wall and CPU budget; a cheap task keeps the plain limits.
    wall_s = max(limits.wall_s, limits.load_s + 2 * TIME_LIMIT_FACTOR * sum(expected.times))
    run_limits = dataclasses.replace(limits, wall_s=wall_s, cpu_s=max(limits.cpu_s, int(wall_s) + 1))
    judge = _Judge(item, expected, code)
    limits_s = job["time_limits"]

    def line_budget(n: int) -> float:  # twice the child's own limit plus a grace: a loaded machine, and
      first = limits.load_s + _STARTUP_GRACE_S if n == 0 else 0.0  # the output's encoding is not timed
      return first + 2 * (limits_s[n] if n < len(limits_s) else 0.0) + _LINE_GRACE_S

    outcome = await run_child(job, run_limits, judge.on_line, iso, line_budget)
    grade = judge.result(outcome)
  if use_cache:
    atomic_write_bytes(cache_path, _seal(dict(key, correct=grade.correct, detail=grade.detail)))
  return grade


async def grade_humaneval_async(item: Item, text: str | None,
                                limits: SandboxLimits = DEFAULT_LIMITS) -> Grade:
  """Extract the code from a model's answer and grade it in the sandbox."""
  code = extract_code(text, item.meta["entry_point"])
  if code is None:
    return Grade(False, None, "no code found")
  return await run_candidate(item, code, limits)
