"""Pre-training faults and starts: each refused with one line naming the culprit,
nothing lost; init_checkpoint, a resume without replay."""
import glob
import hashlib
import os
import shutil
import threading

import numpy as np
import pytest
import tensorflow as tf
from official.core import task_factory

from rembert_tf.common import errors
from rembert_tf.common import fileio
from rembert_tf.data import pretraining_input_pipeline
from rembert_tf.data import pretraining_record_creation
from rembert_tf.checkpoints import checkpoint_layout
from rembert_tf.checkpoints import checkpoint_writing
from rembert_tf.modeling import rembert_pretrainer
from rembert_tf.pretraining import experiments
from rembert_tf.runtime import experiment_files
from rembert_tf.runtime import process_settings
from rembert_tf.pretraining import masked_lm_task
from rembert_tf.pretraining import run_failures
from rembert_tf.pretraining import runner

import pretrain_testlib
import testlib
from pretrain_testlib import make_config

QUIET = dict(print_fn=lambda _: None)


@pytest.fixture(scope="module")
def records(tmp_path_factory):
  root = tmp_path_factory.mktemp("records")
  return pretrain_testlib.write_records(root, num_shards=2)


def copy_records(records, tmp_path):
  target = tmp_path / "records"
  shutil.copytree(records, target)
  return target


def one_line(error):
  text = errors.one_line(error)
  assert "\n" not in text and "Traceback" not in text
  return text


# --- Config errors ---------------------------------------------------------
@pytest.mark.parametrize("override, fields", [
    ("trainer.steps_per_loop=0", ["trainer.steps_per_loop"]),
    ("trainer.steps_per_loop=20,trainer.summary_interval=10",
     ["trainer.summary_interval (10)", "trainer.steps_per_loop (20)"]),
    ("trainer.max_to_keep=0", ["trainer.max_to_keep"]),
    ("trainer.encoder_export_every_n_checkpoints=0",
     ["trainer.encoder_export_every_n_checkpoints"]),
    ("trainer.stop_check_steps=-1", ["trainer.stop_check_steps"]),
    ("trainer.stop_check_seconds=0", ["trainer.stop_check_seconds"]),
])
def test_trainer_config_errors_name_the_fields(override, fields):
  with pytest.raises(experiment_files.ExperimentConfigError) as e:
    experiments.load_experiment_config(["pretrain_tiny_demo"], override)
  assert isinstance(e.value, errors.RemBertError)
  for field in fields:
    assert field in one_line(e.value)


@pytest.mark.parametrize("override, message", [
    ("trainer.train_steps=abc", "trainer.train_steps is 'abc'; it must be an "
     "integer."),
    ("task.train_data.global_batch_size=eight",
     "task.train_data.global_batch_size is 'eight'; it must be an integer."),
    ("trainer.optimizer_config.learning_rate.polynomial."
     "initial_learning_rate=fast", "trainer.optimizer_config.learning_rate."
     "polynomial.initial_learning_rate is 'fast'; it must be a number."),
    ("trainer.train_steps=1.5", "trainer.train_steps is 1.5; it must be an "
     "integer."),
    ("task.jit_compile=maybe", "task.jit_compile is 'maybe'; it must be true "
     "or false."),
    ("trainer.optimizer_config.optimizer.adamw.exclude_from_weight_decay=bias",
     "exclude_from_weight_decay is 'bias'; it must be a list"),
])
def test_a_value_of_the_wrong_type_names_the_field(override, message):
  with pytest.raises(experiment_files.ExperimentConfigError) as e:
    experiments.load_experiment_config(["pretrain_tiny_demo"], override)
  assert message in one_line(e.value)
  assert "--params_override" in one_line(e.value)


LR = "trainer.optimizer_config.learning_rate.polynomial."
ADAMW = "trainer.optimizer_config.optimizer.adamw."


