"""Pre-training crosses between the TensorFlow path and Keras 3 on JAX, both ways.

A tiny decoupled model (E_out != hidden) pre-trains one step on the
TensorFlow path (`runner.run`), converts to a keras-hub preset, pre-trains
with `fit` on JAX from the same records (`masked_lm_pretraining_checks.py`,
its own process, two host devices under DataParallel), converts back with
`rembert-convert --from keras_hub` and continues on the TensorFlow path
from `task.init_checkpoint`. The encoder's sequence output and the MLM
logits agree to 1e-5 at each crossing. Skipped when JAX or keras-hub is not
installed.
"""
import importlib.util
import json
import os
import pathlib
import subprocess
import sys

import numpy as np
import pytest

from pretraining import pretrain_testlib
from rembert_tf.data import pretraining_record_creation
from rembert_tf.checkpoints import checkpoint_restore
from rembert_tf.modeling import rembert_config
from rembert_tf.modeling import rembert_pretrainer
from rembert_tf.pretraining import masked_lm_task
from rembert_tf.pretraining import runner

REPO = pathlib.Path(__file__).resolve().parents[2]
CHECKS = pathlib.Path(__file__).with_name("masked_lm_pretraining_checks.py")
TOLERANCE = 1e-5
QUIET = dict(print_fn=lambda _: None)

_MISSING = [m for m in ("jax", "keras_hub") if importlib.util.find_spec(m) is None]
if _MISSING:
  pytest.skip(f"Keras backend jax: {', '.join(_MISSING)} not installed",
              allow_module_level=True)


def _inputs(vocab_size, seed=7):
  """Four rows (DataParallel splits them over two devices), some padded."""
  rng = np.random.default_rng(seed)
  ids = rng.integers(5, vocab_size, size=(4, 20)).astype(np.int32)
  mask = np.ones_like(ids)
  mask[1, 13:], mask[2, 6:] = 0, 0
  positions = np.array([[1, 2, 3, 0], [4, 5, 9, 12], [1, 1, 2, 5],
                        [19, 7, 0, 0]], np.int32)
  return dict(ids=ids, mask=mask, types=np.zeros_like(ids),
              positions=positions)


def _tf_outputs(source, inputs):
  """The TensorFlow pretrainer of a rembert_tf checkpoint, read the way
  `task.init_checkpoint` reads it, and its outputs."""
  cfg = checkpoint_restore.model_config_of(str(source))
  pretrainer = rembert_pretrainer.build_pretrainer(cfg)
  masked_lm_task.restore_init_checkpoint(pretrainer, str(source))
  outputs = pretrainer(dict(
      input_word_ids=inputs["ids"], input_mask=inputs["mask"],
      input_type_ids=inputs["types"], masked_lm_positions=inputs["positions"]))
  return cfg, pretrainer, {key: outputs[key].numpy()
                           for key in ("sequence_output", "mlm_logits")}


def _run(args, **extra_env):
  """A child process of this checkout without tf-keras' switch (Keras 3
  there); asserts it succeeded."""
  env = dict(os.environ, PYTHONPATH=os.pathsep.join(
      [str(REPO)] + [p for p in [os.environ.get("PYTHONPATH")] if p]))
  env.pop("TF_USE_LEGACY_KERAS", None)
  env.update(extra_env)
  result = subprocess.run([str(a) for a in args], capture_output=True,
                          text=True, cwd=REPO, env=env, check=False,
                          timeout=900)
  assert result.returncode == 0, (result.stdout + result.stderr)[-6000:]


def _max_errors(actual, expected):
  return {key: float(np.max(np.abs(actual[key] - expected[key])))
          for key in ("sequence_output", "mlm_logits")}


@pytest.fixture(scope="module")
def crossing(tmp_path_factory):
  root = tmp_path_factory.mktemp("masked_lm_pretraining")
  pretrain_testlib.write_records(root / "records", splits=(("train", 1),))
  pretraining_record_creation.write_pretraining_records(
      root / "records_unmasked", [[5, 6, 7]] * 8, layout="unmasked",
      seq_length=pretrain_testlib.SEQ,
      max_predictions_per_seq=pretrain_testlib.PREDS,
      vocab_size=pretrain_testlib.VOCAB)
  config = pretrain_testlib.make_config(
      root / "records", train_steps=1, steps_per_loop=1,
      checkpoint_interval=1, eval_data=False)
  runner.run(config, str(root / "tf_run"), **QUIET)
  inputs = _inputs(config.task.model.vocab_size)
  np.savez(root / "inputs.npz", **inputs)
  cfg, _, tf_run = _tf_outputs(root / "tf_run", inputs)
  # The JAX side, then `rembert-convert --from keras_hub` into tf_cli.
  _run([sys.executable, CHECKS, root], KERAS_BACKEND="jax",
       XLA_FLAGS="--xla_force_host_platform_device_count=2")
  return dict(root=root, config=config, cfg=cfg, inputs=inputs,
              tf_run=tf_run,
              report=json.loads((root / "report.json").read_text()))


