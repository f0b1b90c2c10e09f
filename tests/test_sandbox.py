"""HumanEval+ sandbox isolation (`benchmarks/sandbox.py`): hostile code is contained and fails; the
verdict is the parent's, so no program can report itself passed.

Outcomes only, never elapsed seconds: a loaded 2-core machine stretches every duration. What stopped
a run is read from its `RunOutcome` (the `outcomes` fixture); how long stopping takes is
`hieramas_jax.bench.sandbox.timing_checks`. How a candidate is judged is `test_humaneval.py`'s."""

from __future__ import annotations

import asyncio
import dataclasses
import logging
import os
import pathlib
import secrets
import signal
import socket
import subprocess
import sys
import textwrap
import threading
import time

import pytest

from hieramas_jax.benchmarks import cgroups, humaneval, sandbox
from hieramas_jax.paths import BENCHMARK_DATA_DIR, PACKAGE_DIR, REPO_DIR, cache_dir
from humaneval_runs import BWRAP, FAST, FUNC, GOOD_BODY, isolation_for, require_bwrap, run_code


@pytest.fixture
def _bwrap_required():
  require_bwrap()


needs_bwrap = pytest.mark.usefixtures("_bwrap_required")
MODES = ["fallback", "bwrap"]


HOSTILE = {
    "infinite loop in the function": FUNC + "    while True:\n        pass\n",
    "infinite loop at load": "while True:\n    pass\n",
    "infinite loop ignoring SIGPROF (parent kill)":
        "import signal\nsignal.signal(signal.SIGPROF, signal.SIG_IGN)\nwhile True:\n    pass\n",
    "fork bomb": "import os\nwhile True:\n    os.fork()\n",
    "fork bomb via multiprocessing":
        "import multiprocessing\nwhile True:\n    multiprocessing.Process(target=print).start()\n",
    "fork bomb via subprocess":
        "import subprocess, sys\nwhile True:\n    subprocess.Popen([sys.executable, '-c', 'pass'])\n",
    "50 GB allocation": FUNC + "    x = bytearray(50 * 10**9)\n    return True\n",
    "thread bomb": ("import threading, time\n"
                    "while True:\n    threading.Thread(target=time.sleep, args=(600,)).start()\n"),
    "deep recursion": ("import sys\nsys.setrecursionlimit(10**8)\n" + FUNC
                       + "    def down(n):\n        return down(n + 1) + 1\n    return down(0)\n"),
    "pty spam": "import os\nptys = [os.openpty() for _ in range(500)]\n" + FUNC + GOOD_BODY,
    "open a socket": ("import socket\ns = socket.socket()\n" + FUNC + GOOD_BODY),
    "os._exit(0) before the tests": "import os\nos._exit(0)\n" + FUNC + GOOD_BODY,
    "os._exit(0) inside the function": "import os\n" + FUNC + "    os._exit(0)\n",
    "sys.exit(0) before the tests": "import sys\nsys.exit(0)\n",
    "forged result line": ("import os\nos.write(1, b'{\"ok\": true, \"token\": \"x\", \"stage\": \"done\"}\\n')\n"
                           "for fd in range(3, 20):\n"
                           "    try:\n"
                           "        os.write(fd, b'{\"ok\": true, \"stage\": \"done\"}\\n')\n"
                           "    except OSError:\n"
                           "        pass\n"
                           "os._exit(0)\n"),
    "rebinding the harness's json.dumps": ("import json\n_orig = json.dumps\n"
                                           "json.dumps = lambda r, *a, **k: _orig(dict(r, ok=True))\n"
                                           + FUNC + "    return None\n"),
    "flooding the result pipe": ("import os\n"
                                 "for fd in range(3, 20):\n"
                                 "    try:\n"
                                 "        for _ in range(2000):\n"
                                 "            os.write(fd, b'x' * 65536)\n"
                                 "    except OSError:\n"
                                 "        pass\n"
                                 + FUNC + "    return None\n"),
    "huge file": "with open('big', 'wb') as f:\n    f.write(b'x' * (64 << 20))\n" + FUNC + GOOD_BODY,
    # Reaches the child's reporting code through the frames and reports "all passed" in every
    # shape the old and new protocols know, then claims True for every input.
    "frame-walking forger": textwrap.dedent("""\
        import sys
        frame = sys._getframe()
        while frame is not None:
            for scope in (frame.f_locals, frame.f_globals):
                for name in ("emit", "report", "finish"):
                    fn = scope.get(name)
                    if callable(fn):
                        try:
                            for i in range(5000):
                                fn({"i": i, "out": True})
                            fn({"done": 5000})
                            fn({"ok": True, "stage": "done", "index": -1, "error": ""})
                        except BaseException:
                            pass
            frame = frame.f_back
        """) + FUNC + "    return True\n",
    "forged outputs on every inherited fd": textwrap.dedent("""\
        import os
        lines = b"".join(b'{"i": %d, "out": true}\\n' % i for i in range(5000))
        for fd in range(3, 20):
            try:
                os.write(fd, lines)
            except OSError:
                pass
        os._exit(0)
        """),
    "an object whose __eq__ always says yes": (
        "class Yes:\n    def __eq__(self, other):\n        return True\n"
        + FUNC + "    return Yes()\n"),
    "an int subclass whose __eq__ says yes": (
        "class Yes(int):\n    def __eq__(self, other):\n        return True\n    __hash__ = int.__hash__\n"
        + FUNC + "    return Yes(0)\n"),
    "patching the report encoder": textwrap.dedent("""\
        import sys
        frame = sys._getframe()
        while frame is not None:
            enc = frame.f_globals.get("output_message")
            if callable(enc):
                frame.f_globals["output_message"] = lambda i, out: {"i": i, "out": True}
                frame.f_globals["encode"] = lambda out: True
            frame = frame.f_back
        """) + FUNC + "    return None\n",
}


