"""The offline report page: its sections, embedded figures and shared helpers (`html.py`, `hieramas_figures.py`)."""

from __future__ import annotations

import base64
import html
import io
import json
import pathlib
from typing import Any, Mapping

from hieramas_jax.experiment.provenance import sim_title

CSS = """
body { font-family: system-ui, -apple-system, Segoe UI, sans-serif; margin: 2em auto; max-width: 1150px;
       color: #222; line-height: 1.4; padding: 0 1em; }
h1 { font-size: 1.6em; } h2 { border-bottom: 1px solid #ccc; padding-bottom: .2em; margin-top: 2em; }
figure { margin: 1em 0; } figure img { max-width: 100%; border: 1px solid #eee; }
figcaption { font-size: .9em; color: #555; }
.missing { background: #fff4e5; border-left: 4px solid #f0a020; padding: .5em 1em; }
.banner { background: #fdecea; border-left: 4px solid #d33; padding: .5em 1em; font-weight: 600; }
table { border-collapse: collapse; font-size: .82em; margin: .5em 0; }
td, th { border: 1px solid #ddd; padding: 2px 6px; vertical-align: top; }
th { background: #f4f4f4; } pre { background: #f7f7f7; padding: .5em; overflow-x: auto; font-size: .8em; }
details { margin: .6em 0; } summary { cursor: pointer; font-weight: 600; }
nav a { margin-right: 1em; }
"""


def pyplot():
  """matplotlib.pyplot on the Agg backend, imported on first use (the report needs no display)."""
  import matplotlib  # pylint: disable=import-outside-toplevel
  matplotlib.use("Agg")
  import matplotlib.pyplot as plt  # pylint: disable=import-outside-toplevel
  return plt


def load_json(path: pathlib.Path) -> Any | None:
  """The JSON in `path`, or None when it is missing or unreadable (its section then says so)."""
  try:
    return json.loads(path.read_text())
  except (OSError, json.JSONDecodeError):
    return None


def is_sim(record: Any) -> bool:
  """Whether a results record was made on the simulated pool."""
  if not isinstance(record, Mapping):
    return False
  prov = record.get("provenance") or {}
  return prov.get("backend") == "sim" or record.get("backend") == "sim"


def sim_caption(text: str, record: Any) -> str:
  """`text`, with "(simulated pool (profile X))" when `record` was made on the sim."""
  return f"{text} ({sim_title(record)})" if is_sim(record) else text


class Page:
  """Sections of HTML and the figures they embed (counted, so a test can check that none is missing)."""

  def __init__(self):
    self.sections: list[tuple[str, str, str]] = []  # (anchor, title, body)
    self.figures: list[str] = []

  def figure(self, fig, name: str, caption: str) -> str:
    plt = pyplot()
    buf = io.BytesIO()
    fig.savefig(buf, format="png", dpi=100)
    plt.close(fig)
    self.figures.append(name)
    data = base64.b64encode(buf.getvalue()).decode()
    return (f'<figure data-figure="{html.escape(name)}"><img alt="{html.escape(name)}" '
            f'src="data:image/png;base64,{data}"><figcaption>{html.escape(caption)}</figcaption></figure>')

  def add(self, anchor: str, title: str, body: str) -> None:
    self.sections.append((anchor, title, body))

  def render(self, title: str, banner: str | None, intro: str) -> str:
    nav = " ".join(f'<a href="#{a}">{html.escape(t)}</a>' for a, t, _ in self.sections)
    parts = ["<!DOCTYPE html>", '<html lang="en"><head><meta charset="utf-8">',
             f"<title>{html.escape(title)}</title><style>{CSS}</style></head><body>",
             f"<h1>{html.escape(title)}</h1>"]
    if banner:
      parts.append(f'<p class="banner">{html.escape(banner)}</p>')
    parts += [intro, f"<nav>{nav}</nav>"]
    for anchor, t, body in self.sections:
      parts.append(f'<section id="{anchor}" data-section="{anchor}"><h2>{html.escape(t)}</h2>{body}</section>')
    parts.append("</body></html>")
    return "\n".join(parts)


def missing(text: str) -> str:
  """A section's note that its input is missing and how to make it."""
  return f'<p class="missing">{html.escape(text)}</p>'
