"""Puts laid-out Python into keras-hub's style: its ruff settings, 80 columns.

keras-hub's pre-commit runs `ruff check --fix` and `ruff format` with its
pyproject.toml (keras_hub_ci/pyproject.toml here: 80 columns, four-space
indentation, isort with one import a line). This project writes two-space
indentation, so a comment or docstring line that fit here may pass 80
columns there; `ruff format` leaves such lines alone, so they are wrapped at
word boundaries here (a trailing comment moves above its line; a string
literal is cut in two; an import of a long module path gets keras-hub's
`# noqa: E501`), between runs of ruff. ruff runs on a local temporary copy
of the files (the output folder may be remote).
"""
import io
import pathlib
import re
import subprocess
import tempfile
import textwrap
import tokenize
from typing import Dict, List

PYPROJECT = (pathlib.Path(__file__).resolve().parent / "keras_hub_ci" /
             "pyproject.toml")
WIDTH = 80


class StyleError(RuntimeError):
  """ruff is missing or refused a file."""


def _ruff(args: List[str], folder: str) -> None:
  """Runs ruff (its binary, found as `python -m ruff` finds it) with
  keras-hub's settings on every file under `folder`."""
  try:
    from ruff import __main__ as ruff_main  # pylint: disable=g-import-not-at-top
  except ImportError:
    raise StyleError("ruff is not installed; pip install ruff (keras-hub's "
                     "pre-commit runs it), or pass --noformat.") from None
  command = [ruff_main.find_ruff_bin(), *args, "--no-cache", "--quiet",
             "--config", str(PYPROJECT), "."]
  result = subprocess.run(command, capture_output=True, text=True,
                          cwd=folder, check=False)
  if result.returncode != 0:
    raise StyleError(f"ruff {args[0]} refused the laid-out files: "
                     f"{(result.stdout + result.stderr).strip()[-800:]}")


def _wrap(line: str, prefix: str) -> List[str]:
  indent = line[:len(line) - len(line.lstrip())]
  text = line.strip()[len(prefix):].strip()
  return textwrap.wrap(text, WIDTH - len(indent) - len(prefix),
                       initial_indent=indent + prefix,
                       subsequent_indent=indent + prefix,
                       break_long_words=False, break_on_hyphens=False) or [
                           line]


def _split_literal(line: str, token) -> List[str]:
  """A string literal over WIDTH -> two literals (implicitly joined), cut
  at the last space that fits, outside an f-string's braces."""
  column, text = token.start[1], token.string
  prefix = text[:len(text) - len(text.lstrip("rbfRBF"))]
  quote = text[len(prefix)]
  body, rest = text[len(prefix) + 1:-1], line[column + len(text):]
  limit = WIDTH - column - len(prefix) - 2
  depth, cut = 0, None
  for index, char in enumerate(body):
    depth += (char == "{") - (char == "}") if "f" in prefix.lower() else 0
    if char == " " and depth == 0 and 0 < index < limit:
      cut = index + 1
  if cut is None:
    return [line]
  indent = line[:column]
  return [f"{indent}{prefix}{quote}{body[:cut]}{quote}",
          f"{indent}{prefix}{quote}{body[cut:]}{quote}{rest}"]


def _long_text_lines(source: str):
  """Line number -> "comment" (own line), "trailing" (comment column) or
  "string" (inside a multi-line string), for lines over WIDTH."""
  kinds = {}
  lines = source.splitlines()
  for token in tokenize.generate_tokens(io.StringIO(source).readline):
    if token.type == tokenize.COMMENT and "noqa" not in token.string:
      row = token.start[0]
      own = not lines[row - 1][:token.start[1]].strip()
      kinds[row] = "comment" if own else ("trailing", token.start[1])
    elif token.type == tokenize.STRING and token.start[0] != token.end[0]:
      for row in range(token.start[0], token.end[0]):
        kinds[row] = "string"
    elif token.type == tokenize.STRING:
      line = lines[token.start[0] - 1]
      if line.strip().startswith(token.string):
        triple = token.string.lstrip("rbfRBF")[:3] in ('"""', "'''")
        kinds[token.start[0]] = "string" if triple else ("literal", token)
  return {row: kind for row, kind in kinds.items()
          if len(lines[row - 1]) > WIDTH}


def wrap_long_lines(source: str) -> str:
  """Comments and docstring lines over WIDTH, wrapped (see the module
  docstring); code lines are ruff's."""
  long_lines = _long_text_lines(source)
  out = []
  for row, line in enumerate(source.splitlines(), start=1):
    kind = long_lines.get(row)
    if line.startswith("from ") and line.endswith(" import (") and len(
        line) > WIDTH:   # a long module path: keras-hub's own exemption
      out.append(line + "  # noqa: E501")
    elif kind == "comment":
      out += _wrap(line, "# ")
    elif isinstance(kind, tuple) and kind[0] == "trailing":
      code, comment = line[:kind[1]].rstrip(), line[kind[1]:]
      indent = code[:len(code) - len(code.lstrip())]
      out += _wrap(indent + comment, "# ") + [code]
    elif kind == "string" and not line.lstrip().startswith("|"):
      out += _wrap(line, "")
    elif isinstance(kind, tuple) and kind[0] == "literal":
      out += _split_literal(line, kind[1])
    else:
      out.append(line)
  return "\n".join(out) + "\n"


def drop_pylint_comments(source: str) -> str:
  """keras-hub runs no pylint: its pragmas go (a line holding one alone
  too)."""
  out = []
  for line in source.splitlines():
    kept = re.sub(r"\s*#\s*pylint:.*$", "", line)
    if kept.strip() or not line.strip():
      out.append(kept)
  return "\n".join(out) + "\n"


def keras_hub_style(files: Dict[str, str]) -> Dict[str, str]:
  """Python files (keras-hub path -> source) as keras-hub's pre-commit
  leaves them, lines within WIDTH."""
  with tempfile.TemporaryDirectory() as folder:
    root = pathlib.Path(folder)
    for name, source in files.items():
      (root / name).parent.mkdir(parents=True, exist_ok=True)
      (root / name).write_text(drop_pylint_comments(source), encoding="utf-8")
    # --unsafe-fixes: a lambda assigned to a name becomes a def (E731).
    _ruff(["check", "--fix", "--unsafe-fixes", "--exit-zero"], folder)
    _ruff(["format"], folder)
    for _ in range(3):   # a wrapped line may leave another one to wrap
      changed = False
      for name in files:
        source = (root / name).read_text(encoding="utf-8")
        wrapped = wrap_long_lines(source)
        if wrapped != source:
          (root / name).write_text(wrapped, encoding="utf-8")
          changed = True
      if not changed:
        break
      _ruff(["format"], folder)
    return {name: (root / name).read_text(encoding="utf-8") for name in files}
