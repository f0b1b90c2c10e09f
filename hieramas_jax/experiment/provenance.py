"""Provenance stamped on every result file: where it came from and how to make it again."""

from __future__ import annotations

import datetime
import os
import pathlib
import re
import shlex
import shutil
import subprocess
import sys
from typing import Any, Iterable, Mapping

from hieramas_jax import isa
from hieramas_jax.benchmarks.data import data_sha256
from hieramas_jax.benchmarks.sandbox import sandbox_provenance
from hieramas_jax.errors import UserError
from hieramas_jax.llm.registry import PRICE_TABLE_DATE
from hieramas_jax.paths import REPO_DIR

SIMULATED_LABEL = "simulated pool (hieramas_jax.sim): not real LLM results"

# Flags whose values must never be written anywhere (they may hold secrets by mistake).
# Words of a flag name that make it a secret ("api_key", "OPENAI_API_KEY", "hf_token", "authorization",
# "apiKey"); matched as whole words, so "max_tokens" or "prompt_tokens" (counts, not secrets) stay readable.
_SECRET_WORDS = frozenset(("key", "apikey", "token", "secret", "password", "passwd", "authorization", "auth",
                           "bearer", "credential", "credentials", "cookie"))
# Prefixes of OpenAI-compatible providers' API keys ("sk-...", OpenRouter "sk-or-...").
_KEY_PREFIXES = ("sk-", "sk_")


def git_commit() -> dict[str, Any]:
  """The commit the code ran at, and whether the tree had uncommitted changes outside `results/`.

  Committed results are the runs' outputs: a run that rewrites them (every rerun does) is still the
  commit's code, so they do not make the tree dirty; any other change does.
  """
  def run(*args):
    return subprocess.run(["git", *args], cwd=REPO_DIR, capture_output=True, text=True, check=False)
  try:
    head = run("rev-parse", "HEAD")
  except FileNotFoundError:  # no git program: `require_git` says so before a run starts
    return {"commit": None, "dirty": None}
  if head.returncode != 0:
    return {"commit": None, "dirty": None}
  dirty = bool(run("status", "--porcelain", "--untracked-files=no", "--", ".", ":(exclude)results").stdout.strip())
  return {"commit": head.stdout.strip(), "dirty": dirty}


class GitMissingError(UserError):
  """The checkout is a git repository but no `git` program is on PATH: results could not name their commit."""


def require_git() -> None:
  """Raises GitMissingError when the code is a git checkout and `git` cannot be run (checked before a run
  starts: every result names the commit that made it). A copy without .git (an sdist) records no commit."""
  if (REPO_DIR / ".git").exists() and shutil.which("git") is None:
    raise GitMissingError("git is not on PATH, so results cannot name the commit that made them; install git "
                          "(e.g. apt-get install git) and rerun")


_PROCESS_COMMIT: dict[str, Any] | None = None


def process_commit() -> dict[str, Any]:
  """`git_commit()` as it was when this process started (read once, at the import of this module).

  Why: the code a process runs is what was on disk when it imported it. A long run (a Table 1 takes
  tens of minutes) must name that commit for every cell it computes, even if the checkout moves on
  while it runs; reading HEAD again when a cell finishes would name code that did not compute it.
  """
  global _PROCESS_COMMIT  # pylint: disable=global-statement
  if _PROCESS_COMMIT is None:
    _PROCESS_COMMIT = git_commit()
  return dict(_PROCESS_COMMIT)


def redact(flags: Mapping[str, Any]) -> dict[str, Any]:
  """Flags with anything that looks like a secret replaced, so no key reaches a result or a W&B config.

  Nested mappings (a cell's method config inside a W&B config) are redacted too, and so is any string
  value shaped like an API key, whatever its flag is called: a key pasted into the wrong flag must not
  leak either.
  """
  out = {}
  for k, v in flags.items():
    if is_secret_name(str(k)):
      out[k] = "<redacted>"
    elif isinstance(v, Mapping):
      out[k] = redact(v)
    elif isinstance(v, str) and _looks_like_key(v):
      out[k] = "<redacted>"
    else:
      out[k] = v
  return out