# Why each must fail, as the grade's detail says it ("" where any failure will do).
WHY = {
    "infinite loop in the function": "time limit",
    "infinite loop at load": "time limit",
    "infinite loop ignoring SIGPROF (parent kill)": "killed by the grader",
    "fork bomb": "os.fork is disabled",
    "fork bomb via multiprocessing": "",
    "fork bomb via subprocess": "subprocess.Popen is disabled",
    "50 GB allocation": "MemoryError",
    "thread bomb": "can't start new thread",
    "deep recursion": "",
    "pty spam": "",
    "open a socket": "socket.socket is disabled",
    "os._exit(0) before the tests": "no result",
    "os._exit(0) inside the function": "no result",
    "sys.exit(0) before the tests": "SystemExit",
    "forged result line": "malformed report",
    "flooding the result pipe": "",
    "rebinding the harness's json.dumps": "failed at base test 0",
    "huge file": "Read-only file system",
    "frame-walking forger": "failed at base test",
    "forged outputs on every inherited fd": "failed at base test",
    "an object whose __eq__ always says yes": "cannot be compared",
    "an int subclass whose __eq__ says yes": "cannot be compared",
    "patching the report encoder": "failed at base test",
}


# The budget the parent stops a run at, where it must be the one ("wall": the whole child's).
BUDGET = {"infinite loop ignoring SIGPROF (parent kill)": "wall"}


@pytest.mark.parametrize("name", sorted(HOSTILE))
def test_hostile_code_is_contained_and_fails(task0, name, outcomes):
  grade = run_code(task0, HOSTILE[name])
  assert not grade.correct, (name, grade.detail)
  assert WHY[name] in grade.detail, (name, grade.detail)
  if name in BUDGET:  # stopped by the parent, and the reason recorded
    assert outcomes[-1].timed_out and outcomes[-1].budget == BUDGET[name], outcomes[-1]
  # The harness runs on: the next candidate is graded normally.
  assert run_code(task0, GOOD_BODY).correct


def test_flooding_stdout_does_not_hurt(task0):
  # Prints go nowhere; a correct program that floods stdout and stderr still passes.
  flood = ("import sys, os\n"
           "for _ in range(20000):\n"
           "    print('x' * 1000)\n"
           "    sys.stderr.write('y' * 1000)\n"
           "os.write(1, b'z' * 1000000)\n" + FUNC + "    print('noise' * 100)\n" + GOOD_BODY)
  assert run_code(task0, flood).correct