# (override, the field and its range in the one line)
@pytest.mark.parametrize("override, message", [
    (LR + "initial_learning_rate=-1", LR + "initial_learning_rate is -1.0; it "
     "must be above 0 (a learning rate, e.g. 1e-4)."),
    (LR + "initial_learning_rate=0", LR + "initial_learning_rate is 0.0; it "
     "must be above 0"),
    (LR + "end_learning_rate=-0.1", LR + "end_learning_rate is -0.1; it must "
     "be at least 0."),
    (LR + "decay_steps=0", LR + "decay_steps is 0; it must be at least 1."),
    ("trainer.optimizer_config.warmup.linear.warmup_steps=-5",
     "warmup.linear.warmup_steps is -5; it must be at least 0."),
    (ADAMW + "weight_decay_rate=-0.1", "weight_decay_rate is -0.1; it must be "
     "at least 0."),
    (ADAMW + "epsilon=0", "adamw.epsilon is 0.0; it must be above 0."),
    (ADAMW + "beta_2=1", "adamw.beta_2 is 1.0; it must be in [0, 1)."),
    ("task.train_data.global_batch_size=0", "task.train_data.global_batch_size"
     " is 0; it must be at least 1."),
    ("task.validation_data.global_batch_size=-8", "task.validation_data."
     "global_batch_size is -8; it must be at least 1."),
    ("task.train_data.seq_length=0", "task.train_data.seq_length is 0; it "
     "must be at least 1."),
    ("task.train_data.max_predictions_per_seq=-1", "max_predictions_per_seq "
     "is -1; it must be at least 1."),
    ("task.train_data.masked_lm_prob=2", "task.train_data.masked_lm_prob is "
     "2.0; it must be in [0, 1]."),
    ("task.train_data.mask_token_rate=-0.5", "mask_token_rate is -0.5; it "
     "must be in [0, 1]."),
    ("trainer.train_steps=0", "trainer.train_steps is 0; it must be at least "
     "1."),
    ("trainer.train_steps=-3", "trainer.train_steps is -3; it must be at "
     "least 1."),
])
def test_a_number_out_of_its_range_names_the_field(override, message):
  with pytest.raises(experiment_files.ExperimentConfigError) as e:
    experiments.load_experiment_config(["pretrain_tiny_demo"], override)
  assert message in one_line(e.value)
  assert one_line(e.value).startswith("experiment config: ")
  assert one_line(e.value).endswith("Fix it in --config_file or --params_override.")


def test_every_shipped_experiment_is_in_range_and_an_integer_rate_is_a_float():
  for path in sorted(glob.glob(os.path.join(testlib.REPO, "configs",
                                            "experiments", "*.yaml"))):
    if not os.path.basename(path).startswith("xtreme_"):  # fine-tuning's
      experiments.load_experiment_config([path])
  config = experiments.load_experiment_config(
      ["pretrain_tiny_demo"], LR + "initial_learning_rate=1," + LR +
      "end_learning_rate=0")
  rate = config.trainer.optimizer_config.learning_rate.polynomial
  assert (rate.initial_learning_rate, rate.end_learning_rate) == (1.0, 0.0)
  assert isinstance(rate.initial_learning_rate, float)
  assert isinstance(rate.end_learning_rate, float)


def test_exponent_form_override_is_a_number():
  config = experiments.load_experiment_config(
      ["pretrain_tiny_demo"],
      "trainer.optimizer_config.learning_rate.polynomial."
      "initial_learning_rate=1e-3,trainer.optimizer_config.optimizer.adamw."
      "epsilon=1E-8")
  rate = config.trainer.optimizer_config.learning_rate.polynomial
  assert rate.initial_learning_rate == pytest.approx(1e-3)
  assert isinstance(rate.initial_learning_rate, float)
  assert config.trainer.optimizer_config.optimizer.adamw.epsilon == 1e-8


@pytest.mark.parametrize("override, field", [
    ("trainer.steps_per_loop=0", "trainer.steps_per_loop"),
    ("trainer.optimizer_config.learning_rate.polynomial."
     "initial_learning_rate=fast", "initial_learning_rate is 'fast'"),
])
def test_train_command_reports_config_error_in_one_line(override, field,
                                                        capsys, tmp_path):
  from absl import flags  # pylint: disable=g-import-not-at-top
  from rembert_tf.cli import train  # pylint: disable=g-import-not-at-top
  flags.FLAGS.unparse_flags()
  flags.FLAGS(["train", "--config_file", "pretrain_tiny_demo", "--model_dir",
               str(tmp_path / "m"), "--params_override", override])
  try:
    with pytest.raises(SystemExit) as e:
      train.main([])
  finally:
    flags.FLAGS.unparse_flags()
  assert e.value.code == 1
  err = capsys.readouterr().err.strip()
  assert err.count("\n") == 0 and "Traceback" not in err
  assert err.startswith("rembert-train: error: ")
  assert field in err
  assert not os.path.exists(tmp_path / "m")


