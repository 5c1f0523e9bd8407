"""The docs cannot drift from the software: every relative link in README.md
and docs/ resolves, and every command shown in a shell code block uses only
flags that command defines (what its `--helpfull` lists).

A command's flags are read from its module's source (absl `DEFINE_*` calls,
wherever they are, plus the flags of the `cli/*_flags` modules it adopts and of
Model Garden's `official.common.flags`,
`--verbose`, `--log_dir` and absl's own flags): the commands cannot all be imported into
one process (several define a flag of the same name), and reading the source
needs no process per command. One command's
real `--helpfull` is compared with what is read here, so the reading stays
honest.
"""
import ast
import functools
import importlib.util
import pathlib
import re
import shlex
import subprocess
import sys
from typing import Dict, Iterator, List, Optional, Set, Tuple

import pytest

REPO = pathlib.Path(__file__).resolve().parents[2]
DOC_FILES = [REPO / "README.md"] + sorted((REPO / "docs").rglob("*.md"))
SHELL_LANGUAGES = ("", "bash", "sh", "shell", "console")
PYTHON = ("python", "python3")
# absl's own flags, which every absl command's --helpfull lists.
ABSL_FLAGS = {"help", "helpfull", "helpshort", "helpxml", "flagfile",
              "undefok", "logtostderr", "alsologtostderr", "log_dir",
              "verbosity", "stderrthreshold", "showprefixforinfo",
              "logger_levels", "only_check_args", "pdb",
              "pdb_post_mortem", "run_with_pdb", "run_with_profiling",
              "profile_file", "use_cprofile_for_profiling"}
ABSL_BOOLS = {"logtostderr", "alsologtostderr", "showprefixforinfo",
              "only_check_args", "pdb", "pdb_post_mortem",
              "run_with_pdb", "run_with_profiling",
              "use_cprofile_for_profiling"}


# --- Reading the docs --------------------------------------------------------------
def code_blocks(path: pathlib.Path) -> Iterator[Tuple[str, str, int]]:
  """(language, body, first line number) of every fenced code block."""
  lines = path.read_text(encoding="utf-8").splitlines()
  fence, language, body, start = None, "", [], 0
  for number, line in enumerate(lines, 1):
    stripped = line.strip()
    if fence is None and stripped.startswith("```"):
      fence, language, body, start = "```", stripped[3:].strip(), [], number + 1
    elif fence is not None and stripped.startswith("```"):
      yield language, "\n".join(body), start
      fence = None
    elif fence is not None:
      body.append(line)


def shell_commands(body: str) -> Iterator[List[str]]:
  """The argv of each command in a shell block (continuations joined,
  comments dropped, split at `&&`, `||`, `;` and `|`)."""
  text = re.sub(r"\\\n", " ", body)
  for line in text.splitlines():
    line = line.strip()
    if line.startswith("$ "):
      line = line[2:]
    if not line or line.startswith("#"):
      continue
    try:
      tokens = shlex.split(line, comments=True)
    except ValueError:
      continue
    command: List[str] = []
    for token in tokens + [";"]:
      if token in ("&&", "||", ";", "|") or token.endswith(";"):
        if token.endswith(";") and token != ";":
          command.append(token[:-1])
        if command:
          yield command
        command = []
      else:
        command.append(token)


def relative_links(path: pathlib.Path) -> Iterator[Tuple[str, int]]:
  """Markdown links `[text](target)` that are not URLs or pure anchors."""
  in_code = False
  for number, line in enumerate(path.read_text(encoding="utf-8").splitlines(), 1):
    if line.strip().startswith("```"):
      in_code = not in_code
      continue
    if in_code:
      continue
    for target in re.findall(r"\]\(([^)\s]+)\)", line):
      if re.match(r"^[a-z]+:", target) or target.startswith("#"):
        continue
      yield target, number


def anchors(path: pathlib.Path) -> Set[str]:
  """GitHub's anchors of a Markdown file's headings."""
  found = set()
  for line in path.read_text(encoding="utf-8").splitlines():
    match = re.match(r"^#+\s+(.*)$", line)
    if match:
      title = re.sub(r"[`*_]", "", match.group(1)).strip().lower()
      found.add(re.sub(r"[^\w\- ]", "", title).replace(" ", "-"))
  return found


# --- Reading the commands ----------------------------------------------------------
@functools.lru_cache(maxsize=None)
def console_scripts() -> Dict[str, str]:
  """`rembert-NAME` -> the module of its `run()` (the table setup.py reads)."""
  from rembert_tf.common import command_names  # pylint: disable=g-import-not-at-top
  return dict(command_names.CONSOLE_SCRIPTS)


def module_file(module: str) -> pathlib.Path:
  path = REPO.joinpath(*module.split("."))
  return path / "__main__.py" if path.is_dir() else path.with_suffix(".py")


def command_source(path: pathlib.Path) -> pathlib.Path:
  """A two-line shim (`from rembert_tf.cli.X import run`) -> the command module."""
  tree = ast.parse(path.read_text())
  for node in tree.body:
    if (isinstance(node, ast.ImportFrom) and node.module
        and node.module.startswith("rembert_tf.cli.")
        and [a.name for a in node.names] == ["run"]):
      return module_file(node.module)
  return path


