"""The house rules of rembert_tf/, read from its source (no module is imported).
(The training loop's rules are architecture_loop_test.py's.)

* no import circle between the modules of rembert_tf/, imports inside
  functions included: a circle hidden in a function is still a circle (the
  modules cannot be understood, tested or moved apart);
* the tf.distribute strategy table (the `--strategy` names) lives in
  rembert_tf/runtime/ alone: elsewhere a tuple, list, set or dict literal
  naming two strategies is a second table;
* checkpoints live in rembert_tf/checkpoints/ alone (a module named for
  checkpoints elsewhere is a second home), and that package imports only the
  model core and common/: it is the floor between the models and their users;
* the facts of an XTREME task are its entry of the task table
  (evaluation/xtreme_tasks.py) alone: elsewhere a dict keyed by two task
  names (`{"xnli": ..., "pawsx": ...}` or `dict(xnli=..., pawsx=...)`) is a
  second table; the table imports only common/, so every layer can read it;
* no module over MAX_MODULE_LINES lines, no function over MAX_FUNCTION_LINES
  (from its `def` line to its last line);
* one flag name per concept: an absl flag whose name speaks of a
  SentencePiece model, a checkpoint or an output is one of
  `rembert_tf.cli.flag_names.AGREED_FLAGS`, and no command defines a name
  that its `DEPRECATED_FLAGS` keeps as an alias.
"""
import ast
import collections
import pathlib
import re
from typing import Dict, Iterator, List, Optional, Set, Tuple

from architecture_testlib import parse as _parse
from architecture_testlib import write_package as _write_package

REPO = pathlib.Path(__file__).resolve().parents[1]
PACKAGE = REPO / "rembert_tf"
RUNTIME = PACKAGE / "runtime"
MAX_MODULE_LINES = 500
MAX_FUNCTION_LINES = 60
# A flag name with one of these words names a concept of
# rembert_tf/cli/flag_names.py (a SentencePiece model, a checkpoint, an output).
CONCEPT_WORDS = re.compile(r"sp_?model|sentencepiece|spm|checkpoint|ckpt|"
                           r"model_dir|^output|^out$")
# Flags with those words that name something else: settings of the
# checkpoints a run writes, not a checkpoint it reads.
OTHER_CONCEPTS = frozenset({"checkpoint_interval", "keep_checkpoints"})
# The strategy names of Model Garden's `distribute_utils`.
STRATEGY_NAMES = frozenset({"one_device", "mirrored", "multi_worker_mirrored",
                            "tpu", "parameter_server", "central_storage"})


def _sources(package: pathlib.Path) -> Dict[str, pathlib.Path]:
  """Dotted module name -> file, for every module of `package`."""
  modules = {}
  for path in sorted(package.rglob("*.py")):
    parts = list(path.relative_to(package.parent).with_suffix("").parts)
    if parts[-1] == "__init__":
      parts.pop()
    modules[".".join(parts)] = path
  return modules


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


def flags_outside_the_agreed_set(package: pathlib.Path = PACKAGE) -> List[str]:
  """`path:line --name: ...` of every flag that names a shared concept
  otherwise than cli/flag_names.py agrees."""
  table = package / "cli" / "flag_names.py"
  agreed = _constant(table, "AGREED_FLAGS")
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


def test_no_import_circles():
  circles = import_circles()
  assert not circles, "import circles:\n" + "\n".join(circles)


def test_the_strategy_table_lives_in_the_runtime_alone():
  tables = strategy_tables()
  assert not tables, ("strategy tables outside rembert_tf/runtime/ (take "
                      "rembert_tf.runtime.strategies'):\n" + "\n".join(tables))


def test_every_flag_of_a_shared_concept_has_its_agreed_name():
  found = flags_outside_the_agreed_set()
  assert not found, ("flag names outside rembert_tf/cli/flag_names.py's "
                     "agreed set:\n" + "\n".join(found))


def test_checkpoints_have_one_home_above_the_model_core():
  found = checkpoint_homes()
  assert not found, "\n".join(found)


def test_the_facts_of_an_xtreme_task_live_in_the_task_table_alone():
  found = task_tables()
  assert not found, ("per-task tables outside rembert_tf/evaluation/"
                     "xtreme_tasks.py (make each a field of the task's entry "
                     "there):\n" + "\n".join(found))


def test_no_module_over_500_lines():
  found = long_modules()
  assert not found, f"over {MAX_MODULE_LINES} lines:\n" + "\n".join(found)


def test_no_function_over_60_lines():
  found = long_functions()
  assert not found, f"over {MAX_FUNCTION_LINES} lines:\n" + "\n".join(found)


# --- The checks find what they look for ---------------------------------------
def test_a_circle_hidden_in_a_function_is_found(tmp_path):
  package = _write_package(tmp_path, {
      "__init__.py": "",
      "data/__init__.py": "",
      "data/local.py": "from pkg.data import engine\n",
      "data/engine.py": """
          def run():
            from . import local  # hidden in a function
          """,
      "data/leaf.py": "import pkg.data.local\n",
  })
  assert import_circles(package) == [
      "pkg.data.engine (line 3) -> pkg.data.local (line 1) -> pkg.data.engine"]