@pytest.mark.parametrize("mode", MODES)
def test_files_outside_the_workdir_survive(task0, tmp_path, mode):
  iso = isolation_for(mode)
  sentinel = tmp_path / "sentinel.txt"
  sentinel.write_text("keep me")
  for attack in (f"import os\nos.remove({str(sentinel)!r})\n",
                 f"import os\nos.unlink({str(sentinel)!r})\n",
                 f"import pathlib\npathlib.Path({str(sentinel)!r}).unlink()\n",
                 f"import shutil\nshutil.rmtree({str(tmp_path)!r})\n",
                 f"import os\nos.rename({str(sentinel)!r}, 'stolen')\n",
                 f"import os\nos.system('rm -rf {tmp_path}')\n"):
    grade = run_code(task0, attack + FUNC + GOOD_BODY, iso=iso)
    assert not grade.correct, attack
    assert sentinel.read_text() == "keep me", attack
  # No program creates a file, even in its own directory (seccomp: inodes are bounded at zero).
  local = ("import os\nopen('scratch', 'w').write('x')\nos.remove('scratch')\n" + FUNC + GOOD_BODY)
  grade = run_code(task0, local, iso=iso)
  assert not grade.correct and "Read-only file system" in grade.detail, grade.detail


def test_no_connection_leaves_the_sandbox(task0):
  server = socket.socket()
  server.bind(("127.0.0.1", 0))
  server.listen(1)
  server.settimeout(0.5)
  port = server.getsockname()[1]
  attack = (f"import socket\nsocket.create_connection(('127.0.0.1', {port}))\n" + FUNC + GOOD_BODY)
  try:
    assert not run_code(task0, attack).correct
    with pytest.raises(socket.timeout):
      server.accept()
  finally:
    server.close()


def test_fallback_workdir_is_cleaned_up(task0):
  # The fallback runs in a host temp directory: the candidate reports it in its failure (it can
  # write no file); the directory itself must be gone.
  code = "import os\nraise RuntimeError('cwd=' + os.path.realpath('.'))\n" + FUNC + GOOD_BODY
  grade = run_code(task0, code, iso=sandbox.fallback_isolation())
  workdir = grade.detail.split("cwd=")[1]
  assert "hieramas-sandbox-" in workdir
  assert not os.path.exists(workdir)


def _alive(pid: int) -> bool:
  try:
    with open(f"/proc/{pid}/status") as f:
      state = next(line for line in f if line.startswith("State:"))
  except (FileNotFoundError, StopIteration, ProcessLookupError):
    return False
  return " Z " not in state and "zombie" not in state  # a zombie is dead, only unreaped


def _named(marker: str) -> list[int]:
  """Host pids of live processes whose name (comm) starts with `marker`."""
  pids = []
  for entry in os.listdir("/proc"):
    if entry.isdigit():
      try:
        with open(f"/proc/{entry}/comm") as f:
          name = f.read().strip()
      except OSError:
        continue
      if name.startswith(marker) and _alive(int(entry)):
        pids.append(int(entry))
  return pids


def _forking(marker: str, *, setsid: bool, n: int = 4) -> str:
  """Top-level code that forks `n` children through libc (round the guard's os.fork); each
  renames itself `marker` (so the host can find it), optionally leaves the session with libc
  setsid(), and sleeps for ever holding the inherited result pipe."""
  return textwrap.dedent(f"""\
      import ctypes, time
      libc = ctypes.CDLL(None)
      for _ in range({n}):
          if libc.fork() == 0:
              if {setsid}:
                  libc.setsid()
              libc.prctl(15, {marker.encode()!r}, 0, 0, 0)  # PR_SET_NAME
              while True:
                  time.sleep(0.05)
      time.sleep(0.5)
      """)


@pytest.mark.parametrize("mode", MODES)
def test_children_that_escape_the_guard_die_with_the_task(task0, mode, outcomes):
  # A few lingering children (not an exponential bomb: the machine is shared) must die with the
  # task and must not keep the harness waiting on the inherited pipe: the judge decides (no budget
  # runs out) and the child is reaped.
  marker = "hx" + secrets.token_hex(4)
  grade = run_code(task0, _forking(marker, setsid=False) + FUNC + "    return None\n", iso=isolation_for(mode))
  assert not grade.correct and "failed at base test" in grade.detail, grade.detail
  assert not outcomes[-1].timed_out and outcomes[-1].returncode is not None, outcomes[-1]
  time.sleep(0.2)
  assert not _named(marker)
  assert run_code(task0, GOOD_BODY, iso=isolation_for(mode)).correct


