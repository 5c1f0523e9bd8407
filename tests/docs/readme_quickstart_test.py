"""The README's quickstart runs end to end, on a tiny model.

Every code block of README.md preceded by the line `<!-- snippet: run -->` is
run in the order it appears, in one temporary directory: each shell command as
its console script (`rembert-NAME` -> `run()` of the module setup.py names,
started with this interpreter, so the checkout is what runs), each Python
block with this interpreter. Every command must exit 0, and the files each
step is said to write must exist.

What the test changes, so that the run fits the CI budget (a README text that
is no longer there fails the test: the quickstart and this table change
together):

| README                                                  | the test runs                                   | why |
| ---                                                     | ---                                             | --- |
| `--megabytes 3`                                         | `--megabytes 2`                                 | a smaller corpus; 2 MB still yields the 2500 pieces of `pretrain_tiny_demo` |
| `task.train_data.input_path=records/train/*.tfrecord"`  | the same plus `,trainer.train_steps=20`         | 20 pre-training steps instead of 1200 |
| `--num_train_epochs 2`                                  | 4 steps of 8 pairs                              | a short fine-tuning run (XLA: the CPU's default, off) |

What the README takes from the user is written first:
- `rembert/`: a checkpoint in the released RemBERT's TF1 layout (tiny sizes,
  Adam slots, an output side), its `config.json`, and a SentencePiece model
  with the released special ids;
- `download/xnli/`: XNLI-like files in XTREME's layout (English training
  pairs, English and Spanish dev and test), from the demo's grammar.
"""
import os
import pathlib
import shutil
import subprocess
import sys

import docs_consistency_test as docs
import testlib

sys.path.insert(0, str(testlib.REPO / "tests" / "conversion"))
import conversion_testlib  # noqa: E402  pylint: disable=g-import-not-at-top,wrong-import-position

MARKER = "<!-- snippet: run -->"
TINY_STEPS = "--num_train_steps 4 --train_batch_size 8 --eval_batch_size 8"
SUBSTITUTIONS = (
    ("--megabytes 3", "--megabytes 2"),
    ('task.train_data.input_path=records/train/*.tfrecord"',
     'task.train_data.input_path=records/train/*.tfrecord,trainer.train_steps=20"'),
    ("--num_train_epochs 2", TINY_STEPS),
)
# What each step writes (relative to the working directory).
EXPECTED_OUTPUTS = (
    "spm/sentencepiece.model",
    "records/train/metadata.json",
    "runs/pretrain/model_config.yaml",
    "runs/pretrain/sentencepiece.model",
    "runs/pretrain/encoder/checkpoint",
    "export/rembert/saved_model.pb",
    "export/rembert_preprocessor/saved_model.pb",
    "converted/rembert/model_config.yaml",
    "converted/rembert/encoder/checkpoint",
    "converted/rembert/sentencepiece.model",
    "ft/xnli/results.json",
    "ft/xnli/runs/lr-0.0005_seed-0/predictions/xnli/dev-es.tsv",
    "ft/xnli/scores.json",
)


def quickstart_blocks():
  """(language, body) of the marked blocks, substitutions applied."""
  text = docs.REPO.joinpath("README.md").read_text(encoding="utf-8")
  for old, new in SUBSTITUTIONS:
    assert old in text, f"README.md no longer contains {old!r}: update SUBSTITUTIONS"
    text = text.replace(old, new)
  lines = text.splitlines()
  marked = {number + 1 for number, line in enumerate(lines, 1)
            if line.strip() == MARKER}   # the line after the marker opens the block
  blocks = []
  fence = None
  for number, line in enumerate(lines, 1):
    if fence is None and line.strip().startswith("```") and number in marked:
      fence, language, body = number, line.strip()[3:].strip(), []
    elif fence is not None and line.strip().startswith("```"):
      blocks.append((language, "\n".join(body)))
      fence = None
    elif fence is not None:
      body.append(line)
  assert len(blocks) == len(marked), "a quickstart marker is not followed by a code block"
  return blocks


def write_user_inputs(root: pathlib.Path):
  """The released checkpoint and the XTREME folder the README starts from."""
  from rembert_tf.data import tokenizer  # pylint: disable=g-import-not-at-top
  from rembert_tf.demo import nli  # pylint: disable=g-import-not-at-top
  sp_model = testlib.released_layout_sentencepiece()
  special = tokenizer.SpecialTokens.from_model(sp_model)
  release = root / "rembert"
  release.mkdir()
  conversion_testlib.write_released_checkpoint(
      release, conversion_testlib.small_config(vocab_size=special.vocab_size))
  shutil.copy(sp_model, release / "sentencepiece.model")
  nli.write_xnli_files(root / "download", num_train=64, num_dev=16, num_test=8,
                       languages=("en", "es"))


def command_argv(argv):
  """`rembert-NAME args` -> this interpreter running that console script."""
  module = docs.console_scripts().get(argv[0])
  assert module, f"the quickstart runs {argv[0]}, which setup.py does not define"
  launcher = (f"import sys; sys.argv[0] = {argv[0]!r}; "
              f"from {module} import run; run()")
  return [sys.executable, "-c", launcher, *argv[1:]]


def run(argv, cwd, what):
  env = dict(os.environ, PYTHONPATH=str(docs.REPO), TF_CPP_MIN_LOG_LEVEL="2")
  done = subprocess.run(argv, cwd=cwd, env=env, capture_output=True, text=True,
                        timeout=600, check=False)
  assert done.returncode == 0, (
      f"{what} exited {done.returncode}:\n{done.stdout[-2000:]}\n{done.stderr[-3000:]}")
  return done.stdout


def test_the_readme_quickstart_runs_end_to_end(tmp_path):
  write_user_inputs(tmp_path)
  printed = []
  for language, body in quickstart_blocks():
    if language == "python":
      printed.append(run([sys.executable, "-c", body], tmp_path, "a Python block"))
      continue
    assert language in ("bash", "sh", ""), language
    for argv in docs.shell_commands(body):
      run(command_argv(argv), tmp_path, " ".join(argv))
  missing = [p for p in EXPECTED_OUTPUTS if not (tmp_path / p).exists()]
  assert not missing, f"the quickstart did not write {missing}"
  # The Python block embedded two sentences with the tiny model (hidden 128).
  assert "(2, 128)" in "".join(printed), printed
