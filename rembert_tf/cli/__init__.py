"""The commands: one module per command, each with its flags, `main(argv)` and `run()`.

`tools/NAME.py`, the console scripts (`rembert-*`, see setup.py) and
`python -m rembert_tf.train` / `rembert_tf.finetune` call `run()`; `harness`
is how every command parses flags, writes its log file and reports errors,
under the console script's name (`command_names`, the table setup.py reads),
with one flag name per shared concept (`flag_names`: the agreed names, and
the old ones as deprecated aliases).
A command module imports no TensorFlow or Model Garden until `main` runs:
`--help` answers at once.
"""
