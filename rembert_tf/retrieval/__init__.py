"""Sentence retrieval without fine-tuning: XTREME's BUCC 2018 and Tatoeba (`rembert-retrieve`)."""
