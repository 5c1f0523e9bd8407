"""Every `--flag` docs/keras_hub.md and the laid-out UPSTREAM.md name exists on the command they name.

docs_consistency_test.py checks the commands of shell blocks; this checks
the prose too: in each paragraph (or list item), every `--flag` must be a
flag of a command or script that paragraph names, or, where it names none,
of a command the page names. UPSTREAM.md is the text
tools/keras_hub_contribution/lay_out.py writes (`UPSTREAM`), or the file of
that name in tools/keras_hub_contribution/ where there is one. Command
lines of other programs (`pip install ... --index-url`) are left out.
"""
import ast
import pathlib
import re
from typing import Dict, List, Tuple

from docs import docs_consistency_test as docs

REPO = docs.REPO
TOOLS = REPO / "tools" / "keras_hub_contribution"
# A script named by its path in keras-hub's tree -> this project's copy.
LAID_OUT = {"tools/checkpoint_conversion/convert_rembert_checkpoints.py":
            "tools/keras_hub_contribution/convert_rembert_checkpoints.py"}
# Scripts the lay-out writes itself (no file here; they take no flags).
GENERATED = {"tools/sentencepiece_testing/create_rembert_test_proto.py"}
FLAG = re.compile(r"(?<![\w-])--([a-z][\w-]*)")
SCRIPT = re.compile(r"(?<![\w/])((?:tools|bench)/[\w/]+\.py)")
COMMAND = re.compile(r"(?<![\w-])(rembert-[a-z-]+)")


def upstream_text() -> str:
  """UPSTREAM.md as the lay-out writes it."""
  if (TOOLS / "UPSTREAM.md").exists():
    return (TOOLS / "UPSTREAM.md").read_text(encoding="utf-8")
  tree = ast.parse((TOOLS / "lay_out.py").read_text(encoding="utf-8"))
  constants, upstream = {}, None
  for node in tree.body:
    if isinstance(node, ast.Assign) and isinstance(node.targets[0], ast.Name):
      name = node.targets[0].id
      if isinstance(node.value, ast.Constant):
        constants[name] = node.value.value
      elif name == "UPSTREAM":
        upstream = node.value
  assert upstream is not None, "lay_out.py has no UPSTREAM"
  return eval(compile(ast.Expression(upstream), "UPSTREAM", "eval"),  # pylint: disable=eval-used
              {}, constants)


def paragraphs(text: str) -> List[str]:
  """Blank-line separated blocks, list items apart."""
  blocks = []
  for block in re.split(r"\n\s*\n", text):
    blocks += re.split(r"\n(?=\s*(?:[-*]|\d+\.)\s)", block)
  return blocks


def named_commands(text: str) -> Dict[str, pathlib.Path]:
  """name -> the file whose flags it has, for each command and script."""
  found = {}
  for script in set(SCRIPT.findall(text)) - GENERATED:
    path = REPO / LAID_OUT.get(script, script)
    assert path.exists(), f"{script}: no such script"
    found[script] = docs.command_source(path)
  for command in COMMAND.findall(text):
    if command in docs.console_scripts():
      found[command] = docs.command_source(docs.module_file(
          docs.console_scripts()[command]))
  return found


def unknown_flags(text: str) -> Tuple[List[str], int]:
  # Command lines of other programs (pip's --index-url) are not checked.
  text = re.sub(r"(?m)^\s*(?:pip|cp|git) .*$", "", text)
  text = re.sub(r"`(?:ruff|pytest) [^`]*`", "", text)  # keras-hub's CI commands
  everywhere = named_commands(text)
  unknown, checked = [], 0
  for block in paragraphs(text):
    commands = named_commands(block) or everywhere
    known = set(docs.ABSL_FLAGS)
    for path in commands.values():
      names, bools = docs.defined_flags(path)
      known |= names | {"no" + b for b in bools}
    for flag in FLAG.findall(block):
      checked += 1
      if flag not in known and flag.replace("-", "_") not in known:
        unknown.append(f"--{flag} (named beside {', '.join(sorted(commands))}"
                       f"): {block.strip()[:120]!r}")
  return unknown, checked


def test_keras_hub_guide_names_real_flags():
  unknown, checked = unknown_flags(
      (REPO / "docs" / "keras_hub.md").read_text(encoding="utf-8"))
  assert checked >= 20, checked
  assert not unknown, "\n".join(unknown)


def test_upstream_notes_name_real_flags():
  text = upstream_text()
  unknown, checked = unknown_flags(text)
  assert checked >= 3, (checked, text)
  assert not unknown, "\n".join(unknown)


def test_a_wrong_flag_is_found():
  unknown, _ = unknown_flags(
      "Run `python tools/keras_hub_contribution/convert_rembert_checkpoints.py"
      " --preset x --input y`.")
  assert len(unknown) == 1 and unknown[0].startswith("--input"), unknown
