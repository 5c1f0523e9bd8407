"""Every deprecated flag name works as its agreed flag and says so in one line.

For each command of `deprecated_flags.DEPRECATED_FLAGS`, in one fresh process
(absl keeps one flag registry per process; a command module imports no
TensorFlow): the command line with the agreed names and the same one with
the deprecated names parse to the same values of every flag, through the
parser every command uses (`command.parse_flags`, renaming as `command.run`
does); the old names add exactly
one line each on stderr, the agreed ones none. A boolean's `--noNAME` form
and rembert-run-ablation's --finetune_flags are renamed the same way, and a
whole command run with an old name does what the new name does.
"""
import json
import subprocess
import sys

import pytest

import testlib
from rembert_tf.cli import deprecated_flags
from rembert_tf.common import command_names

# Parses each argv of argv[3] (JSON) as `program` does and prints the values
# of the agreed flags and what went to stderr.
_DRIVER = r"""
import contextlib, importlib, io, json, sys
from absl import flags
from rembert_tf.cli import deprecated_flags
from rembert_tf.common import command
module_name, program, argvs = sys.argv[1], sys.argv[2], json.loads(sys.argv[3])
module = importlib.import_module(module_name)
getattr(module, "define_flags", lambda: None)()
agreed = sorted(set(deprecated_flags.DEPRECATED_FLAGS[module_name.split(".")[-1]]
                    .values()))
for argv in argvs:
  flags.FLAGS.unparse_flags()
  err = io.StringIO()
  with contextlib.redirect_stderr(err):
    command.parse_flags(program, [program] + argv,
                        deprecated_flags.renamer(module_name))
  print(json.dumps({"values": {n: flags.FLAGS[n].value for n in agreed},
                    "stderr": err.getvalue()}), flush=True)
"""


def _parse_all(module: str, program: str, argvs):
  done = subprocess.run(
      [sys.executable, "-c", _DRIVER, module, program, json.dumps(argvs)],
      capture_output=True, text=True, cwd=str(testlib.REPO), timeout=300,
      check=False, env={"PYTHONPATH": str(testlib.REPO),
                        "PATH": "/usr/bin:/bin"})
  assert done.returncode == 0, done.stderr[-3000:]
  return [json.loads(line) for line in done.stdout.splitlines()]


def _argv(names, value_of):
  return [f"--{name}={value_of(name)}" for name in names]


@pytest.mark.parametrize("command", sorted(deprecated_flags.DEPRECATED_FLAGS))
def test_a_deprecated_name_sets_its_agreed_flag_and_says_so_once(command):
  module = f"rembert_tf.cli.{command}"
  program = command_names.console_script(module)
  renamed = deprecated_flags.DEPRECATED_FLAGS[command]
  booleans = [old for old in renamed if old.startswith("allow_")]
  valued = [old for old in renamed if old not in booleans]
  new_args = (_argv([renamed[o] for o in valued], lambda n: f"/p/{n}")
              + [f"--{renamed[o]}" for o in booleans])
  old_args = (_argv(valued, lambda o: f"/p/{renamed[o]}")
              + [f"--{o}" for o in booleans])
  cases = [new_args, old_args]
  if booleans:  # --noNAME of an old boolean name
    cases += [[f"--{renamed[o]}" for o in booleans]
              + [f"--no{o}" for o in booleans]]
  results = _parse_all(module, program, cases)
  new, old = results[0], results[1]
  assert new["stderr"] == ""
  assert old["values"] == new["values"]
  given = [v for value in new["values"].values()  # a repeated flag: a list
           for v in (value if isinstance(value, list) else [value])]
  assert set(given) >= {f"/p/{renamed[o]}" for o in valued}
  assert old["stderr"].splitlines() == [
      f"{program}: --{o} is deprecated; use --{renamed[o]}."
      for o in renamed], old["stderr"]
  if booleans:
    assert not any(results[2]["values"][renamed[o]] for o in booleans)
    assert len(results[2]["stderr"].splitlines()) == len(booleans)


def test_finetune_flags_of_the_suite_get_the_agreed_names(capsys):
  args = ["--sp_model=/m", "--noallow_sp_model_mismatch", "--seq_length", "8",
          "--allow_sentencepiece_mismatch"]
  assert deprecated_flags.current_flag_names(
      "finetune", args, "rembert-run-ablation --finetune_flags") == [
          "--sentencepiece_model=/m", "--noallow_sentencepiece_mismatch",
          "--seq_length", "8", "--allow_sentencepiece_mismatch"]
  assert capsys.readouterr().err.splitlines() == [
      "rembert-run-ablation --finetune_flags: --sp_model is deprecated; use "
      "--sentencepiece_model.",
      "rembert-run-ablation --finetune_flags: --noallow_sp_model_mismatch is "
      "deprecated; use --noallow_sentencepiece_mismatch."]


def test_a_command_run_with_an_old_name_refuses_as_with_the_new(tmp_path):
  """rembert-export, end to end: the same one-line error for a checkpoint
  that is not there, after the one deprecation line."""
  lines = {}
  for flag in ("model_dir", "checkpoint"):
    done = subprocess.run(
        [sys.executable, str(testlib.REPO / "tools" / "export_savedmodel.py"),
         f"--{flag}={tmp_path}/none", f"--output_dir={tmp_path}/out"],
        capture_output=True, text=True, timeout=600, check=False,
        env={"PYTHONPATH": str(testlib.REPO), "PATH": "/usr/bin:/bin",
             "TF_CPP_MIN_LOG_LEVEL": "2"})
    assert done.returncode == 1, done.stderr[-2000:]
    lines[flag] = done.stderr.strip().splitlines()
  assert lines["model_dir"] == [
      "rembert-export: --model_dir is deprecated; use --checkpoint."
  ] + lines["checkpoint"]
  assert len(lines["checkpoint"]) == 1
  assert lines["checkpoint"][0].startswith("rembert-export: error: ")


def test_the_commands_the_ablation_suite_runs_in_one_process_load_together():
  """absl keeps one flag registry per process: the pre-training and
  fine-tuning commands (both run in-process by the ablation suite) and the
  suite's own command define no flag twice."""
  result = subprocess.run(
      [sys.executable, "-c",
       "import rembert_tf.cli.train, rembert_tf.cli.finetune, "
       "rembert_tf.cli.run_ablation"],
      capture_output=True, text=True, timeout=300)
  assert result.returncode == 0, result.stderr[-2000:]
