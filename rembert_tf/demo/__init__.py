"""The embedded demo: a synthetic multilingual world, pre-training on it, zero-shot transfer.

Modules, from words to the whole job: `lexicon`, `grammar`, `frame_sampling`,
`corpus`, `nli` and `retrieval_sets` (XTREME download/ layouts), `runner`
(`run_demo`; `python -m rembert_tf.demo`). The package imports none of its
modules: the corpus generator reaches no trainer.
"""
