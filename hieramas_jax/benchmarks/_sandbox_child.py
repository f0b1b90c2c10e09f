"""The child side of the sandbox: runs a program and reports its function's outputs on given inputs.

What it runs is the caller's: HumanEval+ candidates and canonical solutions (`humaneval.py`, modes
"candidate" and "expected"), AFlow's model-written code (`methods/aflow/execute.py`).

Run as `python -I -c SOURCE` (the source of this file), reading a pickled job from stdin; inside
bubblewrap it sees neither this repository nor the suite's cache, and must not need them, so it is
self-contained (stdlib only). It never decides pass or fail: it does not know the expected
outputs. It writes one JSON line per input (`{"i": 3, "out": <tree>}`, `{"i": 3, "digest": ...}` or
`{"i": 3, "error": ...}`), and the parent, outside the sandbox, compares each with the canonical
solution's output (`humaneval.compare_output`). Whatever the program does to this process (patching the encoder, writing to the
result pipe, walking the frames) it can only report values it computed itself.

Order of events:
  1. read the job from stdin (program, inputs, per-input time limits, rlimits);
  2. set resource limits (CPU seconds, address space, file size, no core dumps) and load the
     seccomp filter (`seccomp_program`): no new processes, a read-only file system, no ptrace, no
     network socket, no io_uring, so processes, memory and inodes are bounded for the whole run, not
     per process, and nothing of the host changes;
  3. keep a private duplicate of stdout for the report, point fds 0-2 at /dev/null, so untrusted
     prints cost nothing;
  4. for candidates, apply the reliability guard (EvalPlus style: no fork, kill, system,
     subprocess, socket, rmtree; file removal only inside the working directory);
  5. run the program's top level; for the canonical solution also the dataset's `check()`;
  6. call the function on every input with a per-input time limit and report each output.

The encoding (`encode`, shared with the parent, which imports this module) is a JSON tree of plain
values only: None, bool, int, float, str as themselves, lists as lists, and tagged objects for the
rest (`{"tuple": [...]}`, `{"set": [...]}`, `{"dict": [[k, v], ...]}`, `{"int": "hex"}` for big ints,
`{"bytes": "hex"}`, `{"complex": [re, im]}`). Sets and dicts are sorted by their encoded form, so
an encoding is canonical and its sha256 is the digest that stands in for a large output.
"""

import builtins
import copy
import faulthandler
import hashlib
import json
import os
import pickle
import resource
import struct
import signal
import sys
import time

# Outputs whose encoding is longer than this travel as a digest of the canonical encoding (unless
# they are floats, compared with a tolerance): some tasks (HumanEval/15's long strings) return
# megabytes per input.
DIGEST_OVER_BYTES = 1 << 12
# Integers within this bound are plain JSON numbers; larger ones are hex strings (Python's
# int <-> decimal-str conversion is limited to 4300 digits).
_PLAIN_INT = 1 << 53
_MAX_FILES = 64


class _TimeLimit(BaseException):
  """Raised by SIGPROF when one test input overruns its CPU time. A BaseException, so that candidate code
  with a bare `except Exception` cannot swallow it."""


class Unencodable(TypeError):
  """An output of a type the parent cannot compare (a generator, a custom object, a subclass)."""


def _on_alarm(signum, frame):
  raise _TimeLimit()


def _dumps(tree):
  return json.dumps(tree, separators=(",", ":"), ensure_ascii=True)


def encode(x):
  """The canonical JSON tree of a plain Python value.

  Exact types only (a subclass of int or list with its own `__eq__` is refused): the parent
  compares plain values, so a returned object can never decide its own comparison. numpy scalars
  become their Python value (`np.int64(3) == 3` holds under EvalPlus too).
  """
  t = type(x)
  if x is None or t is bool or t is str or t is float:
    return x
  if t is int:
    return x if -_PLAIN_INT < x < _PLAIN_INT else {"int": format(x, "x")}
  if t is list:
    return [encode(v) for v in x]
  if t is tuple:
    return {"tuple": [encode(v) for v in x]}
  if t is set or t is frozenset:
    return {t.__name__: sorted((encode(v) for v in x), key=_dumps)}
  if t is dict:
    return {"dict": sorted(([encode(k), encode(v)] for k, v in x.items()), key=_dumps)}
  if t is bytes:
    return {"bytes": x.hex()}
  if t is complex:
    return {"complex": [x.real, x.imag]}
  numpy = sys.modules.get("numpy")
  if numpy is not None and isinstance(x, numpy.generic):
    return encode(x.item())
  raise Unencodable(f"an output of type {t.__name__} cannot be compared")


