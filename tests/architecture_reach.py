"""What each command reaches: the house rules on the import closure of the
commands and on the packages' `__init__.py` files, read from the source (no
module is imported). tests/architecture_test.py runs them.

A command's closure is every module of rembert_tf/ that its module can reach
through imports, at a module's top or inside a function (a lazy import is
code the command can run), with the `__init__.py` of each package on the way
down; its figure is the lines of those modules (what
`../shared/tools/closure_lines.py` prints).
"""
import ast
import pathlib
from typing import Dict, List, Optional, Set

from architecture_testlib import modules as _modules
from architecture_testlib import parse as _parse

REPO = pathlib.Path(__file__).resolve().parents[1]
PACKAGE = REPO / "rembert_tf"

# The most lines each command's closure may hold: its figure when the table
# was last set, and a little headroom. A command that grows past its figure
# reaches code it does not run (an import through a package's __init__, a
# helper of a later stage), or its own code grew: lower what it reaches, or
# raise its figure here in the same change, saying why.
CLOSURE_LINES = {
    "rembert_tf.cli.train": 6_400,
    "rembert_tf.train": 6_400,
    "rembert_tf.cli.finetune": 8_800,
    "rembert_tf.finetune": 8_800,
    "rembert_tf.demo.__main__": 14_600,
    "rembert_tf.cli.make_demo_corpus": 2_500,
    "rembert_tf.cli.train_sentencepiece": 3_300,
    "rembert_tf.cli.create_pretraining_data": 4_100,
    "rembert_tf.cli.create_finetuning_data": 3_600,
    "rembert_tf.cli.export_savedmodel": 4_500,
    "rembert_tf.cli.convert_checkpoint": 7_800,
    "rembert_tf.cli.evaluate_xtreme": 2_500,
    "rembert_tf.cli.param_table": 2_700,
    "rembert_tf.cli.run_ablation": 15_600,
    "rembert_tf.cli.layer_similarity": 4_200,
    "rembert_tf.cli.retrieve": 6_700,
}
# The packages of the stages after a command's, which it must not reach: the
# corpus generator and the data commands come before the trainers.
TRAINERS = ("pretraining", "finetuning", "runtime", "ablation", "export")
LATER_STAGES = {
    "rembert_tf.cli.make_demo_corpus": TRAINERS + (
        "data", "checkpoints", "modeling", "evaluation", "retrieval"),
    "rembert_tf.cli.train_sentencepiece": TRAINERS + ("checkpoints",),
    "rembert_tf.cli.create_pretraining_data": TRAINERS + ("checkpoints",),
}
# `__init__.py` files that may import modules of rembert_tf: the top one and
# keras_hub/ (its classes are its public API, as keras-hub's own are).
INITS_THAT_IMPORT = frozenset({"rembert_tf", "rembert_tf.keras_hub"})


def _names(node: ast.AST, base: str) -> Set[str]:
  """The dotted names an import node names (`base`: the package it is in)."""
  if isinstance(node, ast.Import):
    return {alias.name for alias in node.names}
  if not isinstance(node, ast.ImportFrom):
    return set()
  name = node.module or ""
  if node.level:
    parts = base.split(".")
    root = ".".join(parts[:len(parts) - node.level + 1])
    name = f"{root}.{name}" if name else root
  return {name} | {f"{name}.{alias.name}" for alias in node.names}


def _base(module: str, path: pathlib.Path) -> str:
  return module if path.name == "__init__.py" else module.rpartition(".")[0]


def _imported_names(module: str, path: pathlib.Path) -> Set[str]:
  """Every dotted name an import of `module` names, at any depth."""
  base = _base(module, path)
  return {name for node in ast.walk(_parse(path)) for name in _names(node, base)}


def _reached(module: str, modules) -> Set[str]:
  """The modules of the package one import of `module` runs."""
  found = set()
  for name in _imported_names(module, modules[module]):
    while name and name not in modules:
      name = name.rpartition(".")[0]
    if not name:
      continue
    found.add(name)
    parts = name.split(".")  # a package's __init__ runs on the way down
    found.update(".".join(parts[:i]) for i in range(2, len(parts))
                 if ".".join(parts[:i]) in modules)
  return found


def closure(module: str, package: pathlib.Path = PACKAGE) -> Set[str]:
  """Every module of the package that `module` can reach, itself included."""
  modules = _modules(package)
  seen, todo = set(), [module]
  while todo:
    name = todo.pop()
    if name in seen or name not in modules:
      continue
    seen.add(name)
    todo.extend(_reached(name, modules) - seen)
  return seen


def closure_lines(module: str, package: pathlib.Path = PACKAGE) -> int:
  modules = _modules(package)
  return sum(len(modules[m].read_text(encoding="utf-8").splitlines())
             for m in closure(module, package))


def closures_over_their_figure(figures: Optional[Dict[str, int]] = None,
                               package: pathlib.Path = PACKAGE) -> List[str]:
  """`command: N lines (figure F)` of every command past its figure."""
  found = []
  for module, figure in sorted((figures or CLOSURE_LINES).items()):
    lines = closure_lines(module, package)
    if lines > figure:
      found.append(f"{module}: {lines} lines (figure {figure})")
  return found


def later_stages_reached(stages: Optional[Dict[str, tuple]] = None,
                         package: pathlib.Path = PACKAGE) -> List[str]:
  """`command -> module` of every module of a later stage a command reaches."""
  found = []
  top = package.name
  for module, later in sorted((stages or LATER_STAGES).items()):
    for reached in sorted(closure(module, package)):
      parts = reached.split(".")
      if len(parts) > 1 and parts[0] == top and parts[1] in later:
        found.append(f"{module} -> {reached}")
  return found


def inits_that_pull_in_modules(package: pathlib.Path = PACKAGE,
                               allowed=INITS_THAT_IMPORT) -> List[str]:
  """`path:line what` of every import of the package's modules, and every
  function, in a package's `__init__.py` (outside `allowed`)."""
  found = []
  modules = _modules(package)
  for module, path in modules.items():
    if path.name != "__init__.py" or module in allowed:
      continue
    where = path.relative_to(package.parent)
    for node in ast.walk(_parse(path)):
      if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)):
        found.append(f"{where}:{node.lineno} defines {node.name}()")
      own = sorted(n for n in _names(node, _base(module, path))
                   if n.split(".")[0] == package.name)
      if own:
        found.append(f"{where}:{node.lineno} imports {own[-1]}")
  return sorted(found)
