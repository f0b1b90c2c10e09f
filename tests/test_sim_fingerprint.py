"""The sim's fingerprint follows its behaviour, not its bytes."""

from __future__ import annotations

import ast
import shutil

from hieramas_jax.experiment.backend import canonical_tree, sim_fingerprint
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


def test_a_field_newer_pythons_add_empty_leaves_the_tree_bytes_unchanged():
  # Python 3.12 gave every FunctionDef a `type_params` list (empty unless generic); ast.dump wrote
  # it out, so one sim had another fingerprint on 3.12 (and again on 3.13, whose dump omits empties).
  old_class = type("FunctionDef", (ast.AST,), {"_fields": ("name", "body", "returns")})
  new_class = type("FunctionDef", (ast.AST,), {"_fields": ("name", "body", "returns", "type_params")})
  body = ast.parse("x = 1").body
  old = old_class(name="f", body=body, returns=None)
  assert canonical_tree(old) == canonical_tree(new_class(name="f", body=body, returns=None, type_params=[]))
  assert canonical_tree(old) != canonical_tree(new_class(name="f", body=body, returns=None,
                                                         type_params=[ast.Name(id="T")]))
  assert canonical_tree(old) != canonical_tree(old_class(name="g", body=body, returns=None))
  assert canonical_tree(ast.parse("x = 1.5")) != canonical_tree(ast.parse("x = 1.25"))
