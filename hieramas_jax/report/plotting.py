"""Axes that do not mislead, shared by the report's figures: cost on a log axis with readable ticks, and
point labels that never overlap.

Why here: a cost axis with matplotlib's default log ticks printed "2x10^-4 4x10^-4 ..." over one another
on panels spanning less than two decades, and labels put at every point piled up where points sit close
("k=300k=30k=1000"); every figure with cost or labelled points uses these two instead.
"""

from __future__ import annotations

from typing import Any, Sequence

# Where a label may go relative to its point (offset in points, alignment), tried in order.
_OFFSETS = [(dx * s, dy * s, ha, va) for s in (1, 2, 3, 4.5, 6) for dx, dy, ha, va in
            ((4, 3, "left", "bottom"), (4, -3, "left", "top"), (-4, 3, "right", "bottom"),
             (-4, -3, "right", "top"), (0, 6, "center", "bottom"), (0, -6, "center", "top"),
             (5, 0, "left", "center"), (-5, 0, "right", "center"))]
# Points closer than this on the page (pixels) share one label ("k=30, 300").
MERGE_PX = 9.0


def log_cost_axis(ax, axis: str = "x") -> None:
  """A log axis of USD ticked at 1, 2 and 5 per decade, plain numbers, no minor labels."""
  from matplotlib.ticker import FuncFormatter, LogLocator, NullFormatter  # pylint: disable=C0415
  which = ax.xaxis if axis == "x" else ax.yaxis
  (ax.set_xscale if axis == "x" else ax.set_yscale)("log")
  which.set_major_locator(LogLocator(base=10, subs=(1.0, 2.0, 5.0)))
  which.set_major_formatter(FuncFormatter(lambda v, _: f"{v:g}"))
  which.set_minor_formatter(NullFormatter())
  ax.tick_params(axis=axis, labelsize=7)


def _merged(texts: Sequence[str]) -> str:
  if all(t.startswith("k=") for t in texts):
    return "k=" + ", ".join(t[2:] for t in texts)
  return " / ".join(texts)


def label_points(ax, points: Sequence[tuple[float, float, str, Any]], *, fontsize: float = 6,
                 avoid: Sequence[Any] = ()) -> list:
  """Labels `points` ([(x, y, text, colour)]) so that no two labels overlap, nor any of `avoid` (bounding
  boxes in display space, e.g. the legend's), as drawn now: call it after the axes' scales, limits and
  the figure's layout are final.

  Points closer than MERGE_PX share one label; each label goes to the first of a few offsets around its
  point where it overlaps nothing placed before and stays inside the axes (else the least crowded one).
  Labels are left out of the layout (`set_in_layout(False)`), so they do not move the axes they were
  placed in. Returns the annotations.
  """
  fig = ax.figure
  fig.canvas.draw()
  renderer = fig.canvas.get_renderer()
  groups: list[dict[str, Any]] = []
  for x, y, text, colour in points:
    if not text:
      continue
    px, py = ax.transData.transform((x, y))
    for g in groups:
      if abs(g["px"] - px) < MERGE_PX and abs(g["py"] - py) < MERGE_PX and g["colour"] == colour:
        g["texts"].append(text)
        break
    else:
      groups.append({"x": x, "y": y, "px": px, "py": py, "texts": [text], "colour": colour})
  frame = ax.get_window_extent(renderer)
  placed = [b for b in avoid]
  out = []
  for g in groups:
    best = None
    for dx, dy, ha, va in _OFFSETS:
      ann = ax.annotate(_merged(g["texts"]), (g["x"], g["y"]), xytext=(dx, dy), textcoords="offset points",
                        fontsize=fontsize, color=g["colour"], ha=ha, va=va)
      ann.set_in_layout(False)
      box = ann.get_window_extent(renderer).padded(2)  # a little air: touching labels read as one
      clashes = sum(box.overlaps(p) for p in placed) + (0 if frame.contains(box.x0, box.y0)
                                                         and frame.contains(box.x1, box.y1) else 1)
      if best is None or clashes < best[0]:
        if best is not None:
          best[1].remove()
        best = (clashes, ann, box)
      else:
        ann.remove()
      if clashes == 0:
        break
    placed.append(best[2])
    out.append(best[1])
  return out


def overlapping_labels(fig) -> list[tuple[str, str]]:
  """Pairs of texts of a drawn figure whose boxes overlap (annotations and tick labels, per axes): what
  the figures' tests check is empty."""
  fig.canvas.draw()
  renderer = fig.canvas.get_renderer()
  pairs = []
  for ax in fig.axes:
    (x0, x1), (y0, y1) = sorted(ax.get_xlim()), sorted(ax.get_ylim())
    texts = [t for t in ax.texts if t.get_text()]
    texts += [t for t in ax.get_xticklabels() if t.get_text() and x0 <= t.get_position()[0] <= x1]
    texts += [t for t in ax.get_yticklabels() if t.get_text() and y0 <= t.get_position()[1] <= y1]
    boxes = [(t.get_text(), t.get_window_extent(renderer)) for t in texts]
    for i, (a, ba) in enumerate(boxes):
      for b, bb in boxes[i + 1:]:
        if ba.overlaps(bb) and ba.width > 0 and bb.width > 0:
          pairs.append((a, b))
  return pairs
