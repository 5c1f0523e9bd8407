"""Sentence retrieval without fine-tuning: XTREME's BUCC 2018 and Tatoeba.

`retrieval_runner` runs them all (`rembert-retrieve`).
"""
