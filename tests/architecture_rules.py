"""The house rules of rembert_tf/, each a function that reads the source (no
module is imported) and returns what breaks the rule, one line per finding.
tests/architecture_test.py runs them on rembert_tf/ and on small packages
written for each rule (each check finds its case).
"""
import ast
import collections
import pathlib
import re
from typing import Dict, Iterator, List, Optional, Set, Tuple

from architecture_testlib import modules as _sources
from architecture_testlib import parse as _parse

REPO = pathlib.Path(__file__).resolve().parents[1]
PACKAGE = REPO / "rembert_tf"
RUNTIME = PACKAGE / "runtime"
MAX_MODULE_LINES = 500
MAX_FUNCTION_LINES = 60
# The agreed flag of each concept the commands share -> what it names.
AGREED_FLAGS = {
    "sentencepiece_model": "a SentencePiece model file a command reads",
    "allow_sentencepiece_mismatch": "go on although the records were made "
                                    "with another SentencePiece model",
    "checkpoint": "a checkpoint a command reads and does not train",
    "checkpoint_b": "the second checkpoint of a compared pair",
    "init_checkpoint": "the checkpoint a fine-tuning run starts from",
    "model_dir": "the directory a trainer writes and resumes from",
    "output_dir": "the directory a command writes its results in",
    "output_file": "the one file a command writes its result in",
    "config_file": "the experiment YAMLs a trainer layers (Model Garden's)",
}
# A flag name with one of these words names a concept of AGREED_FLAGS (a
# SentencePiece model, a checkpoint, an output).
CONCEPT_WORDS = re.compile(r"sp_?model|sentencepiece|spm|checkpoint|ckpt|"
                           r"model_dir|^output|^out$")
# Flags with those words that name something else: settings of the
# checkpoints a run writes, not a checkpoint it reads.
OTHER_CONCEPTS = frozenset({"checkpoint_interval", "keep_checkpoints"})
# The strategy names of Model Garden's `distribute_utils`.
STRATEGY_NAMES = frozenset({"one_device", "mirrored", "multi_worker_mirrored",
                            "tpu", "parameter_server", "central_storage"})


def _known(name: str, modules) -> Optional[str]:
  """The module of the package that `name` (a module, or a name in one) is."""
  while name and name not in modules:
    name = name.rpartition(".")[0]
  return name or None


def _imports(module: str, path: pathlib.Path,
             modules) -> Iterator[Tuple[str, int]]:
  """(module of the package, line) of every import, at any depth."""
  package = module if path.name == "__init__.py" else module.rpartition(".")[0]
  for node in ast.walk(_parse(path)):
    if isinstance(node, ast.Import):
      names = [alias.name for alias in node.names]
    elif isinstance(node, ast.ImportFrom):
      base = node.module or ""
      if node.level:  # from . import x / from ..y import z
        anchor = package.split(".")[:len(package.split(".")) - node.level + 1]
        base = ".".join(anchor + ([base] if base else []))
      names = [f"{base}.{alias.name}" for alias in node.names]
    else:
      continue
    for name in names:
      target = _known(name, modules)
      if target and target != module:
        yield target, node.lineno


def import_graph(package: pathlib.Path = PACKAGE) -> Dict[str, Dict[str, int]]:
  """module -> {imported module: line of its first import}."""
  modules = _sources(package)
  graph = {}
  for module, path in modules.items():
    edges = graph.setdefault(module, {})
    for target, line in _imports(module, path, modules):
      edges.setdefault(target, line)
  return graph


def _components(graph) -> List[List[str]]:
  """Tarjan's strongly connected components of more than one module."""
  index, low, on_stack, stack, found = {}, {}, set(), [], []

  def visit(node):
    index[node] = low[node] = len(index)
    stack.append(node)
    on_stack.add(node)
    for child in sorted(graph[node]):
      if child not in index:
        visit(child)
        low[node] = min(low[node], low[child])
      elif child in on_stack:
        low[node] = min(low[node], index[child])
    if low[node] == index[node]:
      component = []
      while not component or component[-1] != node:
        component.append(stack.pop())
        on_stack.discard(component[-1])
      if len(component) > 1:
        found.append(sorted(component))

  for node in sorted(graph):
    if node not in index:
      visit(node)
  return found


def _shortest_circle(graph, members) -> List[str]:
  """A shortest circle through the first member: [a, b, ..., a]."""
  start = min(members)
  parents = {start: None}
  queue = collections.deque([start])
  while queue:
    node = queue.popleft()
    for child in sorted(graph[node]):
      if child == start:
        path = [node]
        while parents[path[-1]] is not None:
          path.append(parents[path[-1]])
        return path[::-1] + [start]
      if child in members and child not in parents:
        parents[child] = node
        queue.append(child)
  raise AssertionError(f"no circle through {start}")  # not a component


