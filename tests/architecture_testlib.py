"""What the source-reading house-rule tests share (architecture_rules.py,
architecture_test.py): a module's syntax tree, and a package written
into a temporary folder for the tests that show a check finds its case."""
import ast
import pathlib
import textwrap
from typing import Dict


def parse(path: pathlib.Path) -> ast.Module:
  return ast.parse(path.read_text(encoding="utf-8"), filename=str(path))


def modules(package: pathlib.Path) -> Dict[str, pathlib.Path]:
  """Dotted module name -> file, for every module of `package` (a package:
  its `__init__.py`)."""
  found = {}
  for path in sorted(package.rglob("*.py")):
    parts = list(path.relative_to(package.parent).with_suffix("").parts)
    if parts[-1] == "__init__":
      parts.pop()
    found[".".join(parts)] = path
  return found


def write_package(root: pathlib.Path, files: Dict[str, str]) -> pathlib.Path:
  """`root/pkg` with each `files` name (a path in the package) holding its
  text, dedented; returns the package folder."""
  package = root / "pkg"
  for name, text in files.items():
    path = package / name
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(textwrap.dedent(text), encoding="utf-8")
  return package
