"""The child side of the HumanEval+ sandbox: runs a program and reports its function's outputs.

Run as `python -I -c SOURCE` (the source of this file), reading a pickled job from stdin; inside
bubblewrap it sees neither this repository nor the suite's cache, and must not need them, so it is
self-contained (stdlib only). It never decides pass or fail: it does not know the expected
outputs. It writes one JSON line per input (`{"i": 3, "out": <tree>}`, `{"i": 3, "digest": ...}` or
`{"i": 3, "error": ...}`), and the parent, outside the sandbox, compares each with the canonical
solution's output. Whatever the program does to this process (patching the encoder, writing to the
result pipe, walking the frames) it can only report values it computed itself.

Order of events:
  1. read the job from stdin (program, inputs, per-input time limits, rlimits);
  2. set resource limits (CPU seconds, address space, file size, no core dumps);
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


class _TimeLimit(BaseException):
  """Raised by SIGALRM when one test input overruns. A BaseException, so that candidate code
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
  try:  # not enforced for root, but costs nothing where it is
    resource.setrlimit(resource.RLIMIT_NPROC, (64, 64))
  except (ValueError, OSError):
    pass


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
  perf = time.perf_counter
  setitimer = signal.setitimer
  message_for = output_message

  def emit(record):
    data = (dumps(record, separators=(",", ":")) + "\n").encode()
    while data:
      data = data[write(result_fd, data):]

  def finish(record):
    emit(record)
    exit_now(0)

  signal.signal(signal.SIGALRM, _on_alarm)
  mode = job["mode"]
  if mode == "candidate":
    try:
      _reliability_guard(workdir)
    except BaseException as e:  # pylint: disable=broad-except
      finish({"stage": "guard", "error": "sandbox guard failed: " + _short(e)})

  def limited(seconds, fn, *args):
    setitimer(signal.ITIMER_REAL, seconds)
    try:
      return fn(*args)
    finally:
      setitimer(signal.ITIMER_REAL, 0)

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
