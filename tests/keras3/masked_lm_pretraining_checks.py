"""The Keras 3 side of masked_lm_pretraining_test.py: run in its own process on JAX.

`python masked_lm_pretraining_checks.py ROOT` with KERAS_BACKEND=jax (and two
host devices, so DataParallel splits every batch): converts the TensorFlow
path's pre-training model_dir ROOT/tf_run to a keras-hub preset, writes the
RemBertMaskedLM's outputs on ROOT/inputs.npz, pre-trains it on JAX from the
records ROOT/records/train, saves it with `save_to_preset` and writes its
outputs; converts that preset back to a rembert_tf checkpoint from a
`ram://` copy. ROOT/report.json holds the losses and what ran; the test
compares the outputs with the TensorFlow models.
"""
import json
import pathlib
import sys

import keras
import numpy as np

from rembert_tf.common import fileio
from rembert_tf.conversion import converter
from rembert_tf.keras_hub import RemBertMaskedLM
from rembert_tf.keras_hub import masked_lm_pretraining
from rembert_tf.keras_hub import pretraining_records

STEPS, BATCH = 8, 8


def _outputs(masked_lm, inputs):
  x = {"token_ids": inputs["ids"], "segment_ids": inputs["types"],
       "padding_mask": inputs["mask"]}
  sequence = masked_lm.backbone(x)["sequence_output"]
  logits = masked_lm({**x, "mask_positions": inputs["positions"]})
  return {"sequence_output": keras.ops.convert_to_numpy(sequence),
          "mlm_logits": keras.ops.convert_to_numpy(logits)}


def _loss(masked_lm, batch):
  x, y, weights = batch
  losses = keras.losses.sparse_categorical_crossentropy(
      y, masked_lm(x), from_logits=True)
  losses = keras.ops.convert_to_numpy(losses)
  return float(np.sum(losses * weights) / np.sum(weights))


def main(root: pathlib.Path):
  inputs = dict(np.load(root / "inputs.npz"))
  converter.convert_checkpoint("rembert_tf", "keras_hub", root / "tf_run",
                               root / "preset_start")
  start = RemBertMaskedLM.from_preset(str(root / "preset_start"))
  np.savez(root / "keras_start.npz", **_outputs(start, inputs))
  glob = str(root / "records" / "train" / "*.tfrecord")
  batch = next(iter(pretraining_records.read_records(glob, BATCH,
                                                     shuffle=False)))
  masked_lm, history = masked_lm_pretraining.pretrain(
      glob, str(root / "preset_start"), STEPS, batch_size=BATCH,
      learning_rate=2e-3, seed=0, verbose=0)
  masked_lm.save_to_preset(str(root / "preset_trained"))
  np.savez(root / "keras_trained.npz", **_outputs(masked_lm, inputs))
  ram = "ram://masked_lm_pretraining/preset_trained"
  for relative in fileio.files_under(str(root / "preset_trained")):
    fileio.copy(str(root / "preset_trained" / relative),
                fileio.join(ram, relative))
  converter.convert_checkpoint("keras_hub", "rembert_tf", ram,
                               root / "tf_from_ram")
  distribution = keras.distribution.distribution()
  report = {
      "devices": len(keras.distribution.list_devices()),
      "distribution": type(distribution).__name__ if distribution else None,
      "loss_before": _loss(start, batch), "loss_after": _loss(masked_lm, batch),
      "fit_loss": history.history["loss"],
      "output_embedding_change": float(np.max(np.abs(
          keras.ops.convert_to_numpy(masked_lm.masked_lm_head.output_embedding)
          - keras.ops.convert_to_numpy(start.masked_lm_head.output_embedding)))),
      "batch_shapes": {k: list(v.shape) for k, v in batch[0].items()}}
  (root / "report.json").write_text(json.dumps(report, indent=2))


if __name__ == "__main__":
  main(pathlib.Path(sys.argv[1]))
