"""SavedModel export: the encoder alone (TF-Hub BERT encoder API) and its preprocessor.

Entry points: `encoder_export.export_encoder`, `preprocessor_export.export_preprocessor`
(CLI: `rembert-export`).
"""
from rembert_tf.export.encoder_export import export_encoder  # noqa: F401
from rembert_tf.export.preprocessor_export import export_preprocessor  # noqa: F401
