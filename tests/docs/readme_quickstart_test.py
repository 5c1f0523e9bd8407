"""The README's quickstart runs end to end, on a tiny model.

Every code block of README.md preceded by the line `<!-- snippet: run -->` is
run in the order it appears, in one temporary directory: each shell command as
its console script (`rembert-NAME` -> `run()` of the module setup.py names,
started with this interpreter, so the checkout is what runs), each Python
block with this interpreter. Every command must exit 0, and the files each
step is said to write must exist.

Every command runs with the arguments it is printed with; the test only adds
documented flags that shorten a run, so that it fits the CI budget (a README
text that is no longer there fails the test: the quickstart and this table
change together):

| README                                                  | the test adds                                   | why |
| ---                                                     | ---                                             | --- |
| `--xnli_dir download`                                   | `--xnli_train_pairs 64 --xnli_dev_pairs 16`     | 64 English training pairs, 16 dev pairs a language |
| `task.train_data.input_path=records/train/*.tfrecord"`  | `,trainer.train_steps=20` inside the override   | 20 pre-training steps instead of 1200 |
| `--num_train_epochs 2 --seq_length 64`                  | `--num_train_steps 4 --train_batch_size 8 --eval_batch_size 8` | a short fine-tuning run (`--num_train_steps` overrides the epochs; XLA: the CPU's default, off) |

What the README takes from the user is written first: `rembert/`, a
checkpoint in the released RemBERT's TF1 layout (tiny sizes, Adam slots, an
output side), its `config.json`, and a SentencePiece model with the released
special ids. Everything else, `download/` included, comes from the
quickstart's own steps.
"""
import os
import pathlib
import shutil
import subprocess
import sys

import pytest

import docs_consistency_test as docs
import testlib

sys.path.insert(0, str(testlib.REPO / "tests" / "conversion"))
import conversion_testlib  # noqa: E402  pylint: disable=g-import-not-at-top,wrong-import-position

MARKER = "<!-- snippet: run -->"
SHORTER = (
    ("--xnli_dir download",
     "--xnli_dir download --xnli_train_pairs 64 --xnli_dev_pairs 16"),
    ('task.train_data.input_path=records/train/*.tfrecord"',
     'task.train_data.input_path=records/train/*.tfrecord,trainer.train_steps=20"'),
    ("--num_train_epochs 2 --seq_length 64",
     "--num_train_epochs 2 --seq_length 64 --num_train_steps 4 "
     "--train_batch_size 8 --eval_batch_size 8"),
)
# What each step writes (relative to the working directory).
EXPECTED_OUTPUTS = (
    "download/xnli/train-en.tsv",
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
  """(language, body) of the marked blocks, the shortening flags added."""
  text = docs.REPO.joinpath("README.md").read_text(encoding="utf-8")
  for old, new in SHORTER:
    assert old in text, f"README.md no longer contains {old!r}: update SHORTER"
    assert new.startswith(old.rstrip('"')), "the test only adds flags"
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


def write_released_checkpoint(root: pathlib.Path):
  """The released checkpoint the README's step 4 converts (tiny sizes)."""
  from rembert_tf.data import tokenizer  # pylint: disable=g-import-not-at-top
  sp_model = testlib.released_layout_sentencepiece()
  special = tokenizer.SpecialTokens.from_model(sp_model)
  release = root / "rembert"
  release.mkdir()
  conversion_testlib.write_released_checkpoint(
      release, conversion_testlib.small_config(vocab_size=special.vocab_size))
  shutil.copy(sp_model, release / "sentencepiece.model")


def command_argv(argv):
  """`rembert-NAME args` -> this interpreter running that console script."""
  module = docs.console_scripts().get(argv[0])
  assert module, f"the quickstart runs {argv[0]}, which setup.py does not define"
  launcher = (f"import sys; sys.argv[0] = {argv[0]!r}; "
              f"from {module} import run; run()")
  return [sys.executable, "-c", launcher, *argv[1:]]


def run(argv, cwd, what):
  env = dict(os.environ, TF_CPP_MIN_LOG_LEVEL="2", PYTHONPATH=os.pathsep.join(
      [str(docs.REPO)] + [p for p in [os.environ.get("PYTHONPATH")] if p]))
  done = subprocess.run(argv, cwd=cwd, env=env, capture_output=True, text=True,
                        timeout=600, check=False)
  assert done.returncode == 0, (
      f"{what} exited {done.returncode}:\n{done.stdout[-2000:]}\n{done.stderr[-3000:]}")
  return done.stdout


def test_the_readme_quickstart_runs_end_to_end(tmp_path):
  write_released_checkpoint(tmp_path)
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


OUTPUT_FLAGS = ("--output_dir", "--model_dir", "--output_file", "--xnli_dir",
                "--run_dir")


def readme_outputs():
  """The relative paths README.md's commands write, and their logs beside."""
  found = set()
  for language, body, _ in docs.code_blocks(docs.REPO / "README.md"):
    if language not in ("bash", "sh"):
      continue
    for argv in docs.shell_commands(body):
      for flag, value in zip(argv, argv[1:]):
        if flag in OUTPUT_FLAGS and not value.startswith(("/", "gs://")):
          found.add(value)
          if flag == "--output_dir":   # an artefact's log folder beside it
            found.add(value + ".logs")
  return sorted(found)


def test_a_checkout_ignores_what_the_quickstart_writes():
  """Running the README in a checkout leaves no untracked output behind."""
  if not (docs.REPO / ".git").exists():
    pytest.skip("not a git checkout")
  outputs = readme_outputs()
  assert {"corpus", "download", "spm", "runs/pretrain", "ft/xnli"} <= set(outputs)
  probes = [f"{path}/written-by-the-quickstart" for path in outputs]
  done = subprocess.run(["git", "check-ignore", "--no-index", *probes],
                        cwd=docs.REPO, capture_output=True, text=True,
                        check=False)
  ignored = {line.rsplit("/", 1)[0] for line in done.stdout.splitlines()}
  assert not set(outputs) - ignored, (
      f"not in .gitignore: {sorted(set(outputs) - ignored)}")
