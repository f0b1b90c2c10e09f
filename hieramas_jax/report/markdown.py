"""Markdown pieces every generated results file shares."""

from __future__ import annotations

import json
from typing import Any, Mapping


def provenance_lines(prov: Mapping[str, Any]) -> list[str]:
  """The closing "## Provenance" section of a generated markdown table: its command, then the rest as JSON."""
  return ["", "## Provenance", "", "Command:", "", "```", prov.get("command", ""), "```", "",
          "```json", json.dumps({k: v for k, v in prov.items() if k != "command"}, indent=2), "```", ""]
