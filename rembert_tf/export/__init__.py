"""SavedModel export: the encoder alone (TF-Hub BERT encoder API) and its preprocessor (`rembert-export`)."""