@needs_bwrap
def test_ctypes_setsid_escape_dies_with_the_pid_namespace(task0, outcomes):
  # setsid() through libc leaves the process group (the guard only replaces os.setsid), so a
  # group kill misses it; the pid namespace's end does not. No stall on the held pipe: the judge
  # decides and the child is reaped.
  marker = "hs" + secrets.token_hex(4)
  grade = run_code(task0, _forking(marker, setsid=True) + FUNC + "    return None\n")
  assert not grade.correct and "failed at base test" in grade.detail, grade.detail
  assert not outcomes[-1].timed_out and outcomes[-1].returncode is not None, outcomes[-1]
  time.sleep(0.2)
  assert not _named(marker)
  assert run_code(task0, GOOD_BODY).correct


@needs_bwrap
def test_absolute_path_writes_and_deletes_touch_nothing(task0, tmp_path):
  # As root, plain open() could write anywhere and libc unlink() deletes round the guard. Under
  # bubblewrap none of these paths is writable (or even visible): each program fails at load and
  # every file stays as it was.
  sentinel = tmp_path / "sentinel.txt"
  sentinel.write_text("keep me")
  targets = {"venv": pathlib.Path(sys.prefix) / "pwned.txt", "repo": REPO_DIR / "pwned.txt"}
  attacks = [f"open({str(p)!r}, 'w').write('pwned')\n" for p in targets.values()]
  attacks += [f"open({str(sentinel)!r}, 'w').write('pwned')\n",
              f"open({str(sentinel)!r}, 'a').write('pwned')\n",
              f"import os\nos.close(os.open({str(tmp_path / 'new.txt')!r}, os.O_CREAT | os.O_WRONLY))\n",
              f"import ctypes\nassert ctypes.CDLL(None).unlink({str(sentinel).encode()!r}) == 0\n",
              f"import ctypes\nassert ctypes.CDLL(None).rmdir({str(tmp_path).encode()!r}) == 0\n",
              "open('/usr/pwned.txt', 'w').write('pwned')\n",
              "open('/pwned.txt', 'w').write('pwned')\n",
              "open('/dev/pwned.txt', 'w').write('pwned')\n"]
  for attack in attacks:
    grade = run_code(task0, attack + FUNC + GOOD_BODY)
    assert not grade.correct and "failed at load" in grade.detail, (attack, grade.detail)
  assert sentinel.read_text() == "keep me"
  assert sorted(p.name for p in tmp_path.iterdir()) == ["sentinel.txt"]
  assert not any(p.exists() for p in targets.values())
  assert not pathlib.Path("/usr/pwned.txt").exists() and not pathlib.Path("/pwned.txt").exists()
  # /tmp inside is the program's own tmpfs, and no file can be created there either.
  host_tmp = pathlib.Path("/tmp") / f"pwned-{secrets.token_hex(4)}.txt"
  assert not run_code(task0, f"open({str(host_tmp)!r}, 'w').write('pwned')\n" + FUNC + GOOD_BODY).correct
  assert not host_tmp.exists()
  assert run_code(task0, GOOD_BODY).correct


@needs_bwrap
def test_no_network_even_round_the_guard(task0):
  # `_socket` is not patched by the guard; the network namespace has only a loopback of its own.
  server = socket.socket()
  server.bind(("127.0.0.1", 0))
  server.listen(1)
  server.settimeout(0.5)
  port = server.getsockname()[1]
  attack = f"import _socket\ns = _socket.socket()\ns.connect(('127.0.0.1', {port}))\n" + FUNC + GOOD_BODY
  try:
    grade = run_code(task0, attack)
    assert not grade.correct and "Operation not permitted" in grade.detail, grade.detail  # seccomp: no AF_INET
    with pytest.raises(socket.timeout):
      server.accept()
  finally:
    server.close()