def _print(capsys, text):
  with capsys.disabled():
    print(f"\n{text}")


def test_tensorflow_run_loads_into_keras(crossing, capsys):
  keras_start = dict(np.load(crossing["root"] / "keras_start.npz"))
  errors = _max_errors(keras_start, crossing["tf_run"])
  assert max(errors.values()) <= TOLERANCE, errors
  _print(capsys, f"TF run -> RemBertMaskedLM, max |diff|: {errors}")


def test_fit_on_jax_trains_data_parallel(crossing, capsys):
  report = crossing["report"]
  assert report["devices"] == 2 and report["distribution"] == "DataParallel"
  assert report["batch_shapes"] == {
      "token_ids": [8, pretrain_testlib.SEQ],
      "segment_ids": [8, pretrain_testlib.SEQ],
      "padding_mask": [8, pretrain_testlib.SEQ],
      "mask_positions": [8, pretrain_testlib.PREDS]}
  assert report["loss_after"] < report["loss_before"] - 0.5, report
  assert report["output_embedding_change"] > 1e-3, report
  _print(capsys, f"fit on JAX ({report['devices']} devices): loss on a batch "
         f"{report['loss_before']:.3f} -> {report['loss_after']:.3f}")


@pytest.mark.parametrize("converted", ["tf_cli", "tf_from_ram"])
def test_jax_model_converts_back_with_its_output_side(crossing, converted,
                                                     capsys):
  cfg, _, outputs = _tf_outputs(crossing["root"] / converted,
                                crossing["inputs"])
  assert cfg.as_dict() == crossing["cfg"].as_dict()
  keras_trained = dict(np.load(crossing["root"] / "keras_trained.npz"))
  errors = _max_errors(outputs, keras_trained)
  assert max(errors.values()) <= TOLERANCE, errors
  _print(capsys, f"JAX-trained -> {converted}, max |diff|: {errors}")
  # Trained on JAX: not the TensorFlow run's weights any more.
  assert np.max(np.abs(outputs["mlm_logits"] -
                       crossing["tf_run"]["mlm_logits"])) > 1e-2


def test_tensorflow_path_continues_from_the_jax_model(crossing, tmp_path):
  config, root = crossing["config"], crossing["root"]
  _, restored, _ = _tf_outputs(root / "tf_cli", crossing["inputs"])
  expected = pretrain_testlib.first_batch_loss(config, restored)
  _, started, _ = _tf_outputs(root / "tf_run", crossing["inputs"])
  # JAX's steps helped.
  assert expected < pretrain_testlib.first_batch_loss(config, started)
  config.task.init_checkpoint = str(root / "tf_cli")
  metrics = runner.run(config, str(tmp_path / "continued"), deterministic=True,
                       **QUIET)
  assert metrics["global_step"] == 1
  assert metrics["train_loss"] == pytest.approx(
      expected, rel=pretrain_testlib.STEP_ONE_LOSS_REL)
  assert rembert_config.load_model_config(
      str(tmp_path / "continued" / "model_config.yaml")).as_dict() == (
          crossing["cfg"].as_dict())


def test_bad_inputs_are_refused_with_one_line(crossing):
  root, refusals = crossing["root"], crossing["report"]["refusals"]
  assert refusals["unmasked_records"] == (
      f"{root}/records_unmasked/metadata.json: layout is 'unmasked'; "
      "RemBertMaskedLM trains from records masked when written: make them "
      "without --unmasked.")
  assert refusals["no_records"] == (
      f"{root}/records/train/none-*.tfrecord: matches no record file; pass "
      "the shards' glob, e.g. DIR/pretrain-*.tfrecord.")
  assert refusals["other_preset"] == (
      f"{root}/other_preset/config.json: registered_name is "
      "'keras_hub>BertBackbone', expected 'rembert_tf>RemBertBackbone' (a "
      "preset of rembert_tf.keras_hub).")
  assert refusals["not_written"] is False
  assert refusals["odd_batch"] == (
      "batch_size 3 does not divide over the 2 devices the batch is split "
      "over; pass a multiple.")
