"""XTREME scoring: the task table, the benchmark's metric definitions and a folder scorer."""
