"""Axes that do not mislead, shared by the report's figures: cost on a log axis with readable ticks, and
point labels that never overlap.

Why here: a cost axis with matplotlib's default log ticks printed "2x10^-4 4x10^-4 ..." over one another
on panels spanning less than two decades, and labels put at every point piled up where points sit close
("k=300k=30k=1000"); every figure with cost or labelled points uses these two instead.
"""

from __future__ import annotations

from typing import Any, Sequence

# Where a label may go relative to its point (offset in points, alignment), tried in order.
_OFFSETS = [(dx * s, dy * s, ha, va) for s in (1, 2, 3, 4.5, 6, 8, 10) for dx, dy, ha, va in
            ((4, 3, "left", "bottom"), (4, -3, "left", "top"), (-4, 3, "right", "bottom"),
             (-4, -3, "right", "top"), (0, 6, "center", "bottom"), (0, -6, "center", "top"),
             (5, 0, "left", "center"), (-5, 0, "right", "center"))]
# Points closer than this on the page (pixels) share one label ("k=30, 300").
MERGE_PX = 9.0
# A label placed farther than this from its point (points) gets a leader line to it.
LEADER_PT = 14.0


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
  point where it overlaps nothing placed before and stays inside the axes (else the least crowded one
  inside them; else the least crowded one, shifted back inside: a label never runs off the panel, as
  "GDesigner" did on the MATH panels when every place clashed). Labels are left out of the layout
  (`set_in_layout(False)`), so they do not move the axes they were placed in. Returns the annotations.
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

  def annotate(g, offset, ha, va, **kwargs):
    ann = ax.annotate(_merged(g["texts"]), (g["x"], g["y"]), xytext=offset, textcoords="offset points",
                      fontsize=fontsize, color=g["colour"], ha=ha, va=va, **kwargs)
    ann.set_in_layout(False)
    return ann

  out = []
  for g in groups:
    best = None
    for dx, dy, ha, va in _OFFSETS:
      ann = annotate(g, (dx, dy), ha, va)
      box = ann.get_window_extent(renderer).padded(2)  # a little air: touching labels read as one
      clashes = (not _inside(box, frame), sum(box.overlaps(p) for p in placed))  # outside: worse than any overlap
      if best is None or clashes < best[0]:
        if best is not None:
          best[1].remove()
        best = (clashes, ann, box)
      else:
        ann.remove()
      if clashes == (False, 0):
        break
    _, ann, box = best
    if not _inside(box, frame):  # no offset fits in the axes (a long label by the edge): move it in
      shift_px = (max(frame.x0 - box.x0, 0) - max(box.x1 - frame.x1, 0),
                  max(frame.y0 - box.y0, 0) - max(box.y1 - frame.y1, 0))
      pt_per_px = 72.0 / fig.dpi
      ann.xyann = (ann.xyann[0] + shift_px[0] * pt_per_px, ann.xyann[1] + shift_px[1] * pt_per_px)
      box = ann.get_window_extent(renderer).padded(2)
    if max(abs(v) for v in ann.xyann) > LEADER_PT:  # far from its point: a thin line says whose label it is
      ann.remove()
      ann = annotate(g, ann.xyann, ann.get_ha(), ann.get_va(),
                     arrowprops={"arrowstyle": "-", "lw": 0.4, "color": g["colour"], "shrinkA": 0, "shrinkB": 2})
    placed.append(box)
    out.append(ann)
  return out


def _text_box(text, renderer):
  """The box of a text's glyphs only: an annotation's own box also spans its leader line."""
  from matplotlib.text import Text  # pylint: disable=import-outside-toplevel
  return Text.get_window_extent(text, renderer)


def _inside(box, frame) -> bool:
  return frame.x0 <= box.x0 and box.x1 <= frame.x1 and frame.y0 <= box.y0 and box.y1 <= frame.y1


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
    boxes = [(t.get_text(), _text_box(t, renderer)) for t in texts]
    for i, (a, ba) in enumerate(boxes):
      for b, bb in boxes[i + 1:]:
        if ba.overlaps(bb) and ba.width > 0 and bb.width > 0:
          pairs.append((a, b))
  return pairs


def labels_outside_axes(fig) -> list[str]:
  """Texts of a drawn figure's axes (point labels) whose boxes run past their axes' frame: what the figures'
  tests check is empty."""
  fig.canvas.draw()
  renderer = fig.canvas.get_renderer()
  return [t.get_text() for ax in fig.axes for t in ax.texts
          if t.get_text() and not _inside(_text_box(t, renderer), ax.get_window_extent(renderer))]