# --- Records faults ----------------------------------------------------------
def test_corrupted_shard_is_named(records, tmp_path):
  copied = copy_records(records, tmp_path)
  shard = sorted(glob.glob(str(copied / "train" / "*.tfrecord")))[1]
  data = open(shard, "rb").read()
  with open(shard, "wb") as f:  # truncated in the middle of a record
    f.write(data[:len(data) - 5])
  with pytest.raises(run_failures.CorruptRecordsError) as e:
    runner.run(make_config(copied, train_steps=40, steps_per_loop=20,
                           checkpoint_interval=20),
               str(tmp_path / "m"), **QUIET)
  message = one_line(e.value)
  assert shard in message and "corrupted or truncated" in message
  assert len(message) < 600


def test_a_shard_of_another_sequence_length_is_named(records, tmp_path):
  copied = copy_records(records, tmp_path)
  other = tmp_path / "other"
  pretraining_record_creation.write_pretraining_records(
      str(other), [[7, 8, 9, 10]] * 4, seq_length=16,
      max_predictions_per_seq=pretrain_testlib.PREDS,
      vocab_size=pretrain_testlib.VOCAB, seed=1, num_shards=1)
  shard = sorted(glob.glob(str(copied / "train" / "*.tfrecord")))[1]
  shutil.copyfile(glob.glob(str(other / "*.tfrecord"))[0], shard)
  config = make_config(copied)
  with pytest.raises(pretraining_input_pipeline.DataMismatchError) as e:
    runner.run(config, str(tmp_path / "m"), **QUIET)
  assert one_line(e.value) == (
      f"task.train_data.input_path: record shard {shard} holds records whose "
      f"input_word_ids has 16 values; the experiment reads "
      f"{pretrain_testlib.SEQ} (seq_length). Move it out of the records' "
      "folder, or make every shard with the same --seq_length and "
      "--max_predictions_per_seq.")
  assert not os.path.exists(tmp_path / "m" / "params.yaml")
  # Records replaced under a running trainer: the parse error names it.
  replaced = run_failures.records_error(
      config, "train", tf.errors.InvalidArgumentError(None, None, "parse"))
  assert one_line(replaced).startswith(
      f"task.train_data.input_path: record shard {shard} holds records whose "
      "input_word_ids has 16 values")
  assert "the records changed under the run" in one_line(replaced)


def test_missing_listed_shard_is_refused(records, tmp_path):
  copied = copy_records(records, tmp_path)
  missing = sorted(glob.glob(str(copied / "train" / "*.tfrecord")))[0]
  os.remove(missing)
  with pytest.raises(pretraining_input_pipeline.DataMismatchError) as e:
    runner.run(make_config(copied), str(tmp_path / "m"), **QUIET)
  message = one_line(e.value)
  assert os.path.basename(missing) in message and "metadata.json" in message
  assert not os.path.exists(tmp_path / "m" / "params.yaml")


def test_resume_on_records_of_another_sentencepiece_model(records, tmp_path):
  copied = copy_records(records, tmp_path)
  spm = copied / "spm.model"
  spm.write_bytes(b"model A")
  for split in ("train", "eval"):  # what create_pretraining_data records
    meta_path = copied / split / "metadata.json"
    meta = fileio.read_json(str(meta_path))
    meta.update(sentencepiece_model=str(spm),
                sentencepiece_sha256=fileio.sha256(str(spm)))
    fileio.write_json(str(meta_path), meta)
  model_dir = str(tmp_path / "m")
  runner.run(make_config(copied, train_steps=2), model_dir, **QUIET)
  trained_with = os.path.join(model_dir, "sentencepiece.model")
  sha_a = fileio.sha256(trained_with)
  # The records are remade with another model of the same vocabulary size.
  other = copied / "spm_b.model"
  other.write_bytes(b"model B")
  sha_b = fileio.sha256(str(other))
  meta_path = copied / "train" / "metadata.json"
  meta = fileio.read_json(str(meta_path))
  meta.update(sentencepiece_model=str(other), sentencepiece_sha256=sha_b)
  fileio.write_json(str(meta_path), meta)
  with pytest.raises(run_failures.TokenizerMismatchError) as e:
    runner.run(make_config(copied, train_steps=4), model_dir, **QUIET)
  message = one_line(e.value)
  for part in (str(meta_path), sha_b, trained_with, sha_a,
               "--allow_sentencepiece_mismatch"):
    assert part in message
  assert tf.train.latest_checkpoint(model_dir).endswith("ckpt-2")
  lines = []
  metrics = runner.run(make_config(copied, train_steps=4), model_dir,
                       allow_sentencepiece_mismatch=True,
                       print_fn=lines.append)
  assert metrics["global_step"] == 4
  assert any(sha_a in l and sha_b in l for l in lines)
  assert fileio.sha256(trained_with) == sha_b


