"""The sim's fingerprint follows its behaviour, not its bytes."""

from __future__ import annotations

import shutil

from hieramas_jax.experiment.backend import sim_fingerprint
from hieramas_jax.paths import PACKAGE_DIR


def test_docstring_and_comment_edits_keep_the_fingerprint_and_a_code_edit_changes_it(tmp_path):
  root = tmp_path / "sim"
  shutil.copytree(PACKAGE_DIR / "sim", root)
  (root / "data.json").write_text('{"a": 1}')
  before = sim_fingerprint([root])
  path = root / "params.py"
  src = path.read_text()
  assert src.startswith('"""')
  edited = src.replace('"""', '"""A rewritten docstring.\n\n', 1) + "\n# a new comment\n\n\n"
  path.write_text(edited)
  assert sim_fingerprint([root]) == before
  path.write_text(edited + "EXTRA_PARAMETER = 1\n")
  assert sim_fingerprint([root]) != before
  path.write_text(src)
  (root / "data.json").write_text('{"a": 2}')
  assert sim_fingerprint([root]) != before


def test_the_default_fingerprint_covers_the_sim_code_and_data():
  assert sim_fingerprint() == sim_fingerprint([PACKAGE_DIR / "sim", PACKAGE_DIR / "data" / "sim"])
