"""The house rules of rembert_tf/, read from its source (no module is imported).

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
  `AGREED_FLAGS` (tests/architecture_rules.py), and no command defines a name
  that its `DEPRECATED_FLAGS` keeps as an alias.
* one progress printer: the per-loop console line (`console.loop_line`) is
  called by rembert_tf/runtime/orbit_loop.py alone (its `ProgressPrinter`,
  which both trainers configure); a call elsewhere is a second printer;
* one SIGTERM path: rembert_tf/runtime/preemption.py alone names the signal
  (`signal.SIGTERM`, a handler through `signal.signal`) and raises or builds
  `TrainingPreempted` (its train action saves, then stops); elsewhere each
  is a second way to stop on SIGTERM. Catching `TrainingPreempted` (a command's exit code 42) is
  not a path;
* orbit's private members (`_maybe_save_checkpoint`, `_train_loop_fn`,
  `_train_iter`, `_checkpoint_options`) are named nowhere outside
  rembert_tf/runtime/orbit_loop.py, and there neither (the rule above).
* the trainers run on Model Garden's runner and orbit's Controller as they
  are: no class subclasses a Controller, no method overrides a private one
  of the runner, controller or trainer (`_maybe_build_checkpoint_manager`,
  `_maybe_save_checkpoint`, ...), and no import names a private orbit or
  Model Garden name (one starting with `_`);
* one reading path for the pre-training records: in rembert_tf/pretraining/
  and rembert_tf/data/ the input pipeline (data/pretraining_input_pipeline.py)
  alone opens record files (`tf.data.TFRecordDataset`, a `tf_record_iterator`)
  and checks them as it reads; a module opening them elsewhere is a second
  reading. (The Keras 3 trainer's reader, keras_hub/, is that framework's own.)
* each command reaches what it runs (tests/architecture_reach.py): its import
  closure stays within its figure of `CLOSURE_LINES`, the corpus generator and
  the data commands reach no trainer (`LATER_STAGES`), and a package's
  `__init__.py` imports none of the package's modules and defines no function
  (a re-export or a lazy loader there makes every light module of the package
  pull in the whole stage).
"""
import runpy

from architecture_rules import (  # pylint: disable=g-multiple-import
    MAX_FUNCTION_LINES,
    MAX_MODULE_LINES,
    checkpoint_homes,
    flags_outside_the_agreed_set,
    import_circles,
    long_functions,
    long_modules,
    orbit_internals_outside_their_module,
    private_loop_machinery,
    second_progress_printers,
    second_record_readers,
    second_sigterm_paths,
    strategy_tables,
    task_tables,
)
from architecture_reach import (  # pylint: disable=g-multiple-import
    CLOSURE_LINES,
    PACKAGE,
    closure_lines,
    closures_over_their_figure,
    inits_that_pull_in_modules,
    later_stages_reached,
)
from architecture_testlib import write_package as _write_package


def test_no_import_circles():
  circles = import_circles()
  assert not circles, "import circles:\n" + "\n".join(circles)


def test_the_strategy_table_lives_in_the_runtime_alone():
  tables = strategy_tables()
  assert not tables, ("strategy tables outside rembert_tf/runtime/ (take "
                      "rembert_tf.runtime.strategies'):\n" + "\n".join(tables))


