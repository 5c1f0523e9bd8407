"""The embedded demo: a synthetic multilingual world, pre-training on it, zero-shot transfer.

Modules, from words to the whole job:

  lexicon   concepts, their English forms and invented forms in six scripts,
            loanwords, code-switched lexicons
  grammar   `Frame` (one clause's meaning) and `render(frame, lang)`
  corpus    stories: monolingual, parallel and code-switched documents;
            `generate_corpus` writes the pre-training corpus
  nli       XNLI-like pairs in every language; zero-shot accuracy of a
            pre-trained encoder against a randomly initialised one
  runner    the demo, one function per step (`run_demo`)

`python -m rembert_tf.demo` (or `bash run.sh demo`, or the `rembert-demo`
console script) runs it; see `rembert_tf/demo/__main__.py` for the flags.
Nothing here imports TensorFlow until a step needs it.
"""


def run():
  """Console-script entry point (`rembert-demo`): see `rembert_tf.demo.__main__`."""
  from rembert_tf.demo import __main__ as demo_main  # pylint: disable=g-import-not-at-top
  demo_main.run()
