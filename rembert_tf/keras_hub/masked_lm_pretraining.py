"""Pre-training RemBertMaskedLM with `fit` on the project's records, data-parallel on JAX.

Builds on `keras.distribution.DataParallel`, keras-hub's `MaskedLM` compile
defaults and `pretraining_records`; a killed run resumes with
`keras.callbacks.BackupAndRestore` (docs/keras_hub.md).
"""
from typing import Optional, Tuple, Union

import keras
from absl import logging

from rembert_tf.common import errors
from rembert_tf.keras_hub import pretraining_records
from rembert_tf.keras_hub import rembert_backbone
from rembert_tf.keras_hub import rembert_masked_lm

ModelSource = Union[str, rembert_backbone.RemBertBackbone,
                    rembert_masked_lm.RemBertMaskedLM]


def set_data_parallel() -> Optional["keras.distribution.Distribution"]:
  """DataParallel over every device when there are several (JAX only); returns
  the distribution in force, or None. A distribution already set is kept."""
  if keras.backend.backend() != "jax":
    return None
  if keras.distribution.distribution() is not None:
    return keras.distribution.distribution()
  devices = keras.distribution.list_devices()
  if len(devices) < 2:
    return None
  distribution = keras.distribution.DataParallel(devices=devices)
  keras.distribution.set_distribution(distribution)
  return distribution


def build_masked_lm(model: ModelSource,
                    output_embedding_dim: Optional[int] = None
                    ) -> rembert_masked_lm.RemBertMaskedLM:
  """A RemBertMaskedLM from a preset, a backbone (a fresh head) or itself; no
  preprocessor (the records are already tokenised and masked)."""
  if isinstance(model, rembert_masked_lm.RemBertMaskedLM):
    return model
  if isinstance(model, rembert_backbone.RemBertBackbone):
    return rembert_masked_lm.RemBertMaskedLM(
        model, output_embedding_dim=output_embedding_dim)
  kwargs = ({} if output_embedding_dim is None
            else {"output_embedding_dim": output_embedding_dim})
  return rembert_masked_lm.RemBertMaskedLM.from_preset(
      str(model), preprocessor=None, **kwargs)


def _check_records(masked_lm, meta, records_glob, batch_size, distribution):
  backbone = masked_lm.backbone
  if meta["vocab_size"] != backbone.vocabulary_size:
    raise pretraining_records.RecordsError(
        f"{records_glob}: the records' vocab_size is {meta['vocab_size']}, "
        f"the model's vocabulary_size {backbone.vocabulary_size}; make the "
        "records with the model's SentencePiece model.")
  if meta["seq_length"] > backbone.max_sequence_length:
    raise pretraining_records.RecordsError(
        f"{records_glob}: seq_length {meta['seq_length']} is longer than the "
        f"model's max_sequence_length {backbone.max_sequence_length}.")
  shards = 1
  if distribution is not None:  # the batch axis of the device mesh
    mesh = distribution.device_mesh
    shards = dict(zip(mesh.axis_names, mesh.shape))[distribution.batch_dim_name]
  if batch_size % shards:
    raise errors.UsageError(
        f"batch_size {batch_size} does not divide over the {shards} devices "
        "the batch is split over; pass a multiple.")


def compile_for_pretraining(masked_lm, optimizer, **compile_kwargs) -> None:
  """keras-hub's MaskedLM compile with the loss averaged over the real
  predictions (the records weight padding predictions 0); `compile_kwargs`
  go to `compile` (e.g. `jit_compile`)."""
  masked_lm.compile(
      optimizer=optimizer,
      loss=keras.losses.SparseCategoricalCrossentropy(
          from_logits=True, reduction="mean_with_sample_weight"),
      **compile_kwargs)


def pretrain(records_glob, model: ModelSource, steps: int, *,
             batch_size: int = 32, learning_rate: float = 5e-5,
             optimizer: Optional[keras.optimizers.Optimizer] = None,
             output_embedding_dim: Optional[int] = None,
             seed: Optional[int] = None, callbacks=None, verbose="auto"
             ) -> Tuple[rembert_masked_lm.RemBertMaskedLM,
                        keras.callbacks.History]:
  """Fits a RemBertMaskedLM on pre-training records for `steps` steps.

  Args:
    records_glob: the shards' glob(s).
    model: a preset path, a RemBertBackbone (a fresh head) or a
      RemBertMaskedLM (built after `set_data_parallel()` on several devices).
    steps: optimizer steps.
    batch_size: the global batch, split over the devices.
    learning_rate: of keras-hub's MaskedLM default optimizer (Adam).
    optimizer: any Keras optimizer instead.
    output_embedding_dim: E_out of a fresh head.
    seed: seeds Keras and the record shuffles.
    callbacks: Keras callbacks for `fit`.
  Returns:
    (the trained RemBertMaskedLM, the fit History).
  """
  if seed is not None:
    keras.utils.set_random_seed(seed)
  meta = pretraining_records.records_metadata(records_glob)
  distribution = set_data_parallel()
  masked_lm = build_masked_lm(model, output_embedding_dim)
  _check_records(masked_lm, meta, records_glob, batch_size, distribution)
  compile_for_pretraining(
      masked_lm, optimizer or keras.optimizers.Adam(learning_rate))
  dataset = pretraining_records.read_records(records_glob, batch_size,
                                             seed=seed)
  history = masked_lm.fit(dataset, steps_per_epoch=steps, epochs=1,
                          shuffle=False,  # the dataset shuffles
                          callbacks=[*(callbacks or []), StopAtStep(
                              steps, masked_lm.optimizer)],
                          verbose=verbose)
  return masked_lm, history


def _step_count(optimizer) -> int:
  return int(keras.ops.convert_to_numpy(optimizer.iterations))


class StopAtStep(keras.callbacks.Callback):
  """Ends `fit` once the optimizer has taken `steps` steps in all.

  `BackupAndRestore` restores the optimizer's step count but restarts the
  epoch; this counts from the restored step.
  """

  def __init__(self, steps: int, optimizer):
    super().__init__()
    self.steps = steps
    self._left = steps
    # An optimizer passed in may have stepped before this run.
    self._start = _step_count(optimizer)

  def on_train_begin(self, logs=None):
    done = _step_count(self.model.optimizer) - self._start
    self._left = self.steps - done
    if done:
      logging.info("resuming at step %d of %d", done, self.steps)

  def on_train_batch_end(self, batch, logs=None):
    self._left -= 1
    if self._left <= 0:
      self.model.stop_training = True