@needs_bwrap
def test_what_the_program_sees_inside_bubblewrap(task0):
  # The program checks its own world and is correct only if every check holds; the failed
  # checks' names reach the grade's detail.
  # A venv inside the checkout (as `make install` makes it) is bound at its own path, so bubblewrap
  # creates the checkout's directory as an empty mount point: it may exist, holding nothing else.
  hidden = [str(PACKAGE_DIR), str(cache_dir()), str(BENCHMARK_DATA_DIR)]
  venv_parts = {os.path.relpath(sys.prefix, REPO_DIR).split(os.sep)[0]} if sys.prefix.startswith(str(REPO_DIR)) else set()
  probe = textwrap.dedent(f"""\
      import os
      failed = []
      def check(name, ok):
          if not ok:
              failed.append(name)
      check("uid", os.getuid() == 65534 and os.getgid() == 65534)
      status = open("/proc/self/status").read()
      check("no capabilities", "CapEff:\\t0000000000000000" in status)
      check("pid namespace", os.getpid() < 10 and len([p for p in os.listdir("/proc") if p.isdigit()]) < 5)
      interfaces = [l.split(":")[0].strip() for l in open("/proc/net/dev").readlines()[2:]]
      check("network: loopback only", interfaces == ["lo"])
      check("answer key hidden", not any(os.path.exists(p) for p in {hidden!r}))
      check("checkout empty", not os.path.exists({str(REPO_DIR)!r}) or set(os.listdir({str(REPO_DIR)!r})) <= {venv_parts!r})
      check("cwd is /tmp", os.getcwd() == "/tmp")
      for path in ("/tmp/scratch", "/scratch", "/usr/scratch", "/dev/scratch",
                   os.path.join(os.__file__, "..", "scratch")):
          try:
              open(path, "w")
              failed.append("wrote " + path)
          except OSError:
              pass
      import gc
      needle = "def check(" + "candidate)"  # split: this program's own text must not match
      check("no expected outputs or check() in memory", not any(
          isinstance(v, str) and needle in v and v != needle
          for o in gc.get_objects() if isinstance(o, dict) for v in o.values()))
      if failed:
          raise AssertionError(", ".join(failed))
      """)
  grade = run_code(task0, probe + FUNC + GOOD_BODY)
  assert grade.correct, grade.detail


@needs_bwrap
def test_sandboxed_programs_die_with_the_grader(task0, tmp_path):
  # --die-with-parent: a grader killed mid-run (SIGKILL, no cleanup) leaves no program behind.
  marker = "hd" + secrets.token_hex(4)
  code = (f"import ctypes\nctypes.CDLL(None).prctl(15, {marker.encode()!r}, 0, 0, 0)\n"
          "while True:\n    pass\n")
  script = textwrap.dedent(f"""\
      import asyncio, dataclasses
      from hieramas_jax.benchmarks import humaneval, sandbox
      from hieramas_jax.benchmarks.data import items_by_id
      limits = dataclasses.replace(sandbox.DEFAULT_LIMITS, load_s=600, wall_s=600)
      asyncio.run(humaneval.run_candidate(items_by_id("humaneval_plus")["HumanEval/0"], {code!r}, limits,
                                        use_cache=False))
      """)
  grader = subprocess.Popen([sys.executable, "-c", script], cwd=REPO_DIR,
                            env=dict(os.environ, HIERAMAS_CACHE_DIR=str(cache_dir())))
  try:
    deadline = time.monotonic() + 60
    while not _named(marker) and time.monotonic() < deadline:
      time.sleep(0.1)
    assert _named(marker), "the program never started"
    grader.send_signal(signal.SIGKILL)
    grader.wait(timeout=10)
    deadline = time.monotonic() + 5
    while _named(marker) and time.monotonic() < deadline:
      time.sleep(0.05)
    assert not _named(marker)
  finally:
    grader.kill()
    grader.wait()
    cgroups.sweep(cgroups.support().parents)  # the killed grader's empty group, if it had one


