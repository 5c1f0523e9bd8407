"""Tests of `rembert_tf.pretraining.runner.run`: checkpoints, resume, eval, errors."""
import glob
import os

import numpy as np
import pytest
import tensorflow as tf
import tf_keras
import yaml
from tensorflow.python.framework import config as tf_config  # pylint: disable=g-direct-tensorflow-import

import pretrain_testlib

from rembert_tf.data import pretraining_input_pipeline
from rembert_tf.evaluation import mlm_baseline
from rembert_tf.data import pretraining_record_creation
from rembert_tf.checkpoints import checkpoint_layout
from rembert_tf.checkpoints import checkpoint_restore
from rembert_tf.pretraining import experiments
from rembert_tf.pretraining import run_failures
from rembert_tf.pretraining import runner

SEQ, PREDS, VOCAB = pretrain_testlib.SEQ, pretrain_testlib.PREDS, pretrain_testlib.VOCAB


@pytest.fixture(scope="module")
def records(tmp_path_factory):
  root = tmp_path_factory.mktemp("records")
  rng = np.random.default_rng(0)
  # Skewed token frequencies: the most frequent token baseline is not trivial.
  examples = [list(5 + (rng.zipf(1.6, size=rng.integers(10, 28)) % 200))
              for _ in range(96)]
  spm = root / "spm.model"
  spm.write_bytes(b"not a real model; only copied")
  for split, seed in (("train", 1), ("eval", 2)):
    pretraining_record_creation.write_pretraining_records(
        str(root / split), examples, seq_length=SEQ,
        max_predictions_per_seq=PREDS, vocab_size=VOCAB, seed=seed,
        extra_metadata={"sentencepiece_model": str(spm)})
  return root


def make_config(records_dir, train_steps=4, **overrides):
  values = pretrain_testlib.experiment_values(records_dir, train_steps)
  values["trainer"]["validation_steps"] = 3
  config = experiments.load_experiment_config([], values)
  config.override(overrides, is_strict=True)
  return config


def listing(directory):
  return sorted((p, os.path.getmtime(p), os.path.getsize(p)) for p in
                glob.glob(os.path.join(directory, "**"), recursive=True)
                if os.path.isfile(p))


@pytest.fixture(scope="module")
def trained_dir(records, tmp_path_factory):
  model_dir = str(tmp_path_factory.mktemp("run") / "model")
  lines = []
  metrics = runner.run(make_config(records), model_dir, mode="train_and_eval",
                       print_fn=lines.append)
  return model_dir, metrics, lines


def test_train_and_eval_writes_checkpoints_encoder_and_summaries(trained_dir):
  model_dir, metrics, lines = trained_dir
  assert metrics["global_step"] == 4
  assert metrics["checkpoint"].endswith("ckpt-4")
  for key in ("train_loss", "train_masked_lm_accuracy", "eval_loss",
              "eval_masked_lm_accuracy", "train_examples_per_second"):
    assert np.isfinite(metrics[key]), key
  assert os.path.exists(os.path.join(model_dir, "ckpt-2.index"))
  # Encoder-only checkpoint + model config + tokenizer, per checkpoint_layout.py.
  cfg, encoder = checkpoint_restore.load_encoder(model_dir)
  assert cfg.num_hidden_layers == 1
  assert checkpoint_layout.encoder_checkpoint_path(model_dir).endswith("ckpt-4")
  assert os.path.exists(os.path.join(model_dir, "sentencepiece.model"))
  assert os.path.exists(os.path.join(model_dir, "params.yaml"))
  # Console lines: step/total, loss, MLM accuracy, examples/s, ETA.
  progress = [l for l in lines if l.startswith("step ")]
  assert progress[0].startswith("step 2/4 | loss ")
  assert "mlm_acc" in progress[-1] and "ex/s" in progress[-1]
  assert "ETA" in progress[-1]
  # TensorBoard tags.
  tags = set()
  for path in glob.glob(os.path.join(model_dir, "train", "events.*")):
    for event in tf.compat.v1.train.summary_iterator(path):
      tags.update(v.tag for v in event.summary.value)
  for tag in ("training_loss", "masked_lm_accuracy", "learning_rate",
              "examples_per_second", "gradient_norm"):
    assert tag in tags, (tag, tags)


def test_resume_continues_step_weights_and_optimizer(records, trained_dir,
                                                     tmp_path):
  model_dir, _, _ = trained_dir
  resumed_dir = str(tmp_path / "resumed")
  import shutil
  shutil.copytree(model_dir, resumed_dir)
  lines = []
  metrics = runner.run(make_config(records, train_steps=6), resumed_dir,
                       print_fn=lines.append)
  assert any(l.startswith("resumed from") and "ckpt-4" in l for l in lines)
  assert metrics["global_step"] == 6
  ckpt = tf.train.latest_checkpoint(resumed_dir)
  assert ckpt.endswith("ckpt-6")
  assert int(tf.train.load_variable(
      ckpt, "optimizer/iter/.ATTRIBUTES/VARIABLE_VALUE")) == 6
  names = [n for n, _ in tf.train.list_variables(ckpt)]
  assert any(".OPTIMIZER_SLOT/optimizer/m/" in n for n in names)


