"""The child side of the HumanEval+ sandbox. Run as `python -I _sandbox_child.py PAYLOAD`.

Self-contained (stdlib, plus numpy only for float comparisons): under `-I` the child cannot
import the suite, and it must not need to. Order of events:
  1. read and delete the payload (a pickle the parent wrote: code, tests, inputs, expected
     outputs, limits, a one-time token);
  2. set resource limits (CPU seconds, address space, file size, no core dumps);
  3. keep a private duplicate of stdout for the result, point fds 1 and 2 at /dev/null, so
     untrusted prints cost nothing and cannot forge a result line;
  4. apply the reliability guard (EvalPlus style: no fork, kill, system, subprocess, socket,
     rmtree; file removal only inside the working directory);
  5. run the program, the dataset's `check(candidate)`, then every base and plus input with a
     per-input time limit, comparing with the expected outputs as EvalPlus does;
  6. write ONE result line carrying the token. No line (the code called `os._exit`, or was
     killed) means failure to the parent.
"""

import builtins
import copy
import faulthandler
import json
import math
import os
import pickle
import resource
import signal
import sys
import time


class _TimeLimit(BaseException):
  """Raised by SIGALRM when one test input overruns. A BaseException, so that candidate code
  with a bare `except Exception` cannot swallow it."""


def _on_alarm(signum, frame):
  raise _TimeLimit()


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

  Not a security boundary against a determined attacker (ctypes remains); it turns the usual
  accidents and hostile one-liners (fork bombs, rm -rf, kill, sockets) into exceptions. The
  parent's process-group kill and the rlimits are the backstop.
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
               "spawnle", "spawnlp", "spawnlpe", "posix_spawn", "posix_spawnp", "plock", "nice", "sched_setaffinity"):
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


def _is_floats(x):
  """EvalPlus's test for outputs compared with a tolerance."""
  if isinstance(x, float):
    return True
  if isinstance(x, (list, tuple)) and x:
    return all(isinstance(i, float) for i in x)
  return False


def _poly(xs, x):
  return sum(coeff * math.pow(x, i) for i, coeff in enumerate(xs))


def _check_output(entry_point, inp, out, exp, is_digest, atol):
  """EvalPlus's comparison: exact, or allclose(rtol=1e-7, atol) for float outputs; find_zero
  (HumanEval/32) accepts any root within atol. `is_digest`: exp is `digest(expected)`."""
  if entry_point == "find_zero":
    assert abs(_poly(*inp, out)) <= atol, "not a root"
    return
  if is_digest:
    assert digest(out) == exp, "output differs"
    return
  if atol == 0 and _is_floats(exp):
    atol = 1e-6
  if out == exp:
    return
  assert atol != 0, "output differs"
  assert type(out) == type(exp), f"type {type(out).__name__} != {type(exp).__name__}"
  if isinstance(exp, (list, tuple)):
    assert len(out) == len(exp), "length differs"
  import numpy as np
  assert np.allclose(out, exp, rtol=1e-07, atol=atol), "not close"


# Expected outputs larger than this (pickled) travel as a digest of a canonical form: a few
# tasks (e.g. HumanEval/15's long strings) would otherwise ship ~100 MB to every candidate.
DIGEST_OVER_BYTES = 1 << 15


def _canonical(x, out):
  """Append a canonical text form of x to `out`: equal for values that == each other in the
  common cases (containers in any order for sets and dicts, int vs bool kept apart by type)."""
  t = type(x)
  if t in (list, tuple):
    out.append(t.__name__ + "[")
    for v in x:
      _canonical(v, out)
      out.append(",")
    out.append("]")
  elif t in (set, frozenset):
    parts = []
    for v in x:
      sub = []
      _canonical(v, sub)
      parts.append("".join(sub))
    out.append(t.__name__ + "{" + ",".join(sorted(parts)) + "}")
  elif t is dict:
    parts = []
    for k, v in x.items():
      sub = []
      _canonical(k, sub)
      sub.append(":")
      _canonical(v, sub)
      parts.append("".join(sub))
    out.append("dict{" + ",".join(sorted(parts)) + "}")
  elif t is int:  # hex: repr of a huge int hits Python's 4300-digit str conversion limit
    out.append("int(" + format(x, "x") + ")")
  else:
    out.append(t.__name__ + "(" + repr(x) + ")")


