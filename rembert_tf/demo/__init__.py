"""The embedded demo: a synthetic multilingual world, pre-training on it, zero-shot transfer.

Modules, from words to the whole job: `lexicon` (concepts and their forms in
six scripts), `grammar` (`render(frame, lang)`), `frame_sampling`, `corpus`
(`generate_corpus`), `nli` and `retrieval_sets` (XTREME download/ layouts),
`zero_shot` and `runner` (`run_demo`). `python -m rembert_tf.demo` runs it.
The package imports none of its modules: the corpus generator reaches no
trainer.
"""