# --- Checkpoint writes ---------------------------------------------------------
def test_failed_save_leaves_no_temp_and_stale_temps_are_removed(
    records, tmp_path, monkeypatch):
  model_dir = tmp_path / "m"
  model_dir.mkdir()
  stale = model_dir / "ckpt-7_temp"
  stale.mkdir()
  (stale / "part-00000-of-00001.data-00000-of-00001").write_bytes(b"x" * 10)
  real_save = tf.train.CheckpointManager.save

  def disk_full_save(self, checkpoint_number=None, **kwargs):
    if checkpoint_number == 4:
      partial = os.path.join(self.directory, "ckpt-4_temp")
      os.makedirs(partial, exist_ok=True)
      open(os.path.join(partial, "part-00000"), "wb").write(b"half")
      raise tf.errors.ResourceExhaustedError(
          None, None, f"{partial}/part-00000; No space left on device")
    return real_save(self, checkpoint_number=checkpoint_number, **kwargs)

  monkeypatch.setattr(tf.train.CheckpointManager, "save", disk_full_save)
  with pytest.raises(runner.PretrainingError) as e:
    runner.run(make_config(records, train_steps=4), str(model_dir), **QUIET)
  message = one_line(e.value)
  assert "No space left on device" in message
  assert f"{model_dir}/ckpt-2" in message          # newest complete checkpoint
  assert not glob.glob(str(model_dir / "**" / "*_temp"), recursive=True)
  assert tf.train.latest_checkpoint(str(model_dir)).endswith("ckpt-2")


def test_async_checkpoints_never_show_a_save_in_flight(records, tmp_path,
                                                       monkeypatch):
  """Training goes on while ckpt-2 is written in the background; until the
  write is complete no reader sees it; it holds step 2's values; the final
  save waits for every write."""
  from tensorflow.python.ops import gen_io_ops  # pylint: disable=g-import-not-at-top
  merge = gen_io_ops.merge_v2_checkpoints
  reached, release = threading.Event(), threading.Event()

  def held_merge(prefixes, destination, *args, **kwargs):
    # Both writes of step 2 (ckpt-2 and encoder/ckpt-2, each on a background
    # thread of its own, in either order) wait at their last step; the test
    # looks once the full checkpoint's write is there.
    destination = destination.numpy().decode()
    if destination.endswith("ckpt-2"):
      if destination == f"{model_dir}/ckpt-2":
        reached.set()
      release.wait(timeout=120)
    return merge(prefixes, destination, *args, **kwargs)

  monkeypatch.setattr(gen_io_ops, "merge_v2_checkpoints", held_merge)
  config = make_config(records, train_steps=6)
  config.trainer.enable_async_checkpointing = True
  model_dir = str(tmp_path / "m")
  seen = {}

  def at_step_4(line):
    if line.startswith("step 4/"):  # trained on while ckpt-2 is in flight
      seen.update(reached=reached.wait(timeout=120),
                  latest=tf.train.latest_checkpoint(model_dir),
                  encoder=tf.train.latest_checkpoint(f"{model_dir}/encoder"),
                  files=os.listdir(model_dir))
      release.set()

  metrics = runner.run(config, model_dir, print_fn=at_step_4)
  assert seen["reached"] and seen["latest"] is None and seen["encoder"] is None
  assert "ckpt-2.index" not in seen["files"] and "ckpt-2_temp" in seen["files"]
  assert metrics["checkpoint"] == f"{model_dir}/ckpt-6"
  assert tf.train.latest_checkpoint(model_dir) == f"{model_dir}/ckpt-6"
  assert tf.train.latest_checkpoint(f"{model_dir}/encoder").endswith("ckpt-6")
  assert tf.train.load_variable(f"{model_dir}/ckpt-2",
                                "global_step/.ATTRIBUTES/VARIABLE_VALUE") == 2
  assert not glob.glob(f"{model_dir}/**/*_temp", recursive=True)


