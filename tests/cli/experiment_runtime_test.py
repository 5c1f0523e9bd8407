"""rembert-train's runtime flags against the experiment's `runtime` fields.

As Model Garden's train.py users expect: a field the experiment YAML sets
holds unless its flag is given; a flag given wins, and when the field said
otherwise one note names both (never a silent override). Each case parses the
flags as a command line would (`runtime_flags.given_fields` reads absl's
FLAGS) and sets them over a `runtime` section (`experiment_files.with_flags`,
the one path of both trainers); the last ones read it from a real experiment
YAML.
"""
import pytest
from absl import flags

from rembert_tf.cli import runtime_flags
from rembert_tf.runtime import choices
from rembert_tf.runtime import experiment_files


def _runtime(strategy=None, tpu=None, dtype="float32"):
  return {"distribution_strategy": strategy, "tpu": tpu,
          "mixed_precision_dtype": dtype}


def _resolve(runtime, *argv):
  """(strategy, tpu, precision) a run gets, in the flags' spelling, and the
  notes."""
  flags.FLAGS.unparse_flags()
  try:
    flags.FLAGS(["rembert-train", *argv])
    values, notes = experiment_files.with_flags(
        {"runtime": runtime}, runtime_flags.given_fields())
  finally:
    flags.FLAGS.unparse_flags()
  spelled = [choices.FLAG_SPELLING.get(v, v) for v in (
      values["runtime"]["distribution_strategy"] or choices.DEFAULT_STRATEGY,
      values["runtime"]["tpu"], values["runtime"]["mixed_precision_dtype"])]
  return tuple(spelled), notes


@pytest.mark.parametrize("runtime,argv,chosen,notes", [
    # nothing set anywhere: the flags' defaults
    (_runtime(dtype=None), [], ("one_device", None, None), []),
    # the YAML's fields hold when no flag is given (Model Garden's "off")
    (_runtime("tpu", "my-tpu", "bfloat16"), [],
     ("tpu", "my-tpu", "mixed_bfloat16"), []),
    (_runtime("off"), [], ("default", None, "float32"), []),
    # a flag given wins; a different field value is named beside it
    (_runtime("tpu", "my-tpu", "bfloat16"),
     ["--strategy=mirrored", "--tpu=other", "--mixed_precision=float32"],
     ("mirrored", "other", "float32"),
     ["--strategy mirrored overrides the experiment's "
      "runtime.distribution_strategy: tpu",
      "--tpu other overrides the experiment's runtime.tpu: my-tpu",
      "--mixed_precision float32 overrides the experiment's "
      "runtime.mixed_precision_dtype: bfloat16"]),
    # the same value said twice is no override
    (_runtime("mirrored", None, "bfloat16"),
     ["--strategy=mirrored", "--mixed_precision=mixed_bfloat16"],
     ("mirrored", None, "mixed_bfloat16"), []),
])
def test_a_flag_given_wins_and_says_what_it_overrides(runtime, argv, chosen,
                                                      notes):
  assert _resolve(runtime, *argv) == (chosen, notes)


def test_a_strategy_the_commands_do_not_build_is_refused_naming_the_field(
    tmp_path):
  from rembert_tf.pretraining import experiments  # pylint: disable=g-import-not-at-top
  yaml = tmp_path / "elsewhere.yaml"
  yaml.write_text("runtime:\n  distribution_strategy: parameter_server\n")
  with pytest.raises(experiment_files.ExperimentConfigError,
                     match=r"runtime.distribution_strategy 'parameter_server'"
                           r": expected one of .*change the experiment YAML"):
    experiments.load_experiment_config(["pretrain_tiny_demo", str(yaml)])


def test_the_strategy_of_an_experiment_yaml_reaches_the_run(tmp_path):
  from rembert_tf.pretraining import experiments  # pylint: disable=g-import-not-at-top
  plain = experiments.load_experiment_config(["pretrain_tiny_demo"])
  assert plain.runtime.distribution_strategy is None  # not set: --strategy
  yaml = tmp_path / "on_tpu.yaml"
  yaml.write_text("runtime:\n  distribution_strategy: tpu\n")
  config = experiments.load_experiment_config(["pretrain_tiny_demo", str(yaml)])
  runtime = config.runtime.as_dict()
  assert _resolve(runtime)[0][0] == "tpu"
  assert _resolve(runtime, "--strategy", "one_device") == (
      ("one_device", None, "float32"),
      ["--strategy one_device overrides the experiment's "
       "runtime.distribution_strategy: tpu"])


def test_rembert_train_says_the_override_before_its_checks(tmp_path, capsys):
  """The note comes first; the run then stops at its first check (no
  records), so nothing is trained."""
  from rembert_tf.cli import train  # pylint: disable=g-import-not-at-top
  yaml = tmp_path / "on_tpu.yaml"
  yaml.write_text("runtime:\n  distribution_strategy: tpu\n")
  flags.FLAGS.unparse_flags()
  flags.FLAGS(["rembert-train", "--config_file", "pretrain_tiny_demo", "--config_file",
               str(yaml), "--model_dir", str(tmp_path / "run"),
               "--strategy", "one_device", "--params_override",
               f"task.train_data.input_path={tmp_path}/none/*.tfrecord"])
  try:
    with pytest.raises(SystemExit) as stopped:
      train.main([])
  finally:
    flags.FLAGS.unparse_flags()
  assert stopped.value.code == 1
  captured = capsys.readouterr()
  assert captured.out.splitlines() == [
      "rembert-train: note: --strategy one_device overrides the experiment's "
      "runtime.distribution_strategy: tpu."]
  assert len(captured.err.strip().splitlines()) == 1, captured.err
  assert captured.err.strip().endswith(
      f"task.train_data.input_path '{tmp_path}/none/*.tfrecord' matches no "
      "files. Make the records first (rembert-create-pretraining-data) or fix "
      "the path."), captured.err