_TAGS = {"tuple", "set", "frozenset", "dict", "int", "bytes", "complex"}


def decode(tree):
  """The value of a tree made by `encode`. Raises ValueError/TypeError on anything else."""
  t = type(tree)
  if tree is None or t is bool or t is str or t is float or t is int:
    return tree
  if t is list:
    return [decode(v) for v in tree]
  if t is not dict or len(tree) != 1:
    raise ValueError("not an encoded value")
  (tag, body), = tree.items()
  if tag not in _TAGS:
    raise ValueError(f"unknown tag {tag!r}")
  if tag == "int":
    return int(body, 16)
  if tag == "bytes":
    return bytes.fromhex(body)
  if tag == "complex":
    re_, im = body
    return complex(float(re_), float(im))
  if type(body) is not list:
    raise ValueError(f"{tag} body is not a list")
  if tag == "tuple":
    return tuple(decode(v) for v in body)
  if tag == "set":
    return {decode(v) for v in body}
  if tag == "frozenset":
    return frozenset(decode(v) for v in body)
  return {decode(k): decode(v) for k, v in body}


def tree_digest(tree):
  """sha256 of a canonical encoding: equal for equal outputs of the same types."""
  return hashlib.sha256(_dumps(tree).encode("ascii")).hexdigest()


def is_floats(x):
  """EvalPlus's test for outputs compared with a tolerance."""
  if isinstance(x, float):
    return True
  if isinstance(x, (list, tuple)) and x:
    return all(isinstance(i, float) for i in x)
  return False


def output_message(index, out):
  """The report line for one output: the tree, or its digest when large (floats never)."""
  tree = encode(out)
  text = _dumps(tree)
  if len(text) > DIGEST_OVER_BYTES and not is_floats(out):
    return {"i": index, "digest": hashlib.sha256(text.encode("ascii")).hexdigest()}
  return {"i": index, "out": tree}


def _set_limits(cpu_s, memory_bytes, fsize_bytes):
  resource.setrlimit(resource.RLIMIT_CPU, (cpu_s, cpu_s + 1))
  resource.setrlimit(resource.RLIMIT_AS, (memory_bytes, memory_bytes))
  resource.setrlimit(resource.RLIMIT_DATA, (memory_bytes, memory_bytes))
  resource.setrlimit(resource.RLIMIT_FSIZE, (fsize_bytes, fsize_bytes))
  resource.setrlimit(resource.RLIMIT_CORE, (0, 0))
  # Open files (and so ptys, pipes, sockets) of the one process seccomp allows.
  resource.setrlimit(resource.RLIMIT_NOFILE, (_MAX_FILES, _MAX_FILES))
  try:  # not enforced for root, but costs nothing where it is
    resource.setrlimit(resource.RLIMIT_NPROC, (64, 64))
  except (ValueError, OSError):
    pass


