"""Figures whose axes do not mislead, checked on the drawn figure: no two labels overlap in the frontier
(committed results) and none runs off its panel, cost axes start at zero or are log axes with plain
ticks, bars start at zero."""

from __future__ import annotations

import json

import pytest

from hieramas_jax.paths import RESULTS_DIR
from hieramas_jax.report.frontier import frontier_figure
from hieramas_jax.report.plotting import label_points, labels_outside_axes, overlapping_labels
from hieramas_jax.report.sweeps import sweep_figure, sweep_record


@pytest.fixture(autouse=True)
def _agg():
  import matplotlib  # pylint: disable=import-outside-toplevel
  matplotlib.use("Agg")
  yield
  import matplotlib.pyplot as plt  # pylint: disable=import-outside-toplevel
  plt.close("all")


def test_point_labels_close_together_are_merged_and_none_overlap():
  import matplotlib.pyplot as plt  # pylint: disable=import-outside-toplevel
  fig, ax = plt.subplots(figsize=(4, 3))
  xs = [1e-3, 1.01e-3, 1.02e-3, 2e-3, 2.05e-3, 5e-3]
  ax.plot(xs, [90, 90.05, 90.1, 91, 91.2, 95], "o")
  ax.set_xscale("log")
  anns = label_points(ax, [(x, y, f"k={k}", "C0") for x, y, k in zip(xs, [90, 90.05, 90.1, 91, 91.2, 95],
                                                                     [0, 30, 300, 100, 1000, 5])])
  assert "k=0, 30, 300" in [a.get_text() for a in anns]  # one label for points on top of each other
  assert overlapping_labels(fig) == []


def test_a_label_stays_inside_the_axes_when_every_place_clashes():
  import matplotlib.pyplot as plt  # pylint: disable=import-outside-toplevel
  fig, ax = plt.subplots(figsize=(3, 2))  # ten long labels in a small panel: no place is free for the last ones
  xs, ys = list(range(1, 11)), [50, 52, 48, 51, 49, 50.5, 49.5, 50, 51, 50]
  ax.plot(xs, ys, "o")
  ax.set_xlim(0.5, 10.2)
  ax.set_ylim(40, 60)
  anns = label_points(ax, [(x, y, f"Method-{x}-long-name", "C0") for x, y in zip(xs, ys)])
  assert len(anns) == 10
  assert labels_outside_axes(fig) == []  # (they ran off the right edge: "GDesigner" on the MATH panels)
  # A label moved far from its point gets a leader line to it; one beside its point none.
  far = [a for a in anns if max(abs(v) for v in a.xyann) > 14]
  assert far and all(a.arrow_patch is not None for a in far)
  assert all(a.arrow_patch is None for a in anns if a not in far)


def test_the_committed_frontier_has_no_overlapping_labels_and_readable_titles():
  record = json.loads((RESULTS_DIR / "hieramas_frontier.json").read_text())
  fig = frontier_figure(record)
  assert overlapping_labels(fig) == []
  assert labels_outside_axes(fig) == []  # every point label inside its panel
  titles = [ax.get_title() for ax in fig.axes if ax.get_title()]
  assert titles and all("HieraMAS's frontier" in t and "the baselines' front" in t for t in titles)
  # Plain tick labels on the log cost axes ("0.002", not "2x10^-3" stacked on each other).
  ticks = [t.get_text() for ax in fig.axes for t in ax.get_xticklabels() if t.get_text()]
  assert ticks and not any("times" in t or "^" in t for t in ticks)


def test_a_sweeps_cost_axis_starts_at_zero():
  spec = {"name": "k", "program": "p.py", "grid": {"k_pool": [50, 200, 500]}}
  points = [{"values": {"k_pool": k}, "results_file": f"r{k}.json",
             "results": {"accuracy": 90.0, "n": 250, "cost_usd": 1.0, "mean_cost_usd": c,
                         "provenance": {"backend": "sim"}}}
            for k, c in ((50, 0.006248), (200, 0.006260), (500, 0.006275))]
  fig = sweep_figure(sweep_record(spec, points, {"command": "c"}))
  cost_ax = next(ax for ax in fig.axes if ax.get_title() == "inference cost")
  lo, hi = cost_ax.get_ylim()
  assert lo == 0.0 and hi >= 0.006275


def _section_figures(section) -> dict:
  """The figures a report section draws from the committed results, by name, before they become PNGs."""
  from hieramas_jax.report.page import Page  # pylint: disable=import-outside-toplevel

  class Kept(Page):
    figs: dict = {}

    def figure(self, fig, name, caption):
      self.figs[name] = fig
      return ""

  page = Kept()
  section(page, RESULTS_DIR)
  return page.figs


def test_calibration_bars_and_stage2_losses_are_drawn_from_zero():
  from hieramas_jax.report.hieramas_figures import curves_section  # pylint: disable=import-outside-toplevel
  from hieramas_jax.report.html import calibration_section  # pylint: disable=import-outside-toplevel
  (calibration,) = _section_figures(calibration_section).values()
  bars = next(ax for ax in calibration.axes if ax.get_title().startswith("validation"))
  assert bars.get_ylim() == (0.0, 100.0)  # the bars started at 75: a few points drawn as most of the bar
  curves = _section_figures(curves_section)
  assert curves  # the committed HieraMAS results carry their curves
  for fig in curves.values():
    panels = {ax.get_title(): ax for ax in fig.axes}
    low, high = panels["stage 2: classifier loss"].get_ylim()
    assert low == 0.0 and high > 0.0  # a 0.835-0.839 loss was drawn full height
    assert panels["stage 1: accuracy"].get_ylim() == (0.0, 1.02)
