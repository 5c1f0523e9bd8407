"""Fixtures shared by every test area, built once per test session.

- `demo_corpus_dir()`: a 0.3 MB demo corpus (7 languages, monolingual documents only).
- `sentencepiece_model()`: a 1000-piece model in this project's layout
  (<pad>=0 <unk>=1 [CLS]=2 [SEP]=3 [MASK]=4), trained on that corpus.
- `released_layout_sentencepiece()`: a model laid out like the released
  RemBERT's: [PAD]=0 [UNK]=1, 310 other user pieces, then [CLS]=312 [SEP]=313
  [MASK]=314, then the learned pieces.
- `tiny_config(**overrides)`: the model config every test builds unless it
  needs another shape (the `tiny` preset shrunk to ~27k parameters).
- `held_by_another_process(*paths)`: a live process on this host holds the
  output locks of `paths` (and writes a temporary beside each) for the block.
- `run_command_cases(module, argvs)`: `main(argv)` of one command module for
  each argv, all in one process (absl flags are global: one command per
  process); `assert_one_line_error(prog, result, *parts)` checks what a user
  sees of a refused run.
- `CHECKPOINT_FAULTS`: what a kill or a copy cut short leaves of the newest
  checkpoint of a directory (a truncated data file, a deleted index, a
  `checkpoint` file naming a step whose files are missing).
Each test copies what it changes into its own tmp_path.
"""
import atexit
import contextlib
import errno
import functools
import glob
import json
import os
import pathlib
import shutil
import subprocess
import sys
import tempfile

import sentencepiece as spm

from rembert_tf.common import fileio

# Pieces of the tests' SentencePiece models: 1000, faster to train than the
# 2000 of the demo's vocabulary (the `tiny` preset's vocab_size).
SENTENCEPIECE_VOCAB_SIZE = 1000
RELEASED_CLS_ID = 312
RELEASED_SEP_ID = 313
RELEASED_MASK_ID = 314


# The shared test model: every size small, dropout off (deterministic outputs).
TINY_MODEL = dict(vocab_size=97, hidden_size=32, num_hidden_layers=2,
                  num_attention_heads=2, intermediate_size=64,
                  input_embedding_size=16, output_embedding_size=48,
                  max_position_embeddings=32, hidden_dropout_prob=0.0,
                  attention_probs_dropout_prob=0.0)


def tiny_config(**overrides):
  """A validated RemBertConfig: the `tiny` preset with TINY_MODEL, then `overrides`.

  >>> tiny_config(num_output_layers=1).num_output_layers
  1
  """
  from rembert_tf.modeling import rembert_config  # pylint: disable=g-import-not-at-top
  return rembert_config.load_model_config("tiny", {**TINY_MODEL, **overrides})


@functools.lru_cache(maxsize=None)
def shared_dir() -> pathlib.Path:
  path = tempfile.mkdtemp(prefix="rembert_tests-")
  atexit.register(shutil.rmtree, path, True)
  return pathlib.Path(path)


@functools.lru_cache(maxsize=None)
def demo_corpus_dir() -> pathlib.Path:
  from rembert_tf.demo import corpus  # pylint: disable=g-import-not-at-top
  root = shared_dir() / "corpus"
  # Monolingual documents only: the data tests check each language's own words.
  corpus.generate_corpus(root, target_megabytes=0.3, files_per_language=2,
                         seed=7, parallel_fraction=0.0, code_switched_fraction=0.0)
  return root


@functools.lru_cache(maxsize=None)
def sentencepiece_model() -> pathlib.Path:
  from rembert_tf.data import sentencepiece_training  # pylint: disable=g-import-not-at-top
  out = shared_dir() / "spm"
  sentencepiece_training.train_sentencepiece(
      [str(demo_corpus_dir() / "{lang}" / "*.txt")], out,
      SENTENCEPIECE_VOCAB_SIZE, verbose=False, num_threads=2)
  return out / "sentencepiece.model"


@functools.lru_cache(maxsize=None)
def released_layout_sentencepiece() -> pathlib.Path:
  """A SentencePiece model with the released RemBERT's special-id layout."""
  out = shared_dir() / "released_spm"
  out.mkdir(parents=True, exist_ok=True)
  fillers = [f"<extra_{i}>" for i in range(2, RELEASED_CLS_ID)]
  text_files = sorted(str(p) for p in demo_corpus_dir().glob("*/*.txt"))
  spm.SentencePieceTrainer.Train(
      input=",".join(text_files), model_prefix=str(out / "sentencepiece"),
      vocab_size=SENTENCEPIECE_VOCAB_SIZE, model_type="unigram",
      character_coverage=1.0,
      pad_id=0, pad_piece="[PAD]", unk_id=1, unk_piece="[UNK]", bos_id=-1,
      eos_id=-1, user_defined_symbols=fillers + ["[CLS]", "[SEP]", "[MASK]"],
      input_sentence_size=20000, shuffle_input_sentence=False,
      num_threads=2, minloglevel=2)
  return out / "sentencepiece.model"


REPO = pathlib.Path(__file__).resolve().parents[1]