def is_secret_name(name: str) -> bool:
  """Whether a flag or config key names a secret: one of its words is in _SECRET_WORDS.

  Words split at '_', '-', '.', spaces and camelCase humps. A name ending in "_env" names the environment
  variable that holds a key (`api_key_env=OPENROUTER_API_KEY`), not the key: it stays readable.
  """
  if name.lower().endswith("_env"):
    return False
  words = re.findall(r"[A-Z]?[a-z0-9]+|[A-Z]+(?![a-z])", name)
  return any(w.lower() in _SECRET_WORDS for w in words)


def _looks_like_key(value: str) -> bool:
  return value.startswith(_KEY_PREFIXES) and len(value) >= 20 and " " not in value


def portable_value(value: Any) -> Any:
  """A flag value as a result file shows it: an absolute path inside the checkout relative to it, one
  outside as `<outside the repo>/<its name>` (the rule of `command_line`); anything else as given."""
  if isinstance(value, (list, tuple)):
    return [portable_value(v) for v in value]
  if isinstance(value, str) and os.path.isabs(value):
    return _portable_path(value)
  return value


def command_line(argv: Iterable[str] | None = None) -> str:
  """This process's command, without any machine's absolute paths: a path inside the checkout becomes
  relative to it, one outside becomes `<outside the repo>/<its name>` (a result file is committed and read
  on other machines; `--work_dir=/tmp/x` says nothing there)."""
  argv = list(sys.argv if argv is None else argv)
  if argv and argv[0].endswith(".py"):
    argv = ["python"] + argv
  return shlex.join([argv[0]] + [_portable(a) for a in argv[1:]])


def _portable(arg: str) -> str:
  flag, eq, value = arg.partition("=") if arg.startswith("-") else ("", "", arg)
  if not (eq or not flag) or not value.startswith("/"):
    return arg
  return f"{flag}{eq}{_portable_path(value)}"


def _portable_path(value: str) -> str:
  path = pathlib.Path(value)
  try:
    return str(path.resolve().relative_to(REPO_DIR.resolve())) or "."
  except ValueError:
    return f"<outside the repo>/{path.name}"


def provenance(*, seed: int | None, benchmarks: Iterable[str] = (), flags: Mapping[str, Any] | None = None,
               backend: str | None = None, command: str | None = None) -> dict[str, Any]:
  """Everything a reader needs to trust and redo a result.

  Args:
    seed: the run's one seed.
    benchmarks: benchmarks whose vendored data the result depends on (hashed).
    flags: the run's flags (secrets redacted).
    backend: "sim" or the real endpoint's name; results made on the sim are labelled.
    command: the command that made the result (defaults to this process's argv).
  """
  prov = {
      "git": process_commit(),
      "command": command or command_line(),
      "flags": {k: portable_value(v) for k, v in redact(dict(flags or {})).items()},
      "seed": seed,
      "data_sha256": {b: data_sha256(b) for b in benchmarks},
      "price_table_date": PRICE_TABLE_DATE,
      "backend": backend,
      "created_utc": datetime.datetime.now(datetime.timezone.utc).isoformat(timespec="seconds"),
      "python": sys.version.split()[0],
      # How HumanEval+ programs were isolated (bubblewrap or the fallback): a grade depends on it.
      "sandbox": sandbox_provenance(),
      # The numeric kernels' pinned level, the CPU it ran on: where a reader's bytes may depart.
      "isa": isa.fingerprint(),
  }
  if backend == "sim":
    # "simulated pool (profile X) (hieramas_jax.sim): not real LLM results": every title built from it
    # names the aggregation profile the run was made on.
    prov["label"] = SIMULATED_LABEL.replace("simulated pool", sim_title(prov), 1)
  return prov


def sim_title(record: Mapping[str, Any]) -> str:
  """"simulated pool (profile X)" for a result or its provenance: X is the sim's aggregation profile
  (the run's --sim_profile flag; records made before profiles existed read as "fitted")."""
  prov = record.get("provenance", record) if isinstance(record, Mapping) else {}
  flags = (prov or {}).get("flags") or {}
  return f"simulated pool (profile {flags.get('sim_profile', 'fitted')})"


process_commit()  # at import: the commit of the code this process loaded
