"""Experiment files and keys the trainers are given: one line each, the fix in it.

A key that is not a field is named with the closest field; a field given
sub-keys is named with the form it takes; an experiment of the other
trainer names the command that runs it; `--config_file` lists only the trainer's
own experiments; a directory or a section whose fields are all commented
out is not a traceback. A leading `~` of a path flag is the home directory.
All are refused before any TensorFlow work, so each command's cases share
one process (`testlib.run_command_cases`).
"""
import shutil

from absl import flags

import testlib
from rembert_tf.pretraining import experiments
from rembert_tf.common import command
from rembert_tf.finetuning import finetuning_experiment

TRAIN = "rembert_tf.cli.train"
FINETUNE = "rembert_tf.cli.finetune"
CORPUS = "rembert_tf.cli.make_demo_corpus"
FT_EXPERIMENTS = "(xtreme_mlqa, xtreme_panx, xtreme_pawsx, xtreme_tydiqa, " \
    "xtreme_udpos, xtreme_xnli, xtreme_xquad)"


def _commented_out_trainer(tmp_path):
  path = tmp_path / "no_trainer_changes.yaml"
  path.write_text("trainer:\n  # train_steps: 10\n  # steps_per_loop: 5\n")
  return path


def test_rembert_train_names_keys_files_and_the_other_trainer(tmp_path):
  (tmp_path / "cfgdir").mkdir()
  model_dir = tmp_path / "m"
  common = ["--model_dir", str(model_dir)]
  cases = [
      (["--config_file", "pretrain_tiny_demo", "--params_override",
        "trainer.train_step=3"],
       ["'train_step' does not exist in trainer; did you mean "
        "trainer.train_steps?"]),
      (["--config_file", "xtreme_xnli"],
       ["--config_file xtreme_xnli: xtreme_xnli is a fine-tuning experiment: use "
        "rembert-finetune --config_file xtreme_xnli;", "pretrain_tiny_demo"]),
      (["--config_file", "nope"],
       ["--config_file nope: no such file", "pre-training experiments",
        "pretrain_tiny_demo"]),
      (["--config_file", str(tmp_path / "cfgdir")],
       [f"--config_file {tmp_path / 'cfgdir'}: a directory; give an experiment "
        "YAML file"]),
      (["--config_file", "pretrain_tiny_demo", "--params_override",
        "trainer.train_steps.x=3"],
       ["trainer.train_steps is a field, not a section (trainer.train_steps.x names nothing); set it whole, e.g. trainer.train_steps="]),
      # Model Garden's --mode lists modes this runner does not have.
      (["--config_file", "pretrain_tiny_demo", "--mode",
        "continuous_train_and_eval"],
       ["--mode 'continuous_train_and_eval': expected one of train, eval, "
        "train_and_eval, continuous_eval."]),
  ]
  results = testlib.run_command_cases(TRAIN, [a + common for a, _ in cases])
  for (argv, parts), result in zip(cases, results):
    line = testlib.assert_one_line_error("rembert-train", result, *parts)
    assert "xtreme_" not in line or "xtreme_xnli" in argv, line
    assert "is_strict" not in line, line
  assert not model_dir.exists()


def test_rembert_finetune_names_keys_and_the_other_trainer(tmp_path):
  common = ["--output_dir", str(tmp_path / "ft"), "--data_dir",
            str(tmp_path / "download")]
  cases = [
      (["--config_file", "xtreme_xnli", "--params_override",
        "trainer.learning_rat=1e-4"],
       ["'learning_rat' does not exist in trainer; did you mean "
        "trainer.learning_rate?"]),
      (["--config_file", "xtreme_xnli", "--params_override",
        "data.languages.en=1"],
       ["data.languages is a field, not a section (data.languages.en names "
        "nothing); set it whole, e.g. data.languages=[en]."]),
      (["--config_file", "pretrain_tiny_demo"],
       ["--config_file pretrain_tiny_demo: pretrain_tiny_demo is a pre-training "
        "experiment: use rembert-train --config_file pretrain_tiny_demo; "
        f"rembert-finetune runs the fine-tuning ones {FT_EXPERIMENTS}."]),
      (["--config_file", "nope"],
       [f"fine-tuning experiments in", "xtreme_xnli"]),
      # Model Garden's flags that fine-tuning has no use for.
      (["--config_file", "xtreme_xnli", "--model_dir", "m"],
       ["--model_dir is rembert-train's; rembert-finetune runs every run of "
        "its sweep into --output_dir."]),
  ]
  results = testlib.run_command_cases(FINETUNE, [a + common for a, _ in cases])
  for (_, parts), result in zip(cases, results):
    line = testlib.assert_one_line_error("rembert-finetune", result, *parts)
    assert "pretrain_tiny_demo" not in line or "pre-training experiment" in line
  assert not (tmp_path / "ft").exists()


def test_a_section_with_every_field_commented_out_changes_nothing(tmp_path):
  no_changes = str(_commented_out_trainer(tmp_path))
  pre = experiments.load_experiment_config(["pretrain_tiny_demo", no_changes])
  assert pre.trainer.train_steps == experiments.load_experiment_config(
      ["pretrain_tiny_demo"]).trainer.train_steps
  ft = finetuning_experiment.load_finetuning_config(["xtreme_xnli", no_changes])
  assert ft.trainer.learning_rate == finetuning_experiment.load_finetuning_config(
      ["xtreme_xnli"]).trainer.learning_rate


def test_a_leading_tilde_of_a_flag_is_the_home_directory(tmp_path, monkeypatch):
  home = tmp_path / "home"
  home.mkdir()
  monkeypatch.setenv("HOME", str(home))
  literal = testlib.REPO / "~"   # where the unexpanded value would land
  assert not literal.exists()
  try:
    (result,) = testlib.run_command_cases(CORPUS, [
        ["--output_dir=~/c", "--megabytes", "0.02", "--languages", "en"]])
    assert result["code"] == 0, result
    assert sorted(p.name for p in (home / "c").iterdir()) == ["en"]
    assert not literal.exists()
  finally:
    shutil.rmtree(literal, ignore_errors=True)


def test_tilde_expansion_covers_text_and_list_flags(monkeypatch):
  monkeypatch.setenv("HOME", "/home/someone")
  values = flags.FlagValues()
  flags.DEFINE_string("output_dir", None, "", flag_values=values)
  flags.DEFINE_list("inputs", None, "", flag_values=values)
  flags.DEFINE_string("pattern", None, "", flag_values=values)
  values(["prog", "--output_dir=~/c", "--inputs=~/a,b/~c,~", "--pattern=a~b"])
  command.expand_home_in_flags(values)
  assert values.output_dir == "/home/someone/c"
  assert values.inputs == ["/home/someone/a", "b/~c", "/home/someone"]
  assert values.pattern == "a~b"
