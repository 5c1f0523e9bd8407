"""The commands: one module per command, each with its flags, `main(argv)` and `run()`.

`run()` (called by the console scripts of `command_names`, `tools/NAME.py` and
`python -m rembert_tf.train` / `.finetune`) runs the command through
`rembert_tf.common.command`. A command module imports no TensorFlow or Model
Garden until `main` runs: `--help` answers at once.
"""