# seccomp: the syscalls a graded program has no use for. Numbers per architecture (asm/unistd.h).
_AUDIT_ARCH = {"x86_64": 0xC000003E, "aarch64": 0xC00000B7}
_NR = {
    "x86_64": {"clone": 56, "fork": 57, "vfork": 58, "clone3": 435, "open": 2, "creat": 85, "mkdir": 83,
               "mknod": 133, "symlink": 88, "link": 86, "openat": 257, "mkdirat": 258, "mknodat": 259,
               "linkat": 265, "symlinkat": 266, "openat2": 437, "ptrace": 101, "process_vm_readv": 310,
               "process_vm_writev": 311, "io_uring_setup": 425, "memfd_create": 319, "unshare": 272,
               "setns": 308, "mount": 165, "bpf": 321, "perf_event_open": 298, "userfaultfd": 323,
               "socket": 41, "kill": 62, "tkill": 200, "tgkill": 234, "rt_sigqueueinfo": 129,
               "rt_tgsigqueueinfo": 297, "pidfd_send_signal": 424, "pidfd_open": 434, "unlink": 87,
               "unlinkat": 263, "rmdir": 84, "rename": 82, "renameat": 264, "renameat2": 316, "truncate": 76,
               "chmod": 90, "fchmodat": 268, "chown": 92, "lchown": 94, "fchownat": 260},
    "aarch64": {"clone": 220, "clone3": 435, "openat": 56, "mkdirat": 34, "mknodat": 33, "linkat": 37,
                "symlinkat": 36, "openat2": 437, "ptrace": 117, "process_vm_readv": 270,
                "process_vm_writev": 271, "io_uring_setup": 425, "memfd_create": 279, "unshare": 97,
                "setns": 268, "mount": 40, "bpf": 280, "perf_event_open": 241, "userfaultfd": 282,
                "socket": 198, "kill": 129, "tkill": 130, "tgkill": 131, "rt_sigqueueinfo": 138,
                "rt_tgsigqueueinfo": 240, "pidfd_send_signal": 424, "pidfd_open": 434, "unlinkat": 35,
                "renameat": 38, "renameat2": 276, "truncate": 45, "fchmodat": 53, "fchownat": 54},
}
_EPERM, _EROFS, _ENOSYS = 1, 30, 38
_CLONE_THREAD = 0x10000
# O_WRONLY | O_RDWR | O_CREAT | O_TRUNC | O_APPEND | __O_TMPFILE (the same on x86_64 and aarch64)
_WRITES = 0o1 | 0o2 | 0o100 | 0o1000 | 0o2000 | 0o20000000
_READ_ONLY_FS = ("creat", "mkdir", "mknod", "symlink", "link", "mkdirat", "mknodat", "linkat", "symlinkat",
                 "unlink", "unlinkat", "rmdir", "rename", "renameat", "renameat2", "truncate")


def seccomp_program(machine=None, pid=None):
  """The seccomp BPF program (bytes of `struct sock_filter`s) every graded program runs under.

  Why: per-process rlimits do not bound a sandbox (RLIMIT_NPROC is not enforced for host uid 0,
  RLIMIT_AS is per process, a tmpfs's inode count is unbounded). Without fork (threads only:
  clone with CLONE_THREAD) one process holds everything, so RLIMIT_AS bounds the memory and
  RLIMIT_CPU the CPU time of the whole run; the file system is read-only to it (open for writing,
  creating, truncating or appending, mkdir, mknod, link, symlink, unlink, rename, truncate, chmod,
  chown, memfd), so no inode or tmpfs page is spent and, in the fallback too, no host file, cache or
  result can be changed (the report goes to an fd opened before the filter). No ptrace,
  process_vm_*, io_uring (it would open files round this filter), namespaces, mount, bpf. Sockets
  only of AF_UNIX (no network, whatever the mode); signals only to itself (`pid`: kill with pid
  `pid` or 0, its own group; tgkill of its own threads), so not to the grader in the fallback.
  clone3 and openat2 answer ENOSYS (their flags sit behind a pointer), so libc falls back to
  clone and openat, which are checked. Another architecture is refused: KeyError.
  """
  machine = machine or os.uname().machine
  pid = os.getpid() if pid is None else pid
  nr = _NR[machine]
  ld, jeq, jset, jge, ret = 0x20, 0x15, 0x45, 0x35, 0x06
  allow, kill = 0x7FFF0000, 0x80000000

  def err(errno):
    return 0x00050000 | errno

  prog = [(ld, 0, 0, 4), (jeq, 1, 0, _AUDIT_ARCH[machine]), (ret, 0, 0, kill), (ld, 0, 0, 0)]
  if machine == "x86_64":  # the x32 ABI's numbers would miss every rule below
    prog += [(jge, 0, 1, 0x40000000), (ret, 0, 0, err(_EPERM))]
  flag_arg = {"open": 1, "openat": 2}
  for name, number in sorted(nr.items(), key=lambda kv: kv[1]):
    if name == "clone":  # threads only
      prog += [(jeq, 0, 4, number), (ld, 0, 0, 16), (jset, 0, 1, _CLONE_THREAD), (ret, 0, 0, allow),
               (ret, 0, 0, err(_EPERM))]
    elif name == "socket":  # AF_UNIX only
      prog += [(jeq, 0, 4, number), (ld, 0, 0, 16), (jeq, 0, 1, 1), (ret, 0, 0, allow), (ret, 0, 0, err(_EPERM))]
    elif name == "kill":  # itself, or its own process group (it leads one: a new session)
      prog += [(jeq, 0, 5, number), (ld, 0, 0, 16), (jeq, 2, 0, pid), (jeq, 1, 0, 0), (ret, 0, 0, err(_EPERM)),
               (ret, 0, 0, allow)]
    elif name == "tgkill":  # its own threads
      prog += [(jeq, 0, 4, number), (ld, 0, 0, 16), (jeq, 0, 1, pid), (ret, 0, 0, allow), (ret, 0, 0, err(_EPERM))]
    elif name in flag_arg:  # reading only
      prog += [(jeq, 0, 4, number), (ld, 0, 0, 16 + 8 * flag_arg[name]), (jset, 0, 1, _WRITES),
               (ret, 0, 0, err(_EROFS)), (ret, 0, 0, allow)]
    else:
      errno = _ENOSYS if name in ("clone3", "openat2") else (_EROFS if name in _READ_ONLY_FS else _EPERM)
      prog += [(jeq, 0, 1, number), (ret, 0, 0, err(errno))]
  prog.append((ret, 0, 0, allow))
  return b"".join(struct.pack("<HBBI", *ins) for ins in prog)