def test_async_checkpointing_is_refused_on_several_workers():
  config = make_config("unused")
  config.trainer.enable_async_checkpointing = True
  run_failures.check_async_checkpointing(config, multi_worker=False)
  with pytest.raises(runner.PretrainingError,
                     match="enable_async_checkpointing=false"):
    run_failures.check_async_checkpointing(config, multi_worker=True)


def test_encoder_export_every_nth_save_and_the_last(records, tmp_path):
  config = make_config(records, train_steps=7, steps_per_loop=1,
                       checkpoint_interval=1)
  config.trainer.encoder_export_every_n_checkpoints = 3
  config.trainer.max_to_keep = 10
  model_dir = tmp_path / "m"
  runner.run(config, str(model_dir), **QUIET)
  full = sorted(int(p.split("-")[-1].split(".")[0])
                for p in glob.glob(str(model_dir / "ckpt-*.index")))
  exported = sorted(int(p.split("-")[-1].split(".")[0])
                    for p in glob.glob(str(model_dir / "encoder" / "ckpt-*.index")))
  assert full == [1, 2, 3, 4, 5, 6, 7]
  assert exported == [3, 6, 7]


# --- Checkpoints that are not intact ---------------------------------------------
@pytest.fixture(scope="module")
def trained_dir(records, tmp_path_factory):
  """model_dir after 4 steps: ckpt-2 and ckpt-4."""
  model_dir = tmp_path_factory.mktemp("trained") / "m"
  runner.run(make_config(records), str(model_dir), **QUIET)
  return model_dir


@pytest.mark.parametrize("fault", sorted(testlib.CHECKPOINT_FAULTS))
def test_resume_falls_back_to_the_newest_intact_checkpoint(
    fault, records, trained_dir, tmp_path):
  model_dir = tmp_path / "m"
  shutil.copytree(trained_dir, model_dir)
  part = testlib.CHECKPOINT_FAULTS[fault](str(model_dir),
                                          str(model_dir / "ckpt-4"))
  lines = []
  metrics = runner.run(make_config(records), str(model_dir),
                       print_fn=lines.append)
  fallback = [l for l in lines if "is not intact" in l]
  assert fallback == [f"{model_dir}: ckpt-4 is not intact ("
                      f"{fallback[0].split(' (', 1)[1].split('); ')[0]}); "
                      "using ckpt-2, the newest intact checkpoint."], lines
  assert part in fallback[0]
  assert f"resumed from {model_dir}/ckpt-2 at step 2" in lines
  assert metrics["global_step"] == 4
  assert checkpoint_layout.latest_checkpoint(str(model_dir)) == (
      f"{model_dir}/ckpt-4")


def test_init_checkpoint_falls_back_to_the_newest_intact_checkpoint(
    records, tmp_path, capsys):
  config = make_config(records)
  source = tmp_path / "encoder_only"
  saved = rembert_pretrainer.build_pretrainer(config.task.model)
  checkpoint_writing.write_encoder_checkpoint(saved.encoder, str(source), 3)
  expected = saved.encoder.variables[0].numpy()
  saved.encoder.variables[0].assign(expected + 1.0)
  checkpoint_writing.write_encoder_checkpoint(saved.encoder, str(source), 4)
  testlib.CHECKPOINT_FAULTS["truncated_data"](
      str(source / "encoder"), str(source / "encoder" / "ckpt-4"))
  model = task_factory.get_task(config.task).build_model()
  capsys.readouterr()
  assert masked_lm_task.restore_init_checkpoint(model, str(source)).endswith(
      "encoder/ckpt-3")
  np.testing.assert_array_equal(model.encoder.variables[0].numpy(), expected)
  err = capsys.readouterr().err.splitlines()
  assert len(err) == 1 and err[0].startswith(
      f"{source}/encoder: ckpt-4 is not intact (ckpt-4.data-00000-of-00001 "
      "has "), err


