"""Fine-tuning as a registered Model Garden experiment.

The experiment `rembert_finetuning` loads by bare name and by YAML path,
--params_override sets its fields, every flag of rembert-finetune sets the
field the flag -> field table names (each flag given on a command line), a
flag given beside an override of its field wins with one note, and a bad
override names the field. (The command end to end with --config_file and
--params_override: resume_test.py; a bad override on its command line:
bad_input_test.py.)
"""
import pathlib
import sys

import pytest
from absl import flags
from official.core import exp_factory

from rembert_tf.cli import finetune  # defines rembert-finetune's flags
from rembert_tf.cli import finetune_flags
from rembert_tf.evaluation import xtreme_tasks
from rembert_tf.finetuning import finetuning_experiment
from rembert_tf.runtime import experiment_files

EXPERIMENTS = pathlib.Path(__file__).resolve().parents[2] / "configs/experiments"


def _parsed(*argv):
  """The experiment of a rembert-finetune command line, and its stdout."""
  flags.FLAGS.unparse_flags()
  try:
    flags.FLAGS(["rembert-finetune", "--output_dir=unused", *argv])
    return finetune.experiment_config()
  finally:
    flags.FLAGS.unparse_flags()


@pytest.mark.parametrize("task", xtreme_tasks.FINETUNING_TASKS)
def test_each_task_yaml_loads_by_name_and_by_path(task):
  default = exp_factory.get_exp_config(finetuning_experiment.EXPERIMENT_NAME)
  assert isinstance(default, finetuning_experiment.FinetuningExperimentConfig)
  by_name = finetuning_experiment.load_finetuning_config([f"xtreme_{task}"])
  by_path = finetuning_experiment.load_finetuning_config(
      [EXPERIMENTS / f"xtreme_{task}.yaml"])
  assert by_name.as_dict() == by_path.as_dict()
  assert by_name.data.task == task
  assert by_name.trainer.as_dict() == default.trainer.as_dict()


def test_a_yaml_on_the_ram_filesystem_loads_layered_over_a_named_one():
  from rembert_tf.common import fileio  # pylint: disable=g-import-not-at-top
  path = "ram://finetuning_experiment/short.yaml"
  fileio.write_text(path, "trainer: {num_train_steps: 5}\nsweep: {num_seeds: 2}\n")
  config = finetuning_experiment.load_finetuning_config(["xtreme_panx", path])
  assert (config.data.task, config.trainer.num_train_steps,
          config.sweep.num_seeds) == ("panx", 5, 2)


def test_params_override_sets_fields_and_the_sweep_is_a_list_of_overrides():
  config = finetuning_experiment.load_finetuning_config(
      ["xtreme_xnli"], "trainer.warmup_proportion=0.2,trainer.seed=5,"
      "sweep.learning_rates=[1e-5,3e-5],sweep.num_seeds=2,data.splits=[dev]")
  assert config.trainer.warmup_proportion == 0.2
  assert config.data.splits == ["dev"]
  assert finetuning_experiment.run_overrides(config) == [
      {"learning_rate": 1e-5, "seed": 5}, {"learning_rate": 1e-5, "seed": 6},
      {"learning_rate": 3e-5, "seed": 5}, {"learning_rate": 3e-5, "seed": 6}]
  one = finetuning_experiment.load_finetuning_config(
      ["xtreme_xnli"], {"trainer": {"learning_rate": 4e-5}})
  assert finetuning_experiment.run_overrides(one) == [
      {"learning_rate": 4e-5, "seed": 0}]


@pytest.mark.parametrize("override, message", [
    ("trainer.warmup_proportions=0.2", "'warmup_proportions' does not exist"),
    ("data.seq_length=abc", "data.seq_length is 'abc'; it must be an integer"),
])
def test_a_bad_override_names_the_field(override, message):
  with pytest.raises(experiment_files.ExperimentConfigError, match=message):
    finetuning_experiment.load_finetuning_config(["xtreme_xnli"], override)


