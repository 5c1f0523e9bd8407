"""SavedModel export: the encoder alone (TF-Hub BERT encoder API) and its preprocessor.

Entry points: `encoder_export.export_encoder`, `preprocessor_export.export_preprocessor`
(CLI: `rembert-export`).
"""