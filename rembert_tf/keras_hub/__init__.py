"""RemBERT for Keras 3 and keras-hub: backbone, tokenizer, preprocessors, tasks.

Runs on every Keras 3 backend and imports Keras 3 and keras-hub only (no
tf-keras); docs/keras_hub.md shows its use.
"""
from rembert_tf.keras_hub.rembert_backbone import RemBertBackbone
from rembert_tf.keras_hub.rembert_masked_lm import RemBertMaskedLM
from rembert_tf.keras_hub.rembert_masked_lm_head import RemBertMaskedLMHead
from rembert_tf.keras_hub.rembert_masked_lm_preprocessor import (
    RemBertMaskedLMPreprocessor)
from rembert_tf.keras_hub.rembert_question_answerer import (
    RemBertQuestionAnswerer)
from rembert_tf.keras_hub.rembert_question_answerer_preprocessor import (
    RemBertQuestionAnswererPreprocessor)
from rembert_tf.keras_hub.rembert_text_classifier import RemBertTextClassifier
from rembert_tf.keras_hub.rembert_text_classifier_preprocessor import (
    RemBertTextClassifierPreprocessor)
from rembert_tf.keras_hub.rembert_token_classifier import RemBertTokenClassifier
from rembert_tf.keras_hub.rembert_token_classifier_preprocessor import (
    RemBertTokenClassifierPreprocessor)
from rembert_tf.keras_hub.rembert_tokenizer import RemBertTokenizer
from rembert_tf.conversion import keras_hub_loading

# Hugging Face RemBERT folders and the preset checks, for these classes only.
keras_hub_loading.attach([value for name, value in list(globals().items())
                       if name.startswith("RemBert")])

__all__ = [
    "RemBertBackbone", "RemBertMaskedLM", "RemBertMaskedLMHead",
    "RemBertMaskedLMPreprocessor", "RemBertQuestionAnswerer",
    "RemBertQuestionAnswererPreprocessor", "RemBertTextClassifier",
    "RemBertTextClassifierPreprocessor", "RemBertTokenClassifier",
    "RemBertTokenClassifierPreprocessor", "RemBertTokenizer",
]