def import_circles(package: pathlib.Path = PACKAGE) -> List[str]:
  """One line per circle: `a (line N) -> b (line M) -> a`."""
  graph = import_graph(package)
  lines = []
  for component in _components(graph):
    circle = _shortest_circle(graph, set(component))
    lines.append(" -> ".join(
        f"{a} (line {graph[a][b]})" for a, b in zip(circle, circle[1:]))
                 + f" -> {circle[-1]}")
  return lines


def strategy_tables(package: pathlib.Path = PACKAGE) -> List[str]:
  """`path:line [names]` of every strategy table outside runtime/."""
  tables = []
  for path in sorted(package.rglob("*.py")):
    if package / "runtime" in path.parents:
      continue
    for node in ast.walk(_parse(path)):
      if isinstance(node, (ast.Tuple, ast.List, ast.Set)):
        elements = node.elts
      elif isinstance(node, ast.Dict):
        elements = [key for key in node.keys if key is not None]
      else:
        continue
      names = sorted({e.value for e in elements if isinstance(e, ast.Constant)
                      and e.value in STRATEGY_NAMES})
      if len(names) >= 2:
        tables.append(f"{path.relative_to(package.parent)}:{node.lineno} "
                      f"{names}")
  return tables


def long_modules(package: pathlib.Path = PACKAGE) -> List[str]:
  found = []
  for path in sorted(package.rglob("*.py")):
    lines = len(path.read_text(encoding="utf-8").splitlines())
    if lines > MAX_MODULE_LINES:
      found.append(f"{path.relative_to(package.parent)}: {lines} lines")
  return found


def long_functions(package: pathlib.Path = PACKAGE) -> List[str]:
  found = []
  for path in sorted(package.rglob("*.py")):
    for node in ast.walk(_parse(path)):
      if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)):
        lines = node.end_lineno - node.lineno + 1
        if lines > MAX_FUNCTION_LINES:
          found.append(f"{path.relative_to(package.parent)}:{node.lineno} "
                       f"{node.name}: {lines} lines")
  return found


def _constant(path: pathlib.Path, name: str):
  """The literal value a module assigns to `name` at its top level."""
  for node in _parse(path).body:
    if isinstance(node, ast.Assign) and any(
        isinstance(t, ast.Name) and t.id == name for t in node.targets):
      return ast.literal_eval(node.value)
  raise AssertionError(f"{path} assigns no {name}")


def defined_flags(path: pathlib.Path) -> Iterator[Tuple[str, int]]:
  """(name, line) of every `flags.DEFINE_*("name", ...)` of a module."""
  for node in ast.walk(_parse(path)):
    if (isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute)
        and node.func.attr.startswith("DEFINE_")
        and node.func.attr != "DEFINE_alias" and node.args
        and isinstance(node.args[0], ast.Constant)):
      yield node.args[0].value, node.lineno


def flags_outside_the_agreed_set(package: pathlib.Path = PACKAGE,
                                 agreed: Dict[str, str] = AGREED_FLAGS
                                 ) -> List[str]:
  """`path:line --name: ...` of every flag that names a shared concept
  otherwise than `agreed` says (the new names of cli/deprecated_flags.py's
  DEPRECATED_FLAGS too)."""
  table = package / "cli" / "deprecated_flags.py"
  deprecated = _constant(table, "DEPRECATED_FLAGS")
  found = []
  for path in sorted(package.rglob("*.py")):
    where = path.relative_to(package.parent)
    in_cli = path.parent == package / "cli"
    old_names = deprecated.get(path.stem, {}) if in_cli else {}
    for name, line in defined_flags(path):
      if name in old_names:
        found.append(f"{where}:{line} --{name}: a deprecated alias; define "
                     f"--{old_names[name]}")
      elif (CONCEPT_WORDS.search(name) and name not in agreed
            and name not in OTHER_CONCEPTS):
        found.append(f"{where}:{line} --{name}: not an agreed name "
                     f"({', '.join('--' + n for n in agreed)})")
  for command, renamed in deprecated.items():
    found += [f"{table.relative_to(package.parent)}: {command} --{old} -> "
              f"--{new}: not an agreed name" for old, new in renamed.items()
              if new not in agreed]
  return found


# Modules named for checkpoints that are not this project's checkpoint code:
# the command that converts them, and keras-hub's reader of a Hugging Face
# folder (the Keras 3 side imports nothing of the TensorFlow side).
CHECKPOINT_NAMED_ELSEWHERE = frozenset({"cli.convert_checkpoint",
                                        "keras_hub.transformers_checkpoint"})
CHECKPOINTS_MAY_IMPORT = ("checkpoints", "common", "modeling")