# --- Starting points ------------------------------------------------------------
def test_init_checkpoint_restores_encoder_and_output_side(records, tmp_path):
  config = make_config(records, train_steps=1, steps_per_loop=1,
                       checkpoint_interval=1)
  source = tmp_path / "released"
  process_settings.set_seed(1)  # saved and fresh weights: the figures below
  saved = rembert_pretrainer.build_pretrainer(config.task.model)
  manager = tf.train.CheckpointManager(
      tf.train.Checkpoint(model=saved), str(source / "pretrainer"), 1)
  manager.save(checkpoint_number=5)
  # The loss a forward pass of the saved weights gives on the first batch.
  expected = pretrain_testlib.first_batch_loss(config, saved)

  config.task.init_checkpoint = str(source)
  metrics = runner.run(config, str(tmp_path / "m"), deterministic=True,
                       **QUIET)
  assert metrics["global_step"] == 1           # step and optimizer fresh
  assert metrics["train_loss"] == pytest.approx(
      expected, rel=pretrain_testlib.STEP_ONE_LOSS_REL)
  # A fresh model has another loss: the restore is what made them equal
  # (measured: 0.140 apart; required: 1e-3).
  process_settings.set_seed(2)
  fresh = rembert_pretrainer.build_pretrainer(config.task.model)
  assert abs(pretrain_testlib.first_batch_loss(config, fresh) - expected) > 1e-3


def test_init_checkpoint_from_encoder_only_and_missing(records, tmp_path):
  config = make_config(records)
  source = tmp_path / "encoder_only"
  saved = rembert_pretrainer.build_pretrainer(config.task.model)
  checkpoint_writing.write_encoder_checkpoint(saved.encoder, str(source), 3)
  task = task_factory.get_task(config.task)
  model = task.build_model()
  assert masked_lm_task.restore_init_checkpoint(model, str(source)).endswith(
      "encoder/ckpt-3")
  np.testing.assert_array_equal(model.encoder.variables[0].numpy(),
                                saved.encoder.variables[0].numpy())
  with pytest.raises(checkpoint_layout.CheckpointError, match="task.init_checkpoint"):
    masked_lm_task.restore_init_checkpoint(model, str(tmp_path / "nothing"))


def test_init_checkpoint_of_another_model_or_key_is_one_line(records, tmp_path):
  config = make_config(records)
  model = task_factory.get_task(config.task).build_model()
  deeper = config.task.model.replace(
      num_hidden_layers=config.task.model.num_hidden_layers + 1)
  saved = rembert_pretrainer.build_pretrainer(config.task.model)
  checkpoint_writing.write_pretrainer_checkpoint(saved, str(tmp_path / "src"))
  with pytest.raises(checkpoint_layout.CheckpointError) as e:
    masked_lm_task.restore_init_checkpoint(
        rembert_pretrainer.build_pretrainer(deeper), str(tmp_path / "src"))
  assert one_line(e.value).startswith(
      f"task.init_checkpoint: {tmp_path}/src/pretrainer/ckpt-0: its `model` "
      "does not match the model config (not in the checkpoint: encoder/")
  other = tf.train.Checkpoint(thing=tf.Variable(1.0)).write(
      str(tmp_path / "other" / "ckpt-1"))
  with pytest.raises(checkpoint_layout.CheckpointError) as e:
    masked_lm_task.restore_init_checkpoint(model, other)
  assert "holds neither a pretrainer (key `model`" in one_line(e.value)


def first_batch_ids(task, data_config):
  batch = next(iter(task.build_inputs(data_config)))
  return batch["input_word_ids"].numpy()


def test_resume_without_replay_reshuffles_from_the_step(records):
  config = make_config(records)
  data = config.task.train_data
  task = task_factory.get_task(config.task)
  fresh = iter(task.build_inputs(data))
  stream = [next(fresh)["input_word_ids"].numpy() for _ in range(11)]
  task.initial_train_step = 10
  replayed = first_batch_ids(task, data)
  np.testing.assert_array_equal(replayed, stream[10])      # skipped 10 batches
  config.task.replay_data_on_resume = False
  task = task_factory.get_task(config.task)
  task.initial_train_step = 10
  resumed = first_batch_ids(task, data)
  assert not np.array_equal(resumed, stream[10])
  assert not np.array_equal(resumed, stream[0])
  np.testing.assert_array_equal(first_batch_ids(task, data), resumed)
  assert masked_lm_task.resumed_stream_seed(3, 10) != masked_lm_task.resumed_stream_seed(3, 20)