# Holds the output locks of argv's paths until stdin closes; prints its pid and
# one temporary it writes beside each output (TensorFlow is not imported).
_LOCK_HOLDER = r"""
import contextlib, os, sys
from rembert_tf.common import fileio, output_lock
with contextlib.ExitStack() as stack:
  temporaries = []
  for path in sys.argv[1:]:
    stack.enter_context(output_lock.writing_output(path))
    temporaries.append(fileio.temporary_path(path))
    os.makedirs(temporaries[-1])
  print(os.getpid(), *temporaries, flush=True)
  sys.stdin.read()
"""


@contextlib.contextmanager
def held_by_another_process(*paths):
  """Yields (pid, [temporary beside each path]) of a process holding their locks."""
  env = dict(os.environ, PYTHONPATH=os.pathsep.join(
      [str(REPO), os.environ.get("PYTHONPATH", "")]))
  holder = subprocess.Popen(
      [sys.executable, "-c", _LOCK_HOLDER, *map(str, paths)],
      stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True, env=env)
  try:
    pid, *temporaries = holder.stdout.readline().split()
    assert int(pid) == holder.pid, "the lock holder did not start"
    yield holder.pid, temporaries
  finally:
    holder.stdin.close()
    holder.wait(timeout=60)


# Runs main(argv) of one command module for each argv; one JSON line per case
# with the exit code, stdout and stderr (absl's log lines included).
_COMMAND_DRIVER = r"""
import contextlib, importlib, io, json, logging, sys
from absl import flags
module = importlib.import_module(sys.argv[1])
from rembert_tf.common import command
prog = module.PROG
for argv in json.loads(sys.argv[2]):
  flags.FLAGS.unparse_flags()
  out, err = io.StringIO(), io.StringIO()
  code = 0
  with contextlib.redirect_stderr(err), contextlib.redirect_stdout(out):
    try:
      code = module.main(command.parse_flags(prog, ["prog"] + argv))
    except SystemExit as e:
      code = e.code
  print(json.dumps({"code": code or 0, "stdout": out.getvalue(),
                    "stderr": err.getvalue()}), flush=True)
"""


def run_command_cases(module: str, argvs, timeout: int = 600):
  """[{code, stdout, stderr}] of `module.main(argv)` for each argv."""
  env = dict(os.environ, TF_CPP_MIN_LOG_LEVEL="2", TF_USE_LEGACY_KERAS="1",
             PYTHONPATH=os.pathsep.join([str(REPO),
                                         os.environ.get("PYTHONPATH", "")]))
  done = subprocess.run(
      [sys.executable, "-c", _COMMAND_DRIVER, module, json.dumps(argvs)],
      capture_output=True, text=True, cwd=str(REPO), env=env,
      timeout=timeout, check=False)
  assert done.returncode == 0, done.stderr[-3000:]
  results = [json.loads(line) for line in done.stdout.splitlines()
             if line.startswith("{")]
  assert len(results) == len(argvs), done.stderr[-3000:]
  return results


def assert_one_line_error(prog: str, result, *parts: str) -> str:
  """Exit code 1 and one line `PROG: error: ...` holding every part."""
  lines = [l for l in result["stderr"].splitlines()
           if l.startswith(f"{prog}: error: ")]
  assert result["code"] == 1, result
  assert "Traceback" not in result["stderr"], result["stderr"]
  assert len(lines) == 1, result["stderr"]
  for part in parts:
    assert part in lines[0], (part, lines[0])
  return lines[0]


def _truncate_data(directory, prefix):
  del directory
  data = prefix + ".data-00000-of-00001"
  with open(data, "r+b") as f:
    f.truncate(os.path.getsize(data) // 2)
  return "bytes"


def _delete_index(directory, prefix):
  del directory
  os.remove(prefix + ".index")
  return ".index is missing"


def _remove_named_step(directory, prefix):
  """The `checkpoint` file still names `prefix`, whose files are gone."""
  del directory
  for path in glob.glob(prefix + ".*"):
    os.remove(path)
  return "none of its files exists"


# name -> breaks the newest checkpoint `prefix` of `directory` (so that the
# one before it is the newest intact one); returns a part of the line that
# reports it.
CHECKPOINT_FAULTS = {"truncated_data": _truncate_data,
                     "deleted_index": _delete_index,
                     "missing_step": _remove_named_step}


# Faults at the file layer every output is written through (fileio): a kill
# (an exception no handler of the code under test catches) or a full disk at
# the Nth write, rename or removal.
class Killed(BaseException):
  """The process dies here: no `except Exception` of the code under test runs."""


def disk_full(message):
  return OSError(errno.ENOSPC, "No space left on device", message)


class StepFaults:
  """Once armed, counts the swap's steps on the filesystem and fails the Nth."""

  def __init__(self, monkeypatch, at=None, fault=Killed,
               names=("rename", "rmtree", "remove", "open_file")):
    self.at, self.fault, self.count, self.armed = at, fault, 0, False
    self.steps = []
    for name in names:
      monkeypatch.setattr(fileio, name, self._wrap(getattr(fileio, name), name))

  def _wrap(self, original, name):
    def step(*args, **kwargs):
      mode = args[1] if len(args) > 1 else kwargs.get("mode", "r")
      if self.armed and (name != "open_file" or "r" not in mode):
        self.count += 1
        self.steps.append(f"{name}{args[:2]}")
        if self.count == self.at:
          raise self.fault(f"step {self.at}: {name}{args[:2]}")
      return original(*args, **kwargs)
    return step


