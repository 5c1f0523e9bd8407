"""RemBertTextClassifierPreprocessor: strings (or pairs) -> backbone inputs.

Builds on `keras_hub.models.TextClassifierPreprocessor`, which packs as the
project's preprocessing SavedModel does (`[CLS] a [SEP] b [SEP]`, segment
ids 0 then 1, round-robin truncation).

Example:
<!-- snippet: not run: needs the `[keras]` extra (Keras 3, keras-hub) and a preset converted from a checkpoint -->
```python
from rembert_tf.keras_hub import RemBertTextClassifierPreprocessor
preprocessor = RemBertTextClassifierPreprocessor.from_preset("presets/rembert",
                                                             sequence_length=128)
preprocessor(["The cat sleeps."])                              # one segment
preprocessor(x=(["The cat sleeps."], ["A cat is sleeping."]))  # pairs (x=: a
                                        # positional 2-tuple reads as (x, y))
```
"""
import keras
import keras_hub

from rembert_tf.keras_hub import rembert_backbone
from rembert_tf.keras_hub import rembert_tokenizer


@keras.saving.register_keras_serializable(package="rembert_tf")
class RemBertTextClassifierPreprocessor(
    keras_hub.models.TextClassifierPreprocessor):
  """RemBERT text classification preprocessing (see the module docstring).

  Args:
    tokenizer: a `RemBertTokenizer`.
    sequence_length: packed length (at most the backbone's
      `max_sequence_length`).
    truncate: "round_robin" (the SavedModel's rule) or "waterfall".
  """

  backbone_cls = rembert_backbone.RemBertBackbone
  tokenizer_cls = rembert_tokenizer.RemBertTokenizer