def test_a_strategy_table_outside_the_runtime_is_found(tmp_path):
  package = _write_package(tmp_path, {
      "__init__.py": "",
      "runtime/strategies.py": 'STRATEGIES = ("one_device", "tpu")\n',
      "cli/flags.py": """
          CHOICES = ["one_device", "mirrored", "tpu"]
          DEFAULT = "one_device"
          ONE = ("tpu",)
          """,
  })
  assert strategy_tables(package) == [
      "pkg/cli/flags.py:2 ['mirrored', 'one_device', 'tpu']"]


def test_a_second_checkpoint_home_and_an_import_against_the_floor_are_found(
    tmp_path):
  package = _write_package(tmp_path, {
      "__init__.py": "",
      "checkpoints/__init__.py": "",
      "checkpoints/checkpoint_layout.py": "from pkg.modeling import config\n",
      "checkpoints/checkpoint_restore.py": "from pkg.finetuning import task\n",
      "modeling/__init__.py": "",
      "modeling/config.py": "",
      "modeling/encoder.py": "from pkg.checkpoints import checkpoint_layout\n",
      "finetuning/__init__.py": "",
      "finetuning/task.py": "",
      "finetuning/checkpoint_reader.py": "",
  })
  assert checkpoint_homes(package) == [
      "pkg.checkpoints.checkpoint_restore (line 1) imports pkg.finetuning.task,"
      " above pkg.checkpoints",
      "pkg.finetuning.checkpoint_reader: a checkpoint module outside "
      "pkg.checkpoints",
      "pkg.modeling.encoder (line 1) imports pkg.checkpoints.checkpoint_layout:"
      " the model core sits below the checkpoints"]


def test_a_second_task_table_and_an_import_above_the_table_are_found(
    tmp_path):
  package = _write_package(tmp_path, {
      "__init__.py": "",
      "common/__init__.py": "",
      "common/fileio.py": "",
      "evaluation/__init__.py": "",
      "evaluation/xtreme_tasks.py": """
          from pkg.common import fileio
          from pkg.evaluation import xtreme_scorer
          TASKS = {t.name: t for t in (XtremeTask("xnli", "classification"),
                                       XtremeTask("pawsx", "classification"),
                                       XtremeTask("bucc2018", "retrieval"))}
          """,
      "evaluation/xtreme_scorer.py": """
          METRIC = {"xnli": "accuracy", "pawsx": "accuracy"}
          def paper():
            return dict(xnli=70.7, bucc2018=None)
          ONE_TASK = {"xnli": 1, "other": 2}
          BY_CATEGORY = {"classification": ("xnli", "pawsx")}
          """,
  })
  assert task_tables(package) == [
      "pkg.evaluation.xtreme_tasks (line 3) imports "
      "pkg.evaluation.xtreme_scorer, above pkg.common",
      "pkg/evaluation/xtreme_scorer.py:2 ['pawsx', 'xnli']",
      "pkg/evaluation/xtreme_scorer.py:4 ['bucc2018', 'xnli']"]


def test_long_modules_and_functions_are_found(tmp_path):
  body = "".join(f"  x{i} = {i}\n" for i in range(MAX_FUNCTION_LINES - 1))
  package = _write_package(tmp_path, {
      "ok.py": "def f():\n" + body,
      "long.py": "def g():\n" + body + "  return 1\n" + "\n" * 500,
  })
  assert long_functions(package) == [f"pkg/long.py:1 g: {MAX_FUNCTION_LINES + 1} lines"]
  assert long_modules(package) == [f"pkg/long.py: {MAX_FUNCTION_LINES + 1 + 500} lines"]


def test_a_flag_name_outside_the_agreed_set_is_found(tmp_path):
  package = _write_package(tmp_path, {
      "__init__.py": "",
      "cli/flag_names.py": """
          AGREED_FLAGS = {"sentencepiece_model": "", "checkpoint": "",
                          "output_dir": ""}
          DEPRECATED_FLAGS = {"export": {"model_dir": "checkpoint",
                                         "vocab": "spm_file"}}
          """,
      "cli/export.py": """
          from absl import flags
          flags.DEFINE_string("sentencepiece_model", None, "fine")
          flags.DEFINE_string("model_dir", None, "the old name")
          flags.DEFINE_alias("sp_model", "sentencepiece_model")
          """,
      "cli/convert.py": """
          from absl import flags
          flags.DEFINE_string("output", None, "where results go")
          flags.DEFINE_string("input_ckpt", None, "a checkpoint")
          flags.DEFINE_integer("checkpoint_interval", 5, "another concept")
          flags.DEFINE_string("model_dir", None, "deprecated in export only")
          """,
  })
  assert flags_outside_the_agreed_set(package) == [
      "pkg/cli/convert.py:3 --output: not an agreed name (--sentencepiece_model,"
      " --checkpoint, --output_dir)",
      "pkg/cli/convert.py:4 --input_ckpt: not an agreed name "
      "(--sentencepiece_model, --checkpoint, --output_dir)",
      "pkg/cli/convert.py:6 --model_dir: not an agreed name "
      "(--sentencepiece_model, --checkpoint, --output_dir)",
      "pkg/cli/export.py:4 --model_dir: a deprecated alias; define --checkpoint",
      "pkg/cli/flag_names.py: export --vocab -> --spm_file: not an agreed name",
  ]
