"""Typed errors of the LLM layer: one clear message each, never a key.

Callers catch `LLMError` to handle any failure of a call; the subclasses say which kind, so an
experiment can stop on a configuration error (missing key, unreachable endpoint) instead of
recording it as a wrong answer. `UnknownModelError` (a model the endpoint does not serve) lives with
the models, in `llm.registry`.
"""

from __future__ import annotations

import re

from hieramas_jax.errors import UserError

__all__ = [
    "LLMError", "MissingAPIKeyError", "EndpointConfigError", "RetriesExhaustedError",
    "NonRetryableError", "EndpointUnreachableError", "CacheCorruptError", "CacheWriteError", "BudgetExceededError",
    "redact_secrets",
]

# Provider error messages sometimes echo a masked key ("Incorrect API key provided: sk-ab***yz");
# even a masked key must not reach a log or a result.
_KEY_LIKE = re.compile(r"\b(sk|pk|rk|key)-[A-Za-z0-9_\-\*\.]{3,}", re.IGNORECASE)


def redact_secrets(text: str, *secrets: str) -> str:
  """`text` with every given secret and anything key-shaped replaced by `<redacted>`."""
  for secret in secrets:
    if secret:
      text = text.replace(secret, "<redacted>")
  return _KEY_LIKE.sub("<redacted>", text)


class LLMError(UserError):
  """Any failure of the LLM layer."""


class MissingAPIKeyError(LLMError):
  """A real endpoint was chosen but its key's environment variable is unset or empty."""

  def __init__(self, backend: str, env_var: str):
    super().__init__(f"backend {backend!r} needs an API key: set the environment variable {env_var} "
                     f"(or pick --backend=sim, which needs none)")
    self.backend = backend
    self.env_var = env_var


class EndpointConfigError(LLMError):
  """Flags that do not describe a usable endpoint (e.g. --backend=custom without --base_url)."""


class RetriesExhaustedError(LLMError):
  """Every allowed attempt failed with a retryable error (429, 5xx, timeout, dropped connection...).

  Attributes:
    last_status: HTTP status of the last attempt, or None when it got no HTTP answer.
    last_reason: short description of the last failure.
    attempts: how many requests were sent.
  """

  def __init__(self, model: str, attempts: int, last_status: int | None, last_reason: str):
    super().__init__(f"{model}: gave up after {attempts} attempts; last failure: {last_reason}")
    self.model = model
    self.attempts = attempts
    self.last_status = last_status
    self.last_reason = last_reason


class NonRetryableError(LLMError):
  """The endpoint refused the request for a reason a retry cannot fix (400, 401, 403, 404, 422...).

  Attributes:
    status: the HTTP status.
    message: the OpenAI-style error message from the body (secrets redacted).
  """

  def __init__(self, model: str, status: int, message: str):
    hint = " (check the API key's environment variable)" if status in (401, 403) else ""
    super().__init__(f"{model}: HTTP {status}: {message}{hint}")
    self.model = model
    self.status = status
    self.message = message


class EndpointUnreachableError(LLMError):
  """No connection could be made to the endpoint's host at all (refused, DNS failure, no route)."""

  def __init__(self, base_url: str, attempts: int, detail: str):
    super().__init__(f"endpoint {base_url} is unreachable ({attempts} connection attempts failed: "
                     f"{detail}); is the server running and --base_url right?")
    self.base_url = base_url
    self.attempts = attempts


class CacheCorruptError(LLMError):
  """The response store cannot be opened: not a store, a newer schema, or an old JSONL shard with a bad
  record that is not a torn last line."""


class CacheWriteError(LLMError):
  """The response store could not commit answers (disk full, a lock held past the busy timeout...)."""


class BudgetExceededError(LLMError):
  """The next attempt could take the run root past its spending cap (`--max_usd`); it is not sent.

  Attributes:
    spent_usd: what the run root's ledger counts so far: billed, reserved for attempts in flight and
      estimated for sent attempts that got no answer (see `llm.ledger`), over every seed and rerun.
    max_usd: the cap.
  """

  def __init__(self, max_usd: float, model: str, worst_usd: float, *, billed_usd: float, reserved_usd: float,
               unanswered_usd: float):
    total = billed_usd + reserved_usd + unanswered_usd
    super().__init__(
        f"spending cap reached: this run root counts ${total:.4f} of --max_usd=${max_usd:.4f} (billed "
        f"${billed_usd:.4f}, reserved for calls in flight ${reserved_usd:.4f}, estimated for unanswered attempts "
        f"${unanswered_usd:.4f}; ${max(0.0, max_usd - total):.4f} left); the next call ({model}, up to "
        f"${worst_usd:.4f}) could cross it, so it was not sent. Finished work is saved: rerun with a higher "
        f"--max_usd to resume (answered calls are replayed from the cache, not paid again)")
    self.spent_usd = total
    self.billed_usd = billed_usd
    self.reserved_usd = reserved_usd
    self.unanswered_usd = unanswered_usd
    self.max_usd = max_usd