def test_no_isolation_refuses_unless_fallback_is_asked_for(monkeypatch, caplog, task0):
  monkeypatch.setattr(sandbox.shutil, "which", lambda name: None)
  from hieramas_jax.experiment.provenance import provenance
  sandbox.isolation.cache_clear()
  try:
    for wanted in (None, "auto", "bwrap"):  # the default never quietly grades without isolation
      if wanted is None:
        monkeypatch.delenv(sandbox.SANDBOX_ENV, raising=False)
      else:
        monkeypatch.setenv(sandbox.SANDBOX_ENV, wanted)
      sandbox.isolation.cache_clear()
      with pytest.raises(sandbox.SandboxError, match="bwrap is not installed.*Fix: install bubblewrap"
                                                     ".*HIERAMAS_SANDBOX=fallback"):
        sandbox.isolation()
      with pytest.raises(sandbox.SandboxError, match="bubblewrap cannot isolate"):
        asyncio.run(humaneval.run_candidate(task0, FUNC + GOOD_BODY, FAST, use_cache=False))
      assert provenance(seed=0)["sandbox"]["mode"] == "unavailable"
    monkeypatch.setenv(sandbox.SANDBOX_ENV, "fallback")
    sandbox.isolation.cache_clear()
    monkeypatch.setattr(sandbox, "_WARNED_FALLBACK", threading.Event())
    with caplog.at_level(logging.WARNING, logger=sandbox.__name__):
      first = sandbox.isolation()
      again = sandbox.isolation()
      assert provenance(seed=0)["sandbox"]["mode"] == "fallback"
      # Deciding and recording say nothing (a run without HumanEval+ does both); running a program says it once.
      assert not [r for r in caplog.records if r.name == sandbox.__name__]
      sandbox.warn_if_fallback(first)
      sandbox.warn_if_fallback(again)
    assert first is again and first.mode == "fallback"
    warnings = [r for r in caplog.records if r.name == sandbox.__name__]
    assert len(warnings) == 1 and "WITHOUT namespace isolation" in warnings[0].getMessage()
    monkeypatch.setenv(sandbox.SANDBOX_ENV, "chroot")
    sandbox.isolation.cache_clear()
    with pytest.raises(sandbox.SandboxError, match="expected auto, bwrap or fallback"):
      sandbox.isolation()
  finally:
    sandbox.isolation.cache_clear()
  monkeypatch.undo()
  if BWRAP:
    assert provenance(seed=0)["sandbox"] == sandbox.isolation().provenance()


# What seccomp refuses in either mode: new processes, new files, ptrace; threads still work.
SECCOMP_PROBE = textwrap.dedent("""\
    import ctypes, os, threading
    libc = ctypes.CDLL(None, use_errno=True)
    failed = []
    def refused(name, fn, *args):
        try:
            fn(*args)
            failed.append(name)
        except OSError:
            pass
    pid = libc.fork()
    if pid == 0:
        libc._exit(0)
    if pid != -1:
        failed.append("fork")
    if libc.syscall(56, 0x11, 0, 0, 0, 0) != -1:  # raw clone(SIGCHLD) on x86_64, round libc's fork
        libc._exit(0)
    if libc.ptrace(16, os.getppid(), 0, 0) != -1:  # PTRACE_ATTACH
        failed.append("ptrace")
    if libc.kill(os.getppid(), 0) != -1 or libc.kill(-1, 0) != -1:  # signal 0: nothing is sent
        failed.append("kill")
    if libc.kill(os.getpid(), 0) != 0:
        failed.append("kill self")
    import _socket
    refused("AF_INET socket", _socket.socket, _socket.AF_INET, _socket.SOCK_STREAM)
    refused("AF_INET6 socket", _socket.socket, _socket.AF_INET6, _socket.SOCK_DGRAM)
    _socket.socket(_socket.AF_UNIX, _socket.SOCK_STREAM).close()
    refused("create", open, "scratch-file", "w")
    victim = VICTIM
    refused("write", open, victim, "r+b")
    refused("append", open, victim, "ab")
    for call in (lambda: libc.truncate(victim.encode(), 0), lambda: libc.unlink(victim.encode()),
                 lambda: libc.rename(victim.encode(), (victim + ".moved").encode()),
                 lambda: libc.chmod(victim.encode(), 0o777)):
        if call() != -1:
            failed.append("changed the victim file")
    refused("mkdir", os.mkdir, "scratch-dir")
    refused("O_TMPFILE", os.open, ".", os.O_TMPFILE | os.O_RDWR)
    refused("memfd", os.memfd_create, "x")
    seen = []
    t = threading.Thread(target=lambda: seen.append(1))
    t.start()
    t.join()
    if seen != [1]:
        failed.append("threads")
    if failed:
        raise AssertionError(", ".join(failed))
    """)