def _sample(flag):
  """(command-line text, field value) of a value for `flag` that differs
  from its default."""
  parser = flags.FLAGS[flag].parser
  kind = parser.flag_type()
  if isinstance(parser, flags.BooleanParser):
    return f"--{flag}", True
  if hasattr(parser, "enum_values"):
    value = next(v for v in reversed(parser.enum_values)
                 if v != flags.FLAGS[flag].default)
    return f"--{flag}={value}", value
  if isinstance(parser, flags.ListParser):
    values = ["1e-05", "3e-05"] if flag == "learning_rates" else ["dev", "xx"]
    return f"--{flag}={','.join(values)}", values
  if kind == "int":
    return f"--{flag}=17", 17
  if kind == "float":
    return f"--{flag}=0.25", 0.25
  return f"--{flag}=/somewhere/{flag}", f"/somewhere/{flag}"


def test_the_table_holds_every_flag_of_the_command():
  command_flags = {f.name for f in flags.FLAGS.get_key_flags_for_module(finetune)}
  assert command_flags - {"output_dir", "overwrite", "config_file",
                          "params_override"} == set(finetune_flags.FLAG_FIELDS)


@pytest.mark.parametrize("flag, field", sorted(finetune_flags.FLAG_FIELDS.items()))
def test_every_flag_sets_its_field(flag, field):
  text, value = _sample(flag)
  expected = finetune_flags.field_value(flag, value)
  if flag == "learning_rates":
    expected = [1e-5, 3e-5]
  config = _parsed("--config_file=xtreme_xnli", text)
  section, name = field.split(".")
  assert getattr(getattr(config, section), name) == expected


def test_a_flag_wins_over_an_override_of_its_field_and_says_so(capsys):
  config = _parsed("--config_file=xtreme_xnli",
                   "--params_override=trainer.warmup_proportion=0.3",
                   "--warmup_proportion=0.2", "--train_batch_size=8")
  assert config.trainer.warmup_proportion == 0.2
  assert config.trainer.train_batch_size == 8
  assert capsys.readouterr().out.splitlines() == [
      "rembert-finetune: note: --warmup_proportion 0.2 overrides the "
      "experiment's trainer.warmup_proportion: 0.3."]
  same = _parsed("--params_override=trainer.warmup_proportion=0.2",
                 "--warmup_proportion=0.2", "--task=xnli")
  assert same.trainer.warmup_proportion == 0.2
  assert capsys.readouterr().out == ""


def test_one_rate_flag_wins_over_a_yamls_list_of_rates_and_says_so(
    capsys, tmp_path):
  yaml = tmp_path / "sweep.yaml"
  yaml.write_text("data:\n  task: xnli\nsweep:\n  learning_rates: [0.0005]\n")
  config = _parsed(f"--config_file={yaml}", "--learning_rate=1e-4")
  assert [o["learning_rate"] for o in
          finetuning_experiment.run_overrides(config)] == [1e-4]
  assert capsys.readouterr().out.splitlines() == [
      "rembert-finetune: note: --learning_rate 0.0001 overrides the "
      "experiment's sweep.learning_rates: [0.0005]."]
  both = _parsed(f"--config_file={yaml}", "--learning_rate=1e-4",
                 "--learning_rates=1e-5,2e-5")
  assert both.sweep.learning_rates == [1e-5, 2e-5]


def test_the_readmes_flag_and_config_commands_are_one_experiment():
  sys.path.insert(0, str(pathlib.Path(__file__).resolve().parents[1] / "docs"))
  import docs_consistency_test as docs  # pylint: disable=g-import-not-at-top
  commands = [argv for language, body, _ in docs.code_blocks(docs.REPO / "README.md")
              if language == "bash" for argv in docs.shell_commands(body)
              if argv[0] == "rembert-finetune"]
  assert len(commands) == 2 and "--config_file" in commands[1], commands
  flag_form, config_form = (_parsed(*argv[1:]) for argv in commands)
  assert flag_form.as_dict() == config_form.as_dict()
  assert config_form.trainer.learning_rate == 5e-4