def command_file(argv: List[str]) -> Optional[pathlib.Path]:
  """The file whose flags `argv` uses; None for programs of other projects."""
  while argv and re.match(r"^[A-Z_]+=", argv[0]):   # VAR=value command ...
    argv = argv[1:]
  if not argv:
    return None
  program = argv[0]
  if program.endswith(":"):   # a command's output (`rembert-x: error: ...`)
    return None
  if program.startswith("rembert-"):
    module = console_scripts().get(program)
    assert module, f"`{program}` is not a command of this project (setup.py)"
    return command_source(module_file(module))
  if program in PYTHON and len(argv) > 1:
    if argv[1] == "-m" and argv[2].startswith("rembert_tf"):
      return command_source(module_file(argv[2]))
    if re.match(r"^(tools|bench)/\w+\.py$", argv[1]):
      assert (REPO / argv[1]).exists(), f"{argv[1]} does not exist"
      return command_source(REPO / argv[1])
  if program == "bash" and argv[1:2] == ["run.sh"]:
    return module_file("rembert_tf.demo") if argv[2:3] == ["demo"] else None
  return None


def command_arguments(argv: List[str]) -> List[str]:
  while argv and re.match(r"^[A-Z_]+=", argv[0]):
    argv = argv[1:]
  skip = 3 if argv[0] in PYTHON and argv[1] == "-m" else (
      2 if argv[0] in PYTHON or argv[0] == "bash" else 1)
  if argv[0] == "bash":
    skip = 3
  return argv[skip:]


def _string_arg(call: ast.Call) -> Optional[str]:
  if call.args and isinstance(call.args[0], ast.Constant):
    value = call.args[0].value
    return value if isinstance(value, str) else None
  return None


@functools.lru_cache(maxsize=None)
def defined_flags(path: pathlib.Path) -> Tuple[frozenset, frozenset]:
  """(flag names, boolean flag names) a command module defines or adopts."""
  names, bools = set(), set()
  tree = ast.parse(path.read_text())
  for node in ast.walk(tree):
    if isinstance(node, ast.Call):
      func = node.func
      name = func.attr if isinstance(func, ast.Attribute) else getattr(func, "id", "")
      value = _string_arg(node)
      if name.startswith("DEFINE_") and value:
        names.add(value)
        if name in ("DEFINE_bool", "DEFINE_boolean"):
          bools.add(value)
      elif name in ("add_argument", "add") and value and value.startswith("--"):
        names.add(value[2:])
        names.add(value[2:].replace("-", "_"))
    elif isinstance(node, ast.ImportFrom) and node.module == "official.common":
      if any(alias.name == "flags" for alias in node.names):  # Model Garden's
        more, more_bools = defined_flags(pathlib.Path(
            importlib.util.find_spec("official.common.flags").origin))
        names |= more
        bools |= more_bools
    elif isinstance(node, ast.ImportFrom) and node.module == "rembert_tf.cli":
      for alias in node.names:
        if alias.name.endswith("_flags"):  # runtime_flags, text_input_flags
          more, more_bools = defined_flags(module_file(f"rembert_tf.cli.{alias.name}"))
          names |= more
          bools |= more_bools
  if "absl" in path.read_text() and "command.run(" in path.read_text():
    names |= ABSL_FLAGS | {"verbose", "log_dir"}
    bools |= ABSL_BOOLS | {"verbose"}
  return frozenset(names), frozenset(bools)


def used_flags(arguments: List[str]) -> List[str]:
  """The `--flag`s of a command line, up to a bare `--` (what follows is
  passed on, e.g. Beam pipeline options)."""
  if "--" in arguments:
    arguments = arguments[:arguments.index("--")]
  return [a[2:].split("=", 1)[0] for a in arguments
          if a.startswith("--") and len(a) > 2]


def shown_commands() -> Iterator[Tuple[str, List[str]]]:
  for path in DOC_FILES:
    for language, body, line in code_blocks(path):
      if language not in SHELL_LANGUAGES:
        continue
      for argv in shell_commands(body):
        yield f"{path.relative_to(REPO)}:{line}", argv


# --- Tests --------------------------------------------------------------------------
def test_the_docs_exist():
  assert (REPO / "README.md").exists()
  assert len(DOC_FILES) > 1


@pytest.mark.parametrize("path", DOC_FILES, ids=lambda p: str(p.relative_to(REPO)))
def test_every_relative_link_resolves(path):
  broken = []
  for target, line in relative_links(path):
    file_part, _, anchor = target.partition("#")
    resolved = (path.parent / file_part).resolve() if file_part else path
    if not resolved.exists():
      broken.append(f"line {line}: {target} (no such file)")
    elif anchor and resolved.suffix == ".md" and anchor not in anchors(resolved):
      broken.append(f"line {line}: {target} (no heading #{anchor})")
  assert not broken, f"{path.relative_to(REPO)}: " + "; ".join(broken)


def test_every_shown_command_uses_flags_it_has():
  unknown, checked = [], 0
  for where, argv in shown_commands():
    path = command_file(argv)
    if path is None:
      continue
    names, bools = defined_flags(path)
    checked += 1
    for flag in used_flags(command_arguments(argv)):
      base = flag[2:] if flag.startswith("no") and flag[2:] in bools else flag
      if base not in names:
        unknown.append(f"{where}: `{' '.join(argv[:3])} ...` has no --{flag}")
  assert checked >= 10, f"only {checked} commands found in the docs"
  assert not unknown, "\n".join(unknown)


def test_flag_reading_matches_a_real_helpfull():
  """rembert-train's real --helpfull lists every flag read from its source."""
  path = command_file(["rembert-train"])
  names, _ = defined_flags(path)
  out = subprocess.run([sys.executable, "-m", "rembert_tf.train", "--helpfull"],
                       capture_output=True, text=True, cwd=REPO, timeout=300,
                       check=False)
  listed = set(re.findall(r"^\s+(?:-[\w?],)?--(?:\[no\])?(\w+)", out.stdout,
                          re.M))
  assert "model_dir" in listed and "strategy" in listed, out.stdout[-2000:]
  assert names - listed == set(), sorted(names - listed)