@pytest.mark.parametrize("mode", MODES)
def test_seccomp_bounds_processes_files_and_ptrace(task0, mode, tmp_path):
  if os.uname().machine != "x86_64":
    pytest.fail("this probe's raw clone number is x86_64's; add the machine's")
  # A host file the program tries to write, append to, truncate, delete, rename and chmod (in the
  # fallback it can see it; under bubblewrap it cannot even do that).
  victim = tmp_path / "victim.txt"
  victim.write_text("keep me")
  victim.chmod(0o644)
  grade = run_code(task0, f"VICTIM = {str(victim)!r}\n" + SECCOMP_PROBE + FUNC + GOOD_BODY, iso=isolation_for(mode))
  assert grade.correct, grade.detail
  assert victim.read_text() == "keep me" and (victim.stat().st_mode & 0o777) == 0o644
  assert sorted(p.name for p in tmp_path.iterdir()) == ["victim.txt"]


def test_seccomp_program_refuses_unknown_machines():
  from hieramas_jax.benchmarks import _sandbox_child as child
  assert len(child.seccomp_program("x86_64")) % 8 == 0 and child.seccomp_program("aarch64")
  with pytest.raises(KeyError):
    child.seccomp_program("riscv64")


def test_ignoring_sigprof_is_stopped_at_the_input_limit_not_the_wall(task0, outcomes):
  # The per-input limit is the parent's too: a program that ignores the child's SIGPROF is killed
  # at its input's budget (CPU 1 + 3 + 2 + 2 s), not at the 60 s wall.
  limits = dataclasses.replace(sandbox.DEFAULT_LIMITS, wall_s=60.0, cpu_s=60, load_s=1.0)
  code = ("import signal\nsignal.signal(signal.SIGPROF, signal.SIG_IGN)\n" + FUNC + "    while True:\n        pass\n")
  grade = run_code(task0, code, limits=limits)
  assert not grade.correct and "killed by the grader" in grade.detail, grade.detail
  assert outcomes[-1].timed_out and outcomes[-1].budget == "line", outcomes[-1]


@needs_bwrap
def test_hostile_program_reaches_no_secret_host_file_or_process(task0, monkeypatch):
  # The grader holds a (fake) key; the program looks for it everywhere it could be, and for the
  # host's files, caches and processes. It is graded correct only if every check holds.
  secret = "sk-" + secrets.token_hex(16)
  monkeypatch.setenv("OPENAI_API_KEY", secret)
  monkeypatch.setenv("HIERAMAS_TEST_SECRET", secret)
  host = [str(cache_dir()), str(BENCHMARK_DATA_DIR), str(REPO_DIR / "results"), "/etc", "/dev/ptmx", "/dev/pts",
          "/dev/shm", "/var", "/sys"]
  probe = textwrap.dedent(f"""\
      import os, signal
      failed = []
      secret = {secret!r}
      if any(secret in v for v in os.environ.values()):
          failed.append("secret in environ")
      for pid in [p for p in os.listdir("/proc") if p.isdigit()] + ["self"]:
          try:
              if secret.encode() in open("/proc/%s/environ" % pid, "rb").read():
                  failed.append("secret in /proc/%s/environ" % pid)
          except OSError:
              pass
      for path in {host!r}:
          if os.path.exists(path):
              failed.append("sees " + path)
      try:
          os.kill(1, signal.SIGKILL)  # pid 1 is bubblewrap's own init, not the host's
      except Exception:
          pass
      if failed:
          raise AssertionError(", ".join(failed))
      """)
  grade = run_code(task0, probe + FUNC + GOOD_BODY)
  assert grade.correct, grade.detail
  assert run_code(task0, GOOD_BODY).correct


@needs_bwrap
def test_isolation_engages_for_an_interpreter_under_tmp(tmp_path):
  # A checkout (and its venv) cloned under /tmp: the private /tmp must not hide the interpreter.
  venv = tmp_path / "clone" / ".venv"
  subprocess.run([sys.executable, "-m", "venv", "--without-pip", str(venv)], check=True, timeout=120)
  site = [p for p in sys.path if p.endswith("site-packages")]
  env = dict(os.environ, PYTHONPATH=os.pathsep.join([str(REPO_DIR)] + site))
  env.pop(sandbox.SANDBOX_ENV, None)
  script = ("from hieramas_jax.benchmarks import sandbox\n"
            "iso = sandbox.isolation()\n"
            "print(iso.mode, iso.argv.index('--tmpfs') < iso.argv.index(%r))\n" % str(venv))
  out = subprocess.run([str(venv / "bin" / "python"), "-c", script], env=env, capture_output=True, text=True,
                       timeout=120, check=False)
  assert out.returncode == 0 and out.stdout.split() == ["bwrap", "True"], out.stderr[-2000:]