def digest(x):
  import hashlib
  if type(x) is str:
    return "str:" + hashlib.sha256(x.encode("utf-8", "surrogatepass")).hexdigest()
  parts = []
  _canonical(x, parts)
  return "canon:" + hashlib.sha256("".join(parts).encode("utf-8", "surrogatepass")).hexdigest()


def _compact(x):
  """(x, False), or (digest of x, True) when x is large and not compared with a tolerance."""
  if _is_floats(x):
    return x, False
  try:
    size = len(pickle.dumps(x, protocol=pickle.HIGHEST_PROTOCOL))
  except Exception:  # pylint: disable=broad-except
    return x, False
  return (digest(x), True) if size > DIGEST_OVER_BYTES else (x, False)


def _short(e):
  text = f"{type(e).__name__}: {e}" if str(e) else type(e).__name__
  return text[:300]


def main():
  payload_path = sys.argv[1]
  with open(payload_path, "rb") as f:
    job = pickle.load(f)
  os.remove(payload_path)
  token = job["token"]
  workdir = os.getcwd()
  _set_limits(job["cpu_s"], job["memory_bytes"], job["fsize_bytes"])

  result_fd = os.dup(1)
  devnull = os.open(os.devnull, os.O_RDWR)
  for fd in (0, 1, 2):
    os.dup2(devnull, fd)
  # Private references: untrusted code may rebind os.write, os._exit or json.dumps.
  write = os.write
  exit_now = os._exit
  dumps = json.dumps
  perf = time.perf_counter
  setitimer = signal.setitimer

  def report(record):
    record["token"] = token
    data = (dumps(record) + "\n").encode()
    while data:
      data = data[write(result_fd, data):]
    exit_now(0)

  signal.signal(signal.SIGALRM, _on_alarm)
  mode = job["mode"]
  entry_point = job["entry_point"]
  if mode == "candidate":
    try:
      _reliability_guard(workdir)
    except BaseException as e:  # pylint: disable=broad-except
      report({"ok": False, "stage": "guard", "index": -1, "error": "sandbox guard failed: " + _short(e)})

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
    fn = namespace.get(entry_point)
    if not callable(fn):
      report({"ok": False, "stage": "load", "index": -1,
              "error": f"the program defines no function {entry_point!r}"})

    stage = "check"
    check_times = []
    if job["test"]:
      # The test sees the program's globals (helpers such as `poly`), as in HumanEval's
      # program + test + check(entry_point) script; a copy, so the test cannot rebind them.
      test_ns = dict(namespace)
      exec(compile(job["test"], "<test>", "exec"), test_ns)
      t0 = perf()
      limited(job["check_s"], test_ns["check"], fn)
      check_times.append(perf() - t0)

    outputs, digested, times = [], [], []
    for stage, inputs in (("base", job["base_input"]), ("plus", job["plus_input"])):
      expected = job["expected"].get(stage) if mode == "candidate" else None
      is_digest = job["expected"].get(stage + "_digest") if mode == "candidate" else None
      limits = job["time_limits"].get(stage) if mode == "candidate" else None
      for i, inp in enumerate(inputs):
        args = copy.deepcopy(inp)
        t0 = perf()
        out = limited(limits[i] if limits else job["load_s"], fn, *args)
        times.append(perf() - t0)
        if mode == "candidate":
          try:
            _check_output(entry_point, inp, out, expected[i], is_digest[i], job["atol"])
          except AssertionError as e:
            report({"ok": False, "stage": stage, "index": i, "error": _short(e) or "wrong output"})
        else:
          value, was_digested = _compact(out)
          outputs.append(value)
          digested.append(was_digested)
  except _TimeLimit:
    report({"ok": False, "stage": stage, "index": -1, "error": "time limit exceeded"})
  except MemoryError:
    report({"ok": False, "stage": stage, "index": -1, "error": "MemoryError (memory limit)"})
  except BaseException as e:  # pylint: disable=broad-except
    report({"ok": False, "stage": stage, "index": -1, "error": _short(e)})

  if mode == "expected":
    n_base = len(job["base_input"])
    with open(os.path.join(workdir, "expected.pkl"), "wb") as f:
      pickle.dump({"base": outputs[:n_base], "plus": outputs[n_base:],
                   "base_digest": digested[:n_base], "plus_digest": digested[n_base:],
                   "base_times": times[:n_base], "plus_times": times[n_base:],
                   "check_time": check_times[0] if check_times else 0.0}, f)
  report({"ok": True, "stage": "done", "index": -1, "error": ""})


if __name__ == "__main__":
  main()
