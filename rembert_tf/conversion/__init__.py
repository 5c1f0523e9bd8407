"""Checkpoint conversion: released TF1 RemBERT, Hugging Face safetensors, rembert_tf.

Entry point: `rembert_tf.conversion.converter.convert_checkpoint` (CLI:
`rembert-convert`).
"""
