"""What a pre-training run writes into model_dir beside its checkpoints.

The layout (per `rembert_tf.checkpoints.checkpoint_layout`), what fine-tuning and the
exporter read:

| path | written |
| --- | --- |
| `params.yaml` | the resolved experiment config, once when the run starts |
| `model_config.yaml` | after the first save |
| `encoder/ckpt-N` | every `trainer.encoder_export_every_n_checkpoints`-th save and the last |
| `sentencepiece.model` | after the first save, when the records' metadata names one |
| `sentencepiece.sha256` | after the first save, when the records' metadata records the model's sha256 |

Checkpoint temporaries (`ckpt-N_temp` in model_dir and `encoder/`, and the
temporaries of `params.yaml`) that a killed or failed save left are removed
with `remove_temporaries` (`rembert_tf.checkpoints.checkpoint_temporaries` plus
this layout).

Example:
<!-- snippet: not run: a fragment: `config` comes from the caller's code -->
```python
from rembert_tf.pretraining import artifacts
writer = artifacts.ArtifactWriter(config, "/tmp/pretrain", trainer.model.encoder,
                                  is_chief=True, sentencepiece_path=None)
writer(step=100)              # after ckpt-100: model_config.yaml, encoder/ckpt-100
writer(step=300, final=True)  # the last save: always exported
writer.wait()                 # every export complete
writer.close()
```
"""
import tempfile
from typing import List, Optional

from official.core import config_definitions as cfg
import tensorflow as tf
import tf_keras

from rembert_tf.common import fileio
from rembert_tf.common import outputs
from rembert_tf.checkpoints import checkpoint_layout
from rembert_tf.checkpoints import checkpoint_restore
from rembert_tf.modeling import rembert_config
from rembert_tf.pretraining import experiments
from rembert_tf.checkpoints import async_checkpoints
from rembert_tf.checkpoints import checkpoint_temporaries

PARAMS_FILE = "params.yaml"


def remove_temporaries(model_dir: str) -> List[str]:
  """Removes what a save that failed or was killed left; returns the paths."""
  removed = checkpoint_temporaries.remove(
      [model_dir, fileio.join(model_dir, checkpoint_layout.ENCODER_SUBDIR)])
  removed += outputs.remove_stale_temporaries(
      fileio.join(model_dir, PARAMS_FILE), lock_of=model_dir)
  return removed


def holds_a_run(model_dir: str) -> bool:
  """Whether a run got past its checks in model_dir (it wrote params.yaml)."""
  try:
    return fileio.exists(fileio.join(model_dir, PARAMS_FILE))
  except (OSError, tf.errors.OpError):
    return False


def save_params(config: cfg.ExperimentConfig, model_dir: str) -> None:
  """Writes the resolved experiment config to `model_dir/params.yaml`."""
  experiments.save_experiment_config(config, fileio.join(model_dir, PARAMS_FILE))


class ArtifactWriter:
  """After each save: model_config.yaml, encoder/ckpt-N, sentencepiece.model.

  Built on every worker (the encoder export is a collective under
  MultiWorkerMirroredStrategy); workers other than the chief write into a
  temporary local directory that `close` deletes. Whether a step is
  exported is decided from what every worker sees alike (model_dir's export
  when the run started, the calls so far), never from a worker's own
  directory, so all of them join the same exports.

  With `async_writes` the encoder export is written in the background like
  the full checkpoint (`checkpoints.async_checkpoints`), but for the final one;
  `wait` returns once it is complete.
  """

  def __init__(self, config: cfg.ExperimentConfig, model_dir: str,
               encoder: tf_keras.Model, is_chief: bool,
               sentencepiece_path: Optional[str], async_writes: bool = False,
               sentencepiece_sha256: Optional[str] = None):
    self._config = config
    self._spm_sha256 = sentencepiece_sha256
    self._model_dir = model_dir
    self._is_chief = is_chief
    self._spm_path = sentencepiece_path
    self._export_dir = model_dir if is_chief else tempfile.mkdtemp(
        prefix="rembert_tf-worker-export-")
    self._exported_steps = {exported_step(model_dir)}
    self.encoder_writer = checkpoint_restore.EncoderExportWriter(
        encoder, self._export_dir, max_to_keep=config.trainer.max_to_keep,
        every_n_saves=getattr(config.trainer,
                              "encoder_export_every_n_checkpoints", 1),
        options=async_checkpoints.options(async_writes))

  def __call__(self, step: int, final: bool = False):
    if step not in self._exported_steps:
      # The final export (the last save, a preemption save) is written
      # before the call returns: the run ends right after it.
      if self.encoder_writer.save(step, final=final, options=(
          async_checkpoints.options(False) if final else None)) is not None:
        self._exported_steps.add(step)
    if not self._is_chief:
      return
    config_path = fileio.join(self._model_dir, checkpoint_layout.MODEL_CONFIG_FILE)
    if not fileio.exists(config_path):
      rembert_config.save_model_config(self._config.task.model, config_path)
    spm_target = fileio.join(self._model_dir, checkpoint_layout.SENTENCEPIECE_FILE)
    if self._spm_path and not fileio.exists(spm_target):
      fileio.copy(self._spm_path, spm_target)
    sha_target = fileio.join(self._model_dir,
                             checkpoint_layout.SENTENCEPIECE_SHA256_FILE)
    if self._spm_sha256 and not fileio.exists(sha_target):
      fileio.write_text(sha_target, self._spm_sha256 + "\n")

  def wait(self):
    """Returns once every export started so far is written (raises a failed one's error)."""
    async_checkpoints.wait_for_writes(self.encoder_writer.checkpoint)

  def close(self):
    if not self._is_chief:
      fileio.rmtree(self._export_dir)


def exported_step(model_dir: str) -> Optional[int]:
  """The step of model_dir's newest complete encoder export (None: none)."""
  latest = tf.train.latest_checkpoint(
      fileio.join(model_dir, checkpoint_layout.ENCODER_SUBDIR))
  return int(latest.rsplit("-", 1)[1]) if latest else None
