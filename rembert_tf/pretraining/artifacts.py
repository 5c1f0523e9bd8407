"""What a pre-training run writes into model_dir beside its checkpoints.

The layout (per `rembert_tf.modeling.checkpoint_layout`), what fine-tuning and the
exporter read:

| path | written |
| --- | --- |
| `params.yaml` | the resolved experiment config, once when the run starts |
| `model_config.yaml` | after the first save |
| `encoder/ckpt-N` | every `trainer.encoder_export_every_n_checkpoints`-th save and the last |
| `sentencepiece.model` | after the first save, when the records' metadata names one |

Checkpoint temporaries (`ckpt-N_temp` in model_dir and `encoder/`, and the
temporaries of `params.yaml`) that a killed or failed save left are removed
with `remove_temporaries` (`rembert_tf.runtime.checkpoint_temporaries` plus
this layout).

Example:
```python
from rembert_tf.pretraining import artifacts
writer = artifacts.ArtifactWriter(config, "/tmp/pretrain", trainer.model.encoder,
                                  is_chief=True, sentencepiece_path=None)
writer(step=100)              # after ckpt-100: model_config.yaml, encoder/ckpt-100
writer(step=300, final=True)  # the last save: always exported
writer.close()
```
"""
import tempfile
from typing import List, Optional

from official.core import config_definitions as cfg
import tf_keras

from rembert_tf.common import fileio
from rembert_tf.modeling import checkpoint_layout
from rembert_tf.modeling import checkpoint_restore
from rembert_tf.modeling import rembert_config
from rembert_tf.pretraining import experiments
from rembert_tf.runtime import checkpoint_temporaries

PARAMS_FILE = "params.yaml"


def remove_temporaries(model_dir: str) -> List[str]:
  """Removes what a save that failed or was killed left; returns the paths."""
  removed = checkpoint_temporaries.remove(
      [model_dir, fileio.join(model_dir, checkpoint_layout.ENCODER_SUBDIR)])
  removed += fileio.remove_stale_temporaries(
      fileio.join(model_dir, PARAMS_FILE), lock_of=model_dir)
  return removed


def save_params(config: cfg.ExperimentConfig, model_dir: str) -> None:
  """Writes the resolved experiment config to `model_dir/params.yaml`."""
  experiments.save_experiment_config(config, fileio.join(model_dir, PARAMS_FILE))


class ArtifactWriter:
  """After each save: model_config.yaml, encoder/ckpt-N, sentencepiece.model.

  Built on every worker (the encoder export is a collective under
  MultiWorkerMirroredStrategy); workers other than the chief write into a
  temporary local directory that `close` deletes.
  """

  def __init__(self, config: cfg.ExperimentConfig, model_dir: str,
               encoder: tf_keras.Model, is_chief: bool,
               sentencepiece_path: Optional[str]):
    self._config = config
    self._model_dir = model_dir
    self._is_chief = is_chief
    self._spm_path = sentencepiece_path
    self._export_dir = model_dir if is_chief else tempfile.mkdtemp(
        prefix="rembert_tf-worker-export-")
    self.encoder_writer = checkpoint_restore.EncoderExportWriter(
        encoder, self._export_dir, max_to_keep=config.trainer.max_to_keep,
        every_n_saves=getattr(config.trainer,
                              "encoder_export_every_n_checkpoints", 1))

  def __call__(self, step: int, final: bool = False):
    self.encoder_writer.save(step, final=final)
    if not self._is_chief:
      return
    config_path = fileio.join(self._model_dir, checkpoint_layout.MODEL_CONFIG_FILE)
    if not fileio.exists(config_path):
      rembert_config.save_model_config(self._config.task.model, config_path)
    spm_target = fileio.join(self._model_dir, checkpoint_layout.SENTENCEPIECE_FILE)
    if self._spm_path and not fileio.exists(spm_target):
      fileio.copy(self._spm_path, spm_target)

  def close(self):
    if not self._is_chief:
      fileio.rmtree(self._export_dir)
