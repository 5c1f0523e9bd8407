"""Zero-shot transfer on the demo's XNLI-like pairs: fine-tune on English,
accuracy in every language, beside the same fine-tuning from a randomly
initialised encoder.

Builds on `demo.nli` and `finetuning.finetuning_runner` (imported only when it runs).

Example:
<!-- snippet: not run: needs a checkpoint directory (a pre-training run or a converted checkpoint) -->
```python
from rembert_tf.demo import zero_shot
table = zero_shot.zero_shot_accuracy("/tmp/run/pretrain", "/tmp/run/xnli")
table["pretrained"]["es"], table["random_init"]["es"]   # accuracy in percent
```
"""
import dataclasses
from typing import Dict, Optional, Sequence

from rembert_tf.common import fileio
from rembert_tf.demo import nli


@dataclasses.dataclass(frozen=True)
class FinetuneRecipe:
  """How the demo fine-tunes on English pairs (the same for both encoders)."""
  num_train: int = 4000
  num_dev: int = 300
  learning_rate: float = 5e-4
  num_train_epochs: float = 2.0
  train_batch_size: int = 32
  seq_length: int = 64
  # Frozen input embeddings favour the random encoder over the pre-trained one.
  freeze_input_embeddings: bool = False
  # Without XLA: no compilation for a model this small on CPU.
  jit_compile: bool = False


def _accuracy_by_language(results: Dict) -> Dict[str, float]:
  return {lang: float(value)
          for lang, value in results["scores"]["accuracy"].items()}


def zero_shot_accuracy(pretrain_dir, work_dir,
                       recipe: FinetuneRecipe = FinetuneRecipe(),
                       sp_model=None,
                       languages: Optional[Sequence[str]] = None,
                       random_init_baseline: bool = True,
                       seed: int = 0,
                       deterministic: bool = False,
                       progress=print) -> Dict[str, Dict[str, float]]:
  """Fine-tunes on English pairs, returns dev accuracy (percent) per language.

  Args:
    pretrain_dir: a pre-training model_dir or rembert_tf checkpoint directory.
    work_dir: gets download/, pretrained/ and random_init/.
    recipe: the fine-tuning recipe, the same for both encoders.
    sp_model: default `pretrain_dir/sentencepiece.model`.
    languages: default every demo language.
    random_init_baseline: also fine-tune the same architecture from random weights.
    seed: seeds the pairs and the fine-tuning.
    deterministic: fine-tune with `trainer.deterministic`.
  Returns:
    {"pretrained": {lang: accuracy}, "random_init": {lang: accuracy}}.
  """
  from rembert_tf.checkpoints import checkpoint_layout  # pylint: disable=g-import-not-at-top
  download = nli.write_xnli_files(
      fileio.join(work_dir, "download"), num_train=recipe.num_train,
      num_dev=recipe.num_dev, languages=languages, seed=seed)
  from rembert_tf.finetuning import finetuning_experiment  # pylint: disable=g-import-not-at-top
  from rembert_tf.finetuning import finetuning_runner  # pylint: disable=g-import-not-at-top
  common = {"data.task": "xnli", "sweep.learning_rates": [recipe.learning_rate],
            "trainer.seed": seed, "trainer.deterministic": deterministic,
            "trainer.num_train_epochs": recipe.num_train_epochs,
            "trainer.train_batch_size": recipe.train_batch_size,
            "data.seq_length": recipe.seq_length,
            "data.languages": list(languages) if languages else None,
            "trainer.freeze_input_embeddings": recipe.freeze_input_embeddings,
            "trainer.jit_compile": recipe.jit_compile, "data.splits": ["dev"]}
  pretrained = finetuning_runner.run_finetuning(
      finetuning_experiment.load_finetuning_config(params_override=dict(
          common, **{"encoder.init_checkpoint": fileio.as_str(pretrain_dir),
                     "data.data_dir": download,
                     "data.sentencepiece_model": (
                         fileio.as_str(sp_model) if sp_model else None)})),
      fileio.join(work_dir, "pretrained"), progress=progress)
  table = {"pretrained": _accuracy_by_language(pretrained)}
  if random_init_baseline:
    random_init = finetuning_runner.run_finetuning(
        finetuning_experiment.load_finetuning_config(params_override=dict(
            common, **{"encoder.model_config": fileio.join(
                pretrain_dir, checkpoint_layout.MODEL_CONFIG_FILE),
                       "data.records_dir": pretrained["records_dir"]})),
        fileio.join(work_dir, "random_init"), progress=progress)
    table["random_init"] = _accuracy_by_language(random_init)
  return table