def test_every_flag_of_a_shared_concept_has_its_agreed_name():
  found = flags_outside_the_agreed_set()
  assert not found, ("flag names outside tests/architecture_rules.py's "
                     "AGREED_FLAGS:\n" + "\n".join(found))


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
      "cli/deprecated_flags.py": """
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
  agreed = dict.fromkeys(("sentencepiece_model", "checkpoint", "output_dir"), "")
  assert flags_outside_the_agreed_set(package, agreed) == [
      "pkg/cli/convert.py:3 --output: not an agreed name (--sentencepiece_model,"
      " --checkpoint, --output_dir)",
      "pkg/cli/convert.py:4 --input_ckpt: not an agreed name "
      "(--sentencepiece_model, --checkpoint, --output_dir)",
      "pkg/cli/convert.py:6 --model_dir: not an agreed name "
      "(--sentencepiece_model, --checkpoint, --output_dir)",
      "pkg/cli/export.py:4 --model_dir: a deprecated alias; define --checkpoint",
      "pkg/cli/deprecated_flags.py: export --vocab -> --spm_file: not an agreed name",
  ]


# --- One training loop for both trainers ------------------------------------
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
                     "(use its sigterm_stop_flag and stop_actions):\n"
                     + "\n".join(found))


# --- The checks find what they look for ---------------------------------------
def test_a_second_progress_printer_is_found(tmp_path):
  package = _write_package(tmp_path, {
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
  package = _write_package(tmp_path, {
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
  package = _write_package(tmp_path, {
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


# --- The trainers on Model Garden's runner as it is -------------------------
def test_the_trainers_use_the_runner_and_controller_as_they_are():
  found = private_loop_machinery()
  assert not found, ("a trainer subclasses orbit's Controller, overrides a "
                     "private method or imports a private name (use orbit "
                     "actions and public settings):\n" + "\n".join(found))


def test_private_loop_machinery_is_found(tmp_path):
  package = _write_package(tmp_path, {
      "pretraining/training_loop.py": """
          import orbit
          from orbit import controller
          from orbit.controller import _log
          import official.core._private
          from official.core import train_lib
          class Exporting(orbit.Controller):
            pass
          class Preemptible(controller.Controller):
            def _maybe_save_checkpoint(self, check_interval=True):
              return _log
          class Runner(train_lib.OrbitExperimentRunner):
            def _maybe_build_checkpoint_manager(self):
              return None
            def checkpoint_manager(self):
              return None
          """,
      "finetuning/training_loop.py": """
          import orbit
          class Elsewhere(orbit.Controller):
            pass
          """,
  })
  assert private_loop_machinery(package) == [
      "pkg/finetuning/training_loop.py:3 subclasses orbit.Controller",
      "pkg/pretraining/training_loop.py:4 imports _log",
      "pkg/pretraining/training_loop.py:5 imports _private",
      "pkg/pretraining/training_loop.py:7 subclasses orbit.Controller",
      "pkg/pretraining/training_loop.py:9 subclasses controller.Controller",
      "pkg/pretraining/training_loop.py:10 overrides _maybe_save_checkpoint",
      "pkg/pretraining/training_loop.py:13 overrides "
      "_maybe_build_checkpoint_manager"]


# --- One reading path for the pre-training records -------------------------
def test_the_input_pipeline_alone_reads_the_pretraining_records():
  found = second_record_readers()
  assert not found, ("record files opened outside the input pipeline (check "
                     "them in its load()):\n" + "\n".join(found))


def test_a_second_reader_is_found(tmp_path):
  package = _write_package(tmp_path, {
      "data/pretraining_input_pipeline.py":
          "import tensorflow as tf\nreader = tf.data.TFRecordDataset\n",
      "pretraining/checks.py": """\
          '''Mentions TFRecordDataset in a docstring only.'''
          import tensorflow as tf

          def first_record(path):
            return next(tf.compat.v1.io.tf_record_iterator(path))
          """,
  })
  assert second_record_readers(package) == [
      "pkg/pretraining/checks.py:5 tf_record_iterator"]


# --- Each command reaches what it runs ------------------------------------
def test_no_command_reaches_past_its_figure():
  found = closures_over_their_figure()
  assert not found, ("commands whose import closure grew past their figure "
                     "(tests/architecture_reach.py CLOSURE_LINES):\n"
                     + "\n".join(found))


def test_every_command_has_a_figure():
  names = runpy.run_path(str(PACKAGE / "common" / "command_names.py"))
  commands = set(names["CONSOLE_SCRIPTS"].values())
  commands |= {"rembert_tf.train", "rembert_tf.finetune"}  # python -m
  assert commands == set(CLOSURE_LINES)


def test_the_corpus_generator_and_the_data_commands_reach_no_trainer():
  found = later_stages_reached()
  assert not found, ("commands reaching a later stage's code (import the "
                     "module that owns a name, not its package):\n"
                     + "\n".join(found))


def test_package_inits_pull_in_no_modules():
  found = inits_that_pull_in_modules()
  assert not found, ("package __init__.py files importing the package's "
                     "modules or defining functions:\n" + "\n".join(found))


def test_a_stage_reached_through_a_package_init_is_found(tmp_path):
  package = _write_package(tmp_path, {
      "__init__.py": "",
      "cli/__init__.py": "",
      "cli/make_corpus.py": "from pkg.demo import corpus\n",
      "demo/__init__.py": """\
          '''The demo.'''


          def run():
            from pkg.demo import runner
            runner.main()
          """,
      "demo/corpus.py": "WORDS = ('a', 'b')\n",
      "demo/runner.py": "from pkg.pretraining import loop\n",
      "pretraining/__init__.py": "from pkg.pretraining.loop import train\n",
      "pretraining/loop.py": "def train():\n  return 1\n",
  })
  stages = {"pkg.cli.make_corpus": ("pretraining",)}
  assert later_stages_reached(stages, package) == [
      "pkg.cli.make_corpus -> pkg.pretraining",
      "pkg.cli.make_corpus -> pkg.pretraining.loop"]
  assert inits_that_pull_in_modules(package, allowed=()) == [
      "pkg/demo/__init__.py:4 defines run()",
      "pkg/demo/__init__.py:5 imports pkg.demo.runner",
      "pkg/pretraining/__init__.py:1 imports pkg.pretraining.loop.train"]
  assert closure_lines("pkg.cli.make_corpus", package) == 12
  assert closures_over_their_figure({"pkg.cli.make_corpus": 11}, package) == [
      "pkg.cli.make_corpus: 12 lines (figure 11)"]
  (package / "demo" / "__init__.py").write_text("'''The demo.'''\n")
  assert later_stages_reached(stages, package) == []
  assert closure_lines("pkg.cli.make_corpus", package) == 3
