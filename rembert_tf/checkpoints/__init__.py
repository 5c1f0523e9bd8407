"""Checkpoints between the model core and its users: layout, integrity, restoring."""