def checkpoint_homes(package: pathlib.Path = PACKAGE) -> List[str]:
  """Checkpoint modules outside checkpoints/, and what checkpoints/ or the
  model core import against the floor."""
  found = []
  top = package.name
  for module, edges in sorted(import_graph(package).items()):
    local = module[len(top) + 1:]
    area = local.split(".")[0]
    if ("checkpoint" in local.rpartition(".")[2] and area != "checkpoints"
        and local not in CHECKPOINT_NAMED_ELSEWHERE):
      found.append(f"{module}: a checkpoint module outside {top}.checkpoints")
    for target, line in sorted(edges.items()):
      target_area = target[len(top) + 1:].split(".")[0]
      if area == "checkpoints" and target_area not in CHECKPOINTS_MAY_IMPORT:
        found.append(f"{module} (line {line}) imports {target}, above "
                     f"{top}.checkpoints")
      if area == "modeling" and target_area == "checkpoints":
        found.append(f"{module} (line {line}) imports {target}: the model "
                     "core sits below the checkpoints")
  return found


# The XTREME task table, and the areas it may import.
TASK_TABLE = ("evaluation", "xtreme_tasks")
TASK_TABLE_MAY_IMPORT = ("common",)


def _task_names(table: pathlib.Path) -> Set[str]:
  """The table's task names: the first argument of each `XtremeTask(...)`."""
  return {node.args[0].value for node in ast.walk(_parse(table))
          if isinstance(node, ast.Call) and isinstance(node.func, ast.Name)
          and node.func.id == "XtremeTask" and node.args
          and isinstance(node.args[0], ast.Constant)}


def _dict_keys(node: ast.AST) -> List[str]:
  """The constant keys of a dict literal or of a `dict(key=...)` call."""
  if isinstance(node, ast.Dict):
    return [k.value for k in node.keys if isinstance(k, ast.Constant)]
  if (isinstance(node, ast.Call) and isinstance(node.func, ast.Name)
      and node.func.id == "dict"):
    return [k.arg for k in node.keywords if k.arg]
  return []


def task_tables(package: pathlib.Path = PACKAGE) -> List[str]:
  """What the task table imports above common/, and `path:line [names]` of
  every dict keyed by two or more task names outside it."""
  top = package.name
  module = ".".join((top,) + TASK_TABLE)
  table = package.joinpath(*TASK_TABLE).with_suffix(".py")
  found = [f"{module} (line {line}) imports {target}, above "
           f"{top}.{'/'.join(TASK_TABLE_MAY_IMPORT)}"
           for target, line in _imports(module, table, _sources(package))
           if target[len(top) + 1:].split(".")[0] not in TASK_TABLE_MAY_IMPORT]
  names = _task_names(table)
  for path in sorted(package.rglob("*.py")):
    if path == table:
      continue
    for node in ast.walk(_parse(path)):
      keys = sorted(set(_dict_keys(node)) & names)
      if len(keys) >= 2:
        found.append(f"{path.relative_to(package.parent)}:{node.lineno} {keys}")
  return found


# --- One training loop for both trainers ------------------------------------
PRINTER_HOME = ("runtime", "orbit_loop.py")
SIGTERM_HOME = ("runtime", "preemption.py")
ORBIT_INTERNALS = ("_maybe_save_checkpoint", "_train_loop_fn", "_train_iter",
                   "_checkpoint_options")
PREEMPTED = "TrainingPreempted"


def _modules_outside(package: pathlib.Path, home: Tuple[str, ...]
                     ) -> Iterator[Tuple[str, ast.Module]]:
  """(`path` as printed, tree) of every module but `home`."""
  skip = package.joinpath(*home)
  for path in sorted(package.rglob("*.py")):
    if path != skip:
      yield str(path.relative_to(package.parent)), _parse(path)


def _name(node: ast.AST) -> str:
  """`a.b.c` of a Name / Attribute chain ('' for anything else)."""
  if isinstance(node, ast.Name):
    return node.id
  if isinstance(node, ast.Attribute):
    base = _name(node.value)
    return f"{base}.{node.attr}" if base else node.attr
  return ""


def _in_file_order(found: List[str]) -> List[str]:
  """`path:line ...` findings by path, then line (ast.walk goes by depth)."""
  return sorted(found, key=lambda line: (line.split(":")[0],
                                         int(line.split(":")[1].split()[0]),
                                         line))


def second_progress_printers(package: pathlib.Path = PACKAGE) -> List[str]:
  """`path:line` of every call of `loop_line` outside the runtime's printer."""
  found = []
  for where, tree in _modules_outside(package, PRINTER_HOME):
    for node in ast.walk(tree):
      if (isinstance(node, ast.Call)
          and _name(node.func).rpartition(".")[2] == "loop_line"):
        found.append(f"{where}:{node.lineno} calls loop_line")
  return _in_file_order(found)