def test_train_and_eval_after_the_end_evaluates(records, trained_dir):
  """Nothing is left to train: the finished checkpoint is evaluated, as
  --mode eval does, and no training step runs."""
  model_dir, _, _ = trained_dir
  lines = []
  again = runner.run(make_config(records), model_dir, mode="train_and_eval",
                     print_fn=lines.append)
  assert lines[0] == (f"the job is complete: {model_dir}/ckpt-4 is at step 4;"
                      " evaluating it (as --mode eval).")
  assert again["global_step"] == 4
  assert np.isfinite(again["eval_loss"]) and 0 <= again[
      "eval_masked_lm_accuracy"] <= 1, again
  assert tf.train.latest_checkpoint(model_dir).endswith("ckpt-4")


def test_a_restart_after_the_end_writes_nothing(records, trained_dir, tmp_path):
  model_dir, metrics, _ = trained_dir
  before = listing(model_dir)
  lines = []
  again = runner.run(make_config(records), model_dir, mode="train",
                     print_fn=lines.append)
  assert lines == [f"the job is complete: {model_dir}/ckpt-4 is at step 4 "
                   "(trainer.train_steps=4); nothing to do. Raise "
                   "trainer.train_steps to train further."]
  assert again["global_step"] == 4 and again["checkpoint"] == metrics["checkpoint"]
  assert listing(model_dir) == before
  # Killed before the final encoder export: the rerun writes just that.
  import shutil
  unexported = str(tmp_path / "unexported")
  shutil.copytree(model_dir, unexported)
  shutil.rmtree(os.path.join(unexported, "encoder"))
  runner.run(make_config(records), unexported, print_fn=lines.append)
  assert "the job is complete" not in lines[-1]
  assert tf.train.latest_checkpoint(unexported).endswith("ckpt-4")
  assert checkpoint_layout.encoder_checkpoint_path(unexported).endswith("ckpt-4")


def test_default_strategy_with_the_precision_flag_and_settings_restored(
    records, tmp_path):
  """`--strategy default` (no tf.distribute scope) trains; --mixed_precision
  overrides the experiment's precision for the run only."""
  model_dir = str(tmp_path / "default")
  metrics = runner.run(make_config(records, train_steps=2), model_dir,
                       strategy="default", mixed_precision="mixed_bfloat16",
                       deterministic=True, seed=3, print_fn=lambda _: None)
  assert metrics["global_step"] == 2
  assert metrics["checkpoint"] == os.path.join(model_dir, "ckpt-2")
  assert np.isfinite(metrics["train_loss"])
  assert os.path.exists(os.path.join(model_dir, "encoder", "ckpt-2.index"))
  params = yaml.safe_load(
      open(os.path.join(model_dir, "params.yaml")).read())
  assert params["runtime"]["mixed_precision_dtype"] == "bfloat16"
  assert tf_keras.mixed_precision.global_policy().name == "float32"
  assert not tf_config.is_op_determinism_enabled()


def test_eval_mode_reports_mlm_loss_and_accuracy(records, trained_dir):
  model_dir, _, _ = trained_dir
  before = listing(model_dir)
  metrics = runner.run(make_config(records), model_dir, mode="eval",
                       print_fn=lambda _: None)
  assert 0.0 <= metrics["eval_masked_lm_accuracy"] <= 1.0
  assert metrics["eval_loss"] > 0
  assert [p for p, _, _ in listing(model_dir) if "ckpt" in p] == [
      p for p, _, _ in before if "ckpt" in p]


def test_refuses_model_dir_of_a_different_model(records, trained_dir):
  model_dir, _, _ = trained_dir
  before = listing(model_dir)
  config = make_config(records, train_steps=8)
  config.task.model.num_hidden_layers = 2
  config.task.model.output_embedding_size = 128
  with pytest.raises(runner.CheckpointMismatchError) as e:
    runner.run(config, model_dir, print_fn=lambda _: None)
  message = str(e.value)
  assert "num_hidden_layers" in message and "output_embedding_size" in message
  assert "_transformer_layers/1" in message      # a variable the checkpoint lacks
  assert "masked_lm/output_embedding" in message and "[2000, 256]" in message
  assert listing(model_dir) == before              # nothing overwritten


def test_records_mismatching_the_config_fail_before_the_first_step(records,
                                                                  tmp_path):
  config = make_config(records)
  config.task.train_data.seq_length = 64
  config.task.model.max_position_embeddings = 128
  with pytest.raises(pretraining_input_pipeline.DataMismatchError, match="seq_length"):
    runner.run(config, str(tmp_path / "m"), print_fn=lambda _: None)
  assert not glob.glob(str(tmp_path / "m" / "ckpt-*"))
  config = make_config(records)
  config.task.model.vocab_size = 3000
  with pytest.raises(pretraining_input_pipeline.DataMismatchError, match="vocab"):
    runner.run(config, str(tmp_path / "m2"), print_fn=lambda _: None)


