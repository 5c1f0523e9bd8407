"""One training loop for both trainers, read from rembert_tf/'s source.

* one progress printer: the per-loop console line (`console.loop_line`) is
  called by rembert_tf/runtime/orbit_loop.py alone (its `ProgressPrinter`,
  which both trainers configure); a call elsewhere is a second printer;
* one SIGTERM path: rembert_tf/runtime/preemption.py alone names the signal
  (`signal.SIGTERM`, a handler through `signal.signal`), raises or builds
  `TrainingPreempted`, and overrides the controller's `after_loop` (where the
  end of a loop turns a stop into a save); elsewhere each is a second way to
  stop on SIGTERM. Catching `TrainingPreempted` (a command's exit code 42) is
  not a path;
* orbit's private members (`_maybe_save_checkpoint`, `_train_loop_fn`,
  `_train_iter`, `_checkpoint_options`) are named in
  rembert_tf/runtime/orbit_loop.py alone (tests/runtime/orbit_internals_test.py
  checks them against the installed release).
"""
import ast
import pathlib
from typing import Iterator, List, Tuple

from architecture_testlib import parse
from architecture_testlib import write_package

PACKAGE = pathlib.Path(__file__).resolve().parents[1] / "rembert_tf"
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
      yield str(path.relative_to(package.parent)), parse(path)


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


def test_orbit_internals_live_in_one_module():
  found = orbit_internals_outside_their_module()
  assert not found, ("orbit private members outside rembert_tf/runtime/"
                     "orbit_loop.py (add a public name there):\n"
                     + "\n".join(found))


def test_one_progress_printer_serves_both_trainers():
  found = second_progress_printers()
  assert not found, ("per-loop progress lines outside rembert_tf/runtime/"
                     "orbit_loop.py (configure its ProgressPrinter):\n"
                     + "\n".join(found))


def test_one_sigterm_path_serves_both_trainers():
  found = second_sigterm_paths()
  assert not found, ("SIGTERM paths outside rembert_tf/runtime/preemption.py "
                     "(use its sigterm_stop_flag and PreemptibleController):\n"
                     + "\n".join(found))


# --- The checks find what they look for ---------------------------------------
def test_a_second_progress_printer_is_found(tmp_path):
  package = write_package(tmp_path, {
      "common/console.py": "def loop_line(step, total):\n  return ''\n",
      "runtime/orbit_loop.py": """
          from pkg.common import console
          class ProgressPrinter:
            def __call__(self, output):
              print(console.loop_line(1, 2))
          """,
      "finetuning/training_loop.py": """
          from pkg.common import console
          from pkg.common.console import loop_line
          class LoopPrinter:
            def __call__(self, output):
              print("[finetune] " + console.loop_line(1, 2))
              print(loop_line(1, 2))
          """,
  })
  assert second_progress_printers(package) == [
      "pkg/finetuning/training_loop.py:6 calls loop_line",
      "pkg/finetuning/training_loop.py:7 calls loop_line"]


def test_a_second_sigterm_path_is_found(tmp_path):
  package = write_package(tmp_path, {
      "runtime/preemption.py": """
          import signal
          class TrainingPreempted(Exception):
            pass
          def flag():
            signal.signal(signal.SIGTERM, lambda *_: None)
            raise TrainingPreempted("stopped")
          """,
      "finetuning/training_loop.py": """
          from pkg.runtime import preemption
          class SaveOnSigterm:
            def __call__(self, output):
              raise preemption.TrainingPreempted.after_save("ckpt-2", 2)
          class Controller:
            def _maybe_save_checkpoint(self, check_interval=True):
              error = preemption.TrainingPreempted("stopped")
              raise error
          """,
      "cli/train.py": """
          import signal
          from signal import SIGTERM
          from pkg.runtime import preemption
          signal.signal(signal.SIGTERM, print)
          try:
            pass
          except preemption.TrainingPreempted as e:
            raise SystemExit(42)
          """,
  })
  assert second_sigterm_paths(package) == [
      "pkg/cli/train.py:3 imports from signal",
      "pkg/cli/train.py:5 installs a signal handler",
      "pkg/cli/train.py:5 names signal.SIGTERM",
      "pkg/finetuning/training_loop.py:5 builds TrainingPreempted",
      "pkg/finetuning/training_loop.py:7 overrides the controller's "
      "_maybe_save_checkpoint",
      "pkg/finetuning/training_loop.py:8 builds TrainingPreempted"]


def test_orbit_internals_outside_their_module_are_found(tmp_path):
  package = write_package(tmp_path, {
      "runtime/orbit_loop.py": """
          class Trainer:
            def train(self):
              return self._train_loop_fn(self._train_iter)
          """,
      "pretraining/training_loop.py": """
          class Controller:
            def _maybe_save_checkpoint(self, check_interval=True):
              return self._checkpoint_options.experimental_enable_async_checkpoint
          """,
  })
  assert orbit_internals_outside_their_module(package) == [
      "pkg/pretraining/training_loop.py:3 _maybe_save_checkpoint",
      "pkg/pretraining/training_loop.py:4 _checkpoint_options"]