def _sigterm_path(node: ast.AST) -> str:
  """What makes `node` a SIGTERM path ('' when it is none)."""
  if isinstance(node, ast.Attribute) and node.attr == "SIGTERM":
    return "names signal.SIGTERM"
  if isinstance(node, ast.ImportFrom) and node.module == "signal":
    return "imports from signal"
  if isinstance(node, ast.Call):
    called = _name(node.func)
    if called.endswith("signal.signal"):
      return "installs a signal handler"
    if called.rpartition(".")[2] == PREEMPTED or called.endswith(
        f"{PREEMPTED}.after_save"):
      return f"builds {PREEMPTED}"
  if isinstance(node, ast.Raise) and node.exc is not None and (
      _name(node.exc).rpartition(".")[2] == PREEMPTED):
    return f"raises {PREEMPTED}"
  if (isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef))
      and node.name in ("after_loop", "_maybe_save_checkpoint")):
    return f"overrides the controller's {node.name}"
  return ""


def second_sigterm_paths(package: pathlib.Path = PACKAGE) -> List[str]:
  """`path:line what` of every SIGTERM path outside runtime/preemption.py."""
  found = []
  loop_home = "/".join(PRINTER_HOME)
  for where, tree in _modules_outside(package, SIGTERM_HOME):
    for node in ast.walk(tree):
      what = _sigterm_path(node)
      # The loop module defines the hook the SIGTERM path overrides.
      if what.startswith("overrides") and where.endswith(loop_home):
        continue
      if what:
        found.append(f"{where}:{node.lineno} {what}")
  return _in_file_order(found)


def orbit_internals_outside_their_module(package: pathlib.Path = PACKAGE
                                         ) -> List[str]:
  """`path:line name` of every orbit private member named outside
  runtime/orbit_loop.py (an attribute, a definition or a string)."""
  found = []
  for where, tree in _modules_outside(package, PRINTER_HOME):
    for node in ast.walk(tree):
      name = (node.attr if isinstance(node, ast.Attribute) else
              node.name if isinstance(node, (ast.FunctionDef,
                                             ast.AsyncFunctionDef)) else None)
      if name in ORBIT_INTERNALS:
        found.append(f"{where}:{node.lineno} {name}")
  return _in_file_order(found)


# --- The trainers on Model Garden's runner as it is -------------------------
LIBRARY_ROOTS = ("orbit", "official")
RUNNER_INTERNALS = ORBIT_INTERNALS + (
    "_maybe_build_checkpoint_manager", "_build_controller", "_build_trainer",
    "_train_n_steps", "_log")


def _private_library_names(node: ast.AST) -> List[str]:
  """The private orbit / Model Garden names an import names."""
  if isinstance(node, ast.ImportFrom) and (node.module or "").split(".")[0] in (
      LIBRARY_ROOTS):
    parts = node.module.split(".") + [alias.name for alias in node.names]
  elif isinstance(node, ast.Import):
    parts = [part for alias in node.names
             if alias.name.split(".")[0] in LIBRARY_ROOTS
             for part in alias.name.split(".")]
  else:
    return []
  return [part for part in parts if part.startswith("_")]


def private_loop_machinery(package: pathlib.Path = PACKAGE) -> List[str]:
  """`path:line what` of a subclass of a Controller (orbit's or one built on
  it), an override of a private runner / controller / trainer method, an
  import of a private orbit or Model Garden name."""
  found = []
  for where, tree in _modules_outside(package, ()):
    for node in ast.walk(tree):
      if isinstance(node, ast.ClassDef):
        for base in node.bases:
          if _name(base).split(".")[-1].endswith("Controller"):
            found.append(f"{where}:{node.lineno} subclasses {_name(base)}")
      elif (isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef))
            and node.name in RUNNER_INTERNALS):
        found.append(f"{where}:{node.lineno} overrides {node.name}")
      for name in _private_library_names(node):
        found.append(f"{where}:{node.lineno} imports {name}")
  return _in_file_order(found)


# --- One reading path for the pre-training records -------------------------
READER = ("data", "pretraining_input_pipeline.py")
AREAS = ("pretraining", "data")
RECORD_READERS = frozenset({"TFRecordDataset", "tf_record_iterator"})


def second_record_readers(package: pathlib.Path = PACKAGE) -> List[str]:
  """`path:line name` of every record reader named outside the pipeline."""
  found = []
  for area in AREAS:
    for path in sorted((package / area).rglob("*.py")):
      if path == package.joinpath(*READER):
        continue
      for node in ast.walk(_parse(path)):
        name = (node.attr if isinstance(node, ast.Attribute) else
                node.id if isinstance(node, ast.Name) else None)
        if name in RECORD_READERS:
          found.append(f"{path.relative_to(package.parent)}:{node.lineno} "
                       f"{name}")
  return found
