"""Snippet markers: which code blocks of the docs and docstrings the suite runs.

Every fenced ```bash and ```python block of README.md and docs/*.md, and
every ```python block of a docstring's `Example:` / `Examples:` in
rembert_tf/, carries one marker on the line just above its fence:

    <!-- snippet: run -->
        The suite runs the block as printed: a Python block saved as a script
        file and run with the test interpreter, a shell block with bash (the
        `rembert-*` console scripts of this checkout on PATH). The blocks of
        one page run in page order in one fresh temporary directory, so a
        block may use what an earlier block of its page wrote.
    <!-- snippet: not run: REASON -->
        The block cannot run here; REASON says why (a Cloud TPU, `gs://`, the
        released checkpoint, a network download, minutes of training). Its
        Python must still compile, and the flags of its commands are checked
        against the commands' real flags (docs_consistency_test).

A docstring `Example:` without a marker runs when it is a self-contained
script (`docstring_examples_test`); one that is not must say why not.

A page may start its directory with inputs the tests build once per session
(a line anywhere in the page):

    <!-- snippet setup: NAME, NAME -->

`SETUPS` in snippets_test.py says what each NAME writes (e.g. `corpus`: the
tests' small demo corpus under `corpus/`; `pretrain_run`: a tiny pre-training
run directory under `runs/pretrain`).

README.md's blocks are run by readme_quickstart_test.py (its table lists the
settings it shrinks); the other pages by snippets_test.py.
"""
import ast
import dataclasses
import pathlib
import re
import textwrap
from typing import Iterator, List, Optional

REPO = pathlib.Path(__file__).resolve().parents[2]
PAGES = [REPO / "README.md"] + sorted((REPO / "docs").glob("*.md"))
MARKED_LANGUAGES = ("bash", "python")
MARKER = re.compile(r"^\s*<!--\s*snippet:\s*(run|not run)\s*(?::\s*(.*?))?\s*-->\s*$")
SETUP = re.compile(r"^\s*<!--\s*snippet setup:\s*(.*?)\s*-->\s*$")
EXAMPLE_HEADING = re.compile(r"^\s*Examples?\b")


@dataclasses.dataclass
class Snippet:
  where: str              # page:line or module.py:name
  language: str
  body: str
  marker: Optional[str]   # "run", "not run" or None
  reason: str = ""


def blocks(lines: List[str], where: str) -> Iterator[Snippet]:
  """The fenced blocks of `lines`, each with the marker just above it."""
  fence_at = None
  for number, line in enumerate(lines):
    stripped = line.strip()
    if fence_at is None and stripped.startswith("```"):
      fence_at, language, body = number, stripped[3:].strip(), []
    elif fence_at is not None and stripped.startswith("```"):
      match = MARKER.match(lines[fence_at - 1]) if fence_at else None
      yield Snippet(f"{where}:{fence_at + 1}", language,
                    textwrap.dedent("\n".join(body)),
                    match.group(1) if match else None,
                    (match.group(2) or "") if match else "")
      fence_at = None
    elif fence_at is not None:
      body.append(line)


def page_snippets(page: pathlib.Path) -> List[Snippet]:
  """The bash and python blocks of a Markdown page."""
  lines = page.read_text(encoding="utf-8").splitlines()
  name = str(page.relative_to(REPO)) if page.is_relative_to(REPO) else page.name
  return [s for s in blocks(lines, name)
          if s.language in MARKED_LANGUAGES]


def page_setups(page: pathlib.Path) -> List[str]:
  names = []
  for line in page.read_text(encoding="utf-8").splitlines():
    match = SETUP.match(line)
    if match:
      names += [n.strip() for n in match.group(1).split(",") if n.strip()]
  return names


def command_module(path: pathlib.Path) -> bool:
  """A command's module: its docstring is its --help (flags checked only)."""
  return path.parent.name == "cli"


def docstring_examples() -> Iterator[Snippet]:
  """The python blocks after an `Example:` heading of every docstring in
  rembert_tf/ (modules, classes, functions), command modules excepted."""
  for path in sorted((REPO / "rembert_tf").rglob("*.py")):
    if command_module(path):
      continue
    tree = ast.parse(path.read_text(encoding="utf-8"))
    nodes = [tree] + [n for n in ast.walk(tree) if isinstance(
        n, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef))]
    for node in nodes:
      doc = ast.get_docstring(node, clean=True)
      if not doc:
        continue
      lines = doc.splitlines()
      starts = [k for k, l in enumerate(lines) if EXAMPLE_HEADING.match(l)]
      if not starts:
        continue
      name = getattr(node, "name", "<module>")
      where = f"{path.relative_to(REPO)}:{name}"
      found = [s for s in blocks(lines[starts[0]:], where)
               if s.language in ("python", "")]
      for k, snippet in enumerate(found):
        snippet.language = "python"
        snippet.where = where if k == 0 else f"{where} (block {k + 1})"
        yield snippet