# --- Records metadata ----------------------------------------------------------
def test_records_name_their_sentencepiece_model_relative_to_the_working_dir(
    tmp_path, monkeypatch):
  """The data tools record the model path as given (relative to where they ran)."""
  monkeypatch.chdir(tmp_path)
  (tmp_path / "spm").mkdir()
  (tmp_path / "spm" / "sentencepiece.model").write_bytes(b"model")
  pretrain_testlib.write_records(
      tmp_path / "records", splits=(("train", 1),),
      extra_metadata={"sentencepiece_model": "spm/sentencepiece.model"})
  config = make_config(tmp_path / "records")
  assert masked_lm_task.records_sentencepiece(config.task.train_data)[2] == (
      "spm/sentencepiece.model")


def test_a_model_dir_that_is_an_input_is_refused_before_any_work(records,
                                                                 tmp_path):
  """A converted checkpoint directory, or one holding the records (through a
  symbolic link too), is an input: training there would replace it."""
  converted = tmp_path / "converted"
  (converted / "encoder").mkdir(parents=True)
  (converted / "encoder" / "ckpt-0.index").write_bytes(b"weights")
  (converted / "model_config.yaml").write_text("hidden_size: 8\n")
  with pytest.raises(runner.PretrainingError) as e:
    runner.run(make_config(records), str(converted), **QUIET)
  assert one_line(e.value).startswith(
      f"--model_dir {converted} holds a checkpoint no training run wrote "
      f"({converted}/encoder; no params.yaml): it is an input")
  assert f"task.init_checkpoint={converted} and give another" in str(e.value)
  assert sorted(p.name for p in converted.rglob("*")) == [
      "ckpt-0.index", "encoder", "model_config.yaml"]
  (tmp_path / "link").symlink_to(records)
  with pytest.raises(errors.UsageError, match=r"--model_dir .*/link holds "
                     r"task.train_data.input_path \(.*\.tfrecord\)"):
    runner.run(make_config(records), str(tmp_path / "link"), **QUIET)
  assert not (records / "params.yaml").exists()


def test_records_sentencepiece_model_is_known_by_its_sha256(
    records, tmp_path, monkeypatch):
  """Identity by content: another file at the path metadata.json names is not
  the records' model; a resume on records of another model is refused also
  when the model file of the first run was never found."""
  copied = copy_records(records, tmp_path)
  sha_a = hashlib.sha256(b"model A").hexdigest()
  for split in ("train", "eval"):  # named relative to where the tool ran
    meta_path = copied / split / "metadata.json"
    meta = fileio.read_json(str(meta_path))
    meta.update(sentencepiece_model="spm/sentencepiece.model",
                sentencepiece_sha256=sha_a)
    fileio.write_json(str(meta_path), meta)
  elsewhere = tmp_path / "elsewhere"
  (elsewhere / "spm").mkdir(parents=True)
  (elsewhere / "spm" / "sentencepiece.model").write_bytes(b"another model")
  monkeypatch.chdir(elsewhere)
  config = make_config(copied, train_steps=2)
  assert masked_lm_task.records_sentencepiece(config.task.train_data)[2] is None
  model_dir = str(tmp_path / "m")
  runner.run(config, model_dir, **QUIET)
  assert not os.path.exists(os.path.join(model_dir, "sentencepiece.model"))
  recorded = os.path.join(model_dir, "sentencepiece.sha256")
  assert open(recorded).read().strip() == sha_a
  sha_b = hashlib.sha256(b"model B").hexdigest()  # the records remade
  meta_path = copied / "train" / "metadata.json"
  meta = fileio.read_json(str(meta_path))
  meta.update(sentencepiece_sha256=sha_b)
  fileio.write_json(str(meta_path), meta)
  with pytest.raises(run_failures.TokenizerMismatchError) as e:
    runner.run(make_config(copied, train_steps=4), model_dir, **QUIET)
  message = one_line(e.value)
  for part in (str(meta_path), sha_b, recorded, sha_a):
    assert part in message
  assert tf.train.latest_checkpoint(model_dir).endswith("ckpt-2")
