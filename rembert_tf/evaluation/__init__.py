"""XTREME scoring: the benchmark's metric definitions and a folder scorer."""