def test_missing_data_is_a_clear_error(records, tmp_path, monkeypatch):
  def no_strategy(*args):  # refused before any strategy or model is built
    raise AssertionError(f"a strategy was made: {args}")

  monkeypatch.setattr(runner.strategies, "make_strategy", no_strategy)
  config = make_config(records)
  config.task.train_data.input_path = str(tmp_path / "nowhere" / "*.tfrecord")
  with pytest.raises(pretraining_input_pipeline.DataMismatchError,
                     match="task.train_data.input_path.*matches no file"):
    runner.run(config, str(tmp_path / "m"), print_fn=lambda _: None)
  config = make_config(records)
  config.task.validation_data.input_path = ""
  with pytest.raises(pretraining_input_pipeline.DataMismatchError,
                     match="task.validation_data.input_path is empty"):
    runner.run(config, str(tmp_path / "m"), mode="train_and_eval",
               print_fn=lambda _: None)


def test_unwritable_model_dir_is_a_clear_error(records, tmp_path):
  blocker = tmp_path / "a_file"
  blocker.write_text("x")
  with pytest.raises(runner.PretrainingError, match="not writable"):
    runner.run(make_config(records), str(blocker / "model"),
               print_fn=lambda _: None)


def test_eval_without_checkpoint_is_a_clear_error(records, tmp_path):
  with pytest.raises(runner.PretrainingError, match="no checkpoint"):
    runner.run(make_config(records), str(tmp_path / "empty"), mode="eval",
               print_fn=lambda _: None)


def test_nan_loss_stops_and_keeps_the_last_good_checkpoint(records, tmp_path):
  config = make_config(records, train_steps=10)
  config.override({"trainer": {
      "steps_per_loop": 1, "summary_interval": 1, "checkpoint_interval": 1,
      "max_to_keep": 20,
      "optimizer_config": {
          "learning_rate": {"type": "constant",
                            "constant": {"learning_rate": 1e30}},
          "warmup": {"type": None}}}}, is_strict=True)
  model_dir = str(tmp_path / "nan")
  with pytest.raises(run_failures.NonFiniteLossError) as e:
    runner.run(config, model_dir, print_fn=lambda _: None)
  message = str(e.value)
  assert "training loss is nan" in message or "training loss is inf" in message
  last = tf.train.latest_checkpoint(model_dir)
  assert last is not None and f"last good checkpoint is {last}" in message
  failed_step = int(message.split(" at step ")[1].split(";")[0])
  assert int(last.rsplit("-", 1)[1]) == failed_step - 1
  assert not os.path.exists(os.path.join(model_dir, f"ckpt-{failed_step}.index"))


def test_most_frequent_token_baseline_matches_a_direct_count(records):
  config = make_config(records)
  baseline = mlm_baseline.most_frequent_token_baseline(
      config.task.validation_data, VOCAB,
      train_data_config=config.task.train_data)
  counts = np.zeros(VOCAB)
  dataset = pretraining_input_pipeline.RemBertPretrainDataLoader(
      config.task.validation_data).load()
  for batch in dataset:
    np.add.at(counts, batch["masked_lm_ids"].numpy().ravel(),
              batch["masked_lm_weights"].numpy().ravel())
  assert baseline["num_predictions"] == counts.sum()
  assert baseline["accuracy"] == pytest.approx(
      counts[baseline["token_id"]] / counts.sum())
  assert 0.02 < baseline["accuracy"] < 0.9


def test_a_model_dir_another_run_writes_is_refused(records, tmp_path):
  """One writer per model_dir: a second run exits before writing anything."""
  import testlib  # pylint: disable=g-import-not-at-top
  from rembert_tf.common import output_lock  # pylint: disable=g-import-not-at-top
  model_dir = tmp_path / "model"
  with testlib.held_by_another_process(model_dir) as (pid, _):
    with pytest.raises(output_lock.OutputLockedError,
                       match=rf"model is being written by another run \(pid {pid} "):
      runner.run(make_config(records), str(model_dir), print_fn=lambda _: None)
  assert not model_dir.exists() or os.listdir(model_dir) == []


def test_float16_is_refused_before_anything_is_written(records, tmp_path):
  model_dir = tmp_path / "model"
  with pytest.raises(runner.PretrainingError,
                     match=r"runtime.mixed_precision_dtype 'float16': expected "
                     r"float32 or bfloat16 \(--mixed_precision mixed_bfloat16"
                     r"\); the pre-training task does not implement "
                     r"float16's loss scaling"):
    runner.run(make_config(records), str(model_dir), mixed_precision="float16",
               print_fn=lambda _: None)
  assert not model_dir.exists()
