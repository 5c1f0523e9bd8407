"""The embedded demo: a synthetic multilingual world, pre-training on it, zero-shot transfer.

Modules, from words to the whole job:

  lexicon   concepts, their English forms and invented forms in six scripts,
            loanwords, code-switched lexicons
  grammar   `Frame` (one clause's meaning) and `render(frame, lang)`
  corpus    stories: monolingual, parallel and code-switched documents;
            `generate_corpus` writes the pre-training corpus
  nli       XNLI-like pairs in every language, in XTREME's download/ layout
  zero_shot zero-shot accuracy of a pre-trained encoder against a randomly
            initialised one (fine-tunes with the fine-tuning command's library)
  runner    the demo, one function per step (`run_demo`)

`python -m rembert_tf.demo` (or `bash run.sh demo`, or the `rembert-demo`
console script) runs it; see `rembert_tf/demo/__main__.py` for the flags.
Nothing here imports TensorFlow until a step needs it, and the package
imports none of its modules: the corpus generator reaches no trainer.
"""
