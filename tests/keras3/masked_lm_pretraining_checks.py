"""The Keras 3 side of masked_lm_pretraining_test.py: run in its own process on JAX.

`python masked_lm_pretraining_checks.py ROOT` with KERAS_BACKEND=jax (and two
host devices, so DataParallel splits every batch): converts the TensorFlow
path's pre-training model_dir ROOT/tf_run to a keras-hub preset, writes the
RemBertMaskedLM's outputs on ROOT/inputs.npz, pre-trains it on JAX from the
records ROOT/records/train, saves it with `save_to_preset` and writes its
outputs; converts that preset back to a rembert_tf checkpoint from a
`ram://` copy; tries the bad inputs; last, converts it back with the
command line (ROOT/tf_cli). ROOT/report.json holds the losses,
what ran and the refusals' messages; the test compares the outputs with the
TensorFlow models.
"""
import json
import pathlib
import shutil
import sys

import keras
import numpy as np

from rembert_tf.common import errors
from rembert_tf.common import fileio
from rembert_tf.conversion import converter
from rembert_tf.conversion import weight_layout
from rembert_tf.keras_hub import masked_lm_pretraining
from rembert_tf.keras_hub import pretraining_records

STEPS, BATCH = 8, 8


def _outputs(masked_lm, inputs):
  """Sequence output and logits, each one compiled call (predict_on_batch:
  op by op, JAX would compile every op)."""
  x = {"token_ids": inputs["ids"], "segment_ids": inputs["types"],
       "padding_mask": inputs["mask"]}
  sequence = masked_lm.backbone.predict_on_batch(x)["sequence_output"]
  logits = masked_lm.predict_on_batch(
      {**x, "mask_positions": inputs["positions"]})
  return {"sequence_output": sequence, "mlm_logits": logits}


def _loss(masked_lm, batch):
  """The records' MLM loss (weighted mean) of one batch."""
  x = {key: np.asarray(value) for key, value in batch[0].items()}
  labels, weights = np.asarray(batch[1]), np.asarray(batch[2])
  losses = keras.ops.convert_to_numpy(
      keras.losses.sparse_categorical_crossentropy(
          labels, masked_lm.predict_on_batch(x), from_logits=True))
  return float(np.sum(losses * weights) / np.sum(weights))


def _refusals(root: pathlib.Path, masked_lm):
  """The one-line messages of bad inputs: unmasked records, a glob without
  records, a batch the devices cannot split, a preset of another model
  (nothing written)."""
  messages = {}
  cases = {
      "odd_batch": lambda: masked_lm_pretraining.pretrain(
          str(root / "records" / "train" / "*.tfrecord"), masked_lm, 1,
          batch_size=3),
      "unmasked_records": lambda: pretraining_records.read_records(
          str(root / "records_unmasked" / "*.tfrecord"), BATCH),
      "no_records": lambda: pretraining_records.read_records(
          str(root / "records" / "train" / "none-*.tfrecord"), BATCH),
      "other_preset": lambda: converter.convert_checkpoint(
          "keras_hub", "rembert_tf", root / "other_preset",
          root / "not_written")}
  other = root / "other_preset"
  shutil.copytree(root / "preset_start", other)
  config = json.loads((other / "config.json").read_text())
  config["registered_name"] = "keras_hub>BertBackbone"
  (other / "config.json").write_text(json.dumps(config))
  for name, call in cases.items():
    try:
      call()
      messages[name] = None
    except (pretraining_records.RecordsError, errors.UsageError,
            weight_layout.ConversionError) as e:
      messages[name] = str(e)
  messages["not_written"] = (root / "not_written").exists()
  return messages


def main(root: pathlib.Path):
  inputs = dict(np.load(root / "inputs.npz"))
  converter.convert_checkpoint("rembert_tf", "keras_hub", root / "tf_run",
                               root / "preset_start")
  # The distribution first: the model is then built replicated over it.
  distribution = masked_lm_pretraining.set_data_parallel()
  masked_lm = masked_lm_pretraining.build_masked_lm(
      str(root / "preset_start"))
  np.savez(root / "keras_start.npz", **_outputs(masked_lm, inputs))
  glob = str(root / "records" / "train" / "*.tfrecord")
  batch = next(iter(pretraining_records.read_records(glob, BATCH,
                                                     shuffle=False)))
  loss_before = _loss(masked_lm, batch)
  embedding_before = keras.ops.convert_to_numpy(
      masked_lm.masked_lm_head.output_embedding)
  _, history = masked_lm_pretraining.pretrain(
      glob, masked_lm, STEPS, batch_size=BATCH, learning_rate=2e-3, seed=0,
      verbose=0)
  masked_lm.save_to_preset(str(root / "preset_trained"))
  np.savez(root / "keras_trained.npz", **_outputs(masked_lm, inputs))
  ram = "ram://masked_lm_pretraining/preset_trained"
  for relative in fileio.files_under(str(root / "preset_trained")):
    fileio.copy(str(root / "preset_trained" / relative),
                fileio.join(ram, relative))
  converter.convert_checkpoint("keras_hub", "rembert_tf", ram,
                               root / "tf_from_ram")
  report = {
      "devices": len(keras.distribution.list_devices()),
      "distribution": type(distribution).__name__ if distribution else None,
      "loss_before": loss_before, "loss_after": _loss(masked_lm, batch),
      "fit_loss": history.history["loss"],
      "output_embedding_change": float(np.max(np.abs(
          keras.ops.convert_to_numpy(masked_lm.masked_lm_head.output_embedding)
          - embedding_before))),
      "batch_shapes": {k: list(v.shape) for k, v in batch[0].items()},
      "refusals": _refusals(root, masked_lm)}
  (root / "report.json").write_text(json.dumps(report, indent=2))


def convert_back_with_the_command(root: pathlib.Path):
  """`rembert-convert --from keras_hub` on the trained preset, as its console
  script runs it (run() exits with the command's status), in this process
  rather than one more that imports TensorFlow and Keras again. The command
  reads the preset with h5py: the backend does not matter."""
  from rembert_tf.cli import convert_checkpoint as command  # pylint: disable=g-import-not-at-top
  sys.argv = ["rembert-convert", "--from=keras_hub", "--to=rembert_tf",
              f"--checkpoint={root / 'preset_trained'}",
              f"--output_dir={root / 'tf_cli'}"]
  command.run()


if __name__ == "__main__":
  main(pathlib.Path(sys.argv[1]))
  convert_back_with_the_command(pathlib.Path(sys.argv[1]))