def _load_seccomp():
  """Load `seccomp_program` into this process (irrevocable; inherited by threads)."""
  import ctypes  # pylint: disable=import-outside-toplevel
  program = seccomp_program()
  libc = ctypes.CDLL(None, use_errno=True)

  class SockFprog(ctypes.Structure):
    _fields_ = [("len", ctypes.c_ushort), ("filter", ctypes.c_void_p)]

  buf = ctypes.create_string_buffer(program, len(program))
  fprog = SockFprog(len(program) // 8, ctypes.cast(buf, ctypes.c_void_p))
  if libc.prctl(38, 1, 0, 0, 0) != 0:  # PR_SET_NO_NEW_PRIVS
    raise OSError(ctypes.get_errno(), "prctl(PR_SET_NO_NEW_PRIVS) failed")
  if libc.prctl(22, 2, ctypes.byref(fprog), 0, 0) != 0:  # PR_SET_SECCOMP, SECCOMP_MODE_FILTER
    raise OSError(ctypes.get_errno(), "prctl(PR_SET_SECCOMP) failed")


def _denied(name):
  def deny(*args, **kwargs):
    raise PermissionError(f"{name} is disabled in the sandbox")
  return deny


def _reliability_guard(workdir):
  """Disable what untrusted code has no business calling (after EvalPlus's guard).

  Not a security boundary (ctypes remains): it turns the usual accidents and hostile one-liners
  (fork bombs, rm -rf, kill, sockets) into exceptions with a clear reason. The isolation is the
  sandbox around this process (bubblewrap's namespaces), and the verdict is the parent's.
  """
  # Import what is patched below before patching os: their imports call os functions.
  import shutil
  import socket
  import subprocess
  import threading  # noqa: F401  (registers fork hooks through os at import)
  faulthandler.disable()
  builtins.exit = None
  builtins.quit = None
  builtins.help = None
  os.environ["OMP_NUM_THREADS"] = "1"
  real_abspath = os.path.abspath
  real = {name: getattr(os, name) for name in ("remove", "unlink", "rmdir")}
  root = real_abspath(workdir)

  def inside_only(name):
    def guarded(path, *args, **kwargs):
      target = real_abspath(os.fsdecode(path)) if isinstance(path, (str, bytes, os.PathLike)) else ""
      if not (target == root or target.startswith(root + os.sep)):
        raise PermissionError(f"os.{name} outside the sandbox directory is disabled")
      return real[name](path, *args, **kwargs)
    return guarded

  for name in ("remove", "unlink", "rmdir"):
    setattr(os, name, inside_only(name))
  for name in ("kill", "killpg", "system", "popen", "removedirs", "fchdir", "setuid",
               "setgid", "setsid", "setpgid", "setpgrp", "fork", "forkpty", "vfork", "rename",
               "renames", "replace", "truncate", "fchmod", "fchown", "chmod", "chown", "lchown",
               "chroot", "chdir", "execv", "execve", "execvp", "execvpe", "execl", "execle",
               "execlp", "execlpe", "spawnv", "spawnve", "spawnvp", "spawnvpe", "spawnl",
               "spawnle", "spawnlp", "spawnlpe", "posix_spawn", "posix_spawnp", "plock", "nice",
               "sched_setaffinity"):
    if hasattr(os, name):
      setattr(os, name, _denied(f"os.{name}"))
  for name in ("rmtree", "move", "chown", "copytree"):
    setattr(shutil, name, _denied(f"shutil.{name}"))
  for name in ("Popen", "run", "call", "check_call", "check_output", "getoutput",
               "getstatusoutput"):
    setattr(subprocess, name, _denied(f"subprocess.{name}"))
  for name in ("socket", "socketpair", "create_connection", "create_server", "fromfd"):
    setattr(socket, name, _denied(f"socket.{name}"))
  for name in ("ipdb", "joblib", "resource", "psutil", "tkinter", "multiprocessing",
               "concurrent.futures.process", "pty", "_posixsubprocess"):
    sys.modules[name] = None


def _short(e):
  text = f"{type(e).__name__}: {e}" if str(e) else type(e).__name__
  return text[:300]


def main():
  job = pickle.loads(sys.stdin.buffer.read())
  workdir = os.getcwd()
  _set_limits(job["cpu_s"], job["memory_bytes"], job["fsize_bytes"])

  result_fd = os.dup(1)
  devnull = os.open(os.devnull, os.O_RDWR)
  for fd in (0, 1, 2):
    os.dup2(devnull, fd)
  # Private references: the program may rebind os.write, os._exit or json.dumps. That can only
  # garble or silence the report (graded failed), never add an output the program did not compute.
  write = os.write
  exit_now = os._exit
  dumps = json.dumps
  # CPU time of the process (all threads), not wall time: a verdict that does not depend on the
  # machine's load (docs/benchmarks.md, "Sandbox limits").
  perf = time.process_time
  setitimer = signal.setitimer
  message_for = output_message

  def emit(record):
    data = (dumps(record, separators=(",", ":")) + "\n").encode()
    while data:
      data = data[write(result_fd, data):]

  def finish(record):
    emit(record)
    exit_now(0)

  try:  # before any untrusted code; a filter that cannot load is a failed sandbox, never skipped
    _load_seccomp()
  except BaseException as e:  # pylint: disable=broad-except
    finish({"stage": "seccomp", "error": "the seccomp filter did not load: " + _short(e)})
  signal.signal(signal.SIGPROF, _on_alarm)
  mode = job["mode"]
  if mode == "candidate":
    try:
      _reliability_guard(workdir)
    except BaseException as e:  # pylint: disable=broad-except
      finish({"stage": "guard", "error": "sandbox guard failed: " + _short(e)})

  def limited(seconds, fn, *args):
    setitimer(signal.ITIMER_PROF, seconds)
    try:
      return fn(*args)
    finally:
      setitimer(signal.ITIMER_PROF, 0)

  # Not "__main__": a candidate's `if __name__ == "__main__":` demo (often reading stdin)
  # must not run, as under EvalPlus, whose exec globals have no __name__ of their own.
  namespace = {"__name__": "__sandbox__", "__builtins__": builtins}
  stage = "load"
  try:
    code = compile(job["program"], "<candidate>", "exec")
    limited(job["load_s"], exec, code, namespace)
    fn = namespace.get(job["entry_point"])
    if not callable(fn):
      finish({"stage": "load", "error": f"the program defines no function {job['entry_point']!r}"})
    if mode == "expected" and job.get("test"):
      # A sanity check of the canonical solution only: the dataset's check() holds expected
      # values in its source, so a candidate's process never receives it.
      stage = "check"
      test_ns = dict(namespace)
      exec(compile(job["test"], "<test>", "exec"), test_ns)
      t0 = perf()
      limited(job["check_s"], test_ns["check"], fn)
      emit({"check_time": perf() - t0})
  except _TimeLimit:
    finish({"stage": stage, "error": "time limit exceeded"})
  except MemoryError:
    finish({"stage": stage, "error": "MemoryError (memory limit)"})
  except BaseException as e:  # pylint: disable=broad-except
    finish({"stage": stage, "error": _short(e)})

  time_limits = job["time_limits"]
  for i, inp in enumerate(job["inputs"]):
    try:
      args = copy.deepcopy(inp)
      t0 = perf()
      out = limited(time_limits[i], fn, *args)
      elapsed = perf() - t0
      record = message_for(i, out)
      record["t"] = elapsed
    except _TimeLimit:
      record = {"i": i, "error": "time limit exceeded"}
    except MemoryError:
      record = {"i": i, "error": "MemoryError (memory limit)"}
    except BaseException as e:  # pylint: disable=broad-except
      record = {"i": i, "error": _short(e)}
    emit(record)
  finish({"done": len(job["inputs"])})


if __name__ == "__main__":
  main()
