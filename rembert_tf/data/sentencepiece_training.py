"""Trains the multilingual SentencePiece unigram model on a language-balanced sample.

Builds on `sentencepiece.SentencePieceTrainer` as Model Garden's
`official/nlp/data/train_sentencepiece.py` does, with the sample of
`sentencepiece_sample` (q_l ~ p_l**alpha), whole-word seed pieces for small
vocabularies (`write_seed_pieces`) and the fixed special ids of `tokenizer`.
Writes `<prefix>.model`, `.vocab` and `.json` (vocab size, special ids,
sha256) on any filesystem.
"""
import collections
import contextlib
import functools
import os
import re
import time
import unicodedata
from typing import Any, Callable, Dict, Optional, Sequence, Tuple

import sentencepiece as spm

from rembert_tf.common import errors
from rembert_tf.common import fileio
from rembert_tf.common import local_files
from rembert_tf.common import output_overlap
from rembert_tf.common import output_sets
from rembert_tf.common import outputs
from rembert_tf.data import data_engine
from rembert_tf.data import sentencepiece_sample
from rembert_tf.data import text_inputs
from rembert_tf.data import tfds_text_inputs
from rembert_tf.data import tokenizer

_WORD_START = "\u2581"  # SentencePiece's whitespace / word-start marker.


# Runs of letters (with combining marks: Devanagari vowel signs, Arabic
# harakat, ...), of digits, or of other non-space characters.
_MARKS = "".join(re.escape(chr(c)) for c in range(0x300, 0x10000)
                 if unicodedata.category(chr(c)) in ("Mn", "Mc", "Me"))
_RUNS = re.compile(rf"(?:[^\W\d_]|[{_MARKS}])+|\d+|[^\w\s{_MARKS}]+|_+")
SEED_PIECES = ("auto", "words", "sentencepiece")
# SentencePiece's own default; fixed, so a model does not depend on the machine.
DEFAULT_NUM_THREADS = 16
# The local scratch directory of a run: PREFIX + its owner tag (PID@HOST).
SCRATCH_PREFIX = "rembert_tf-spm-"
AUTO_WORD_SEEDS_MAX_VOCAB = 8000


class TrainingError(errors.RemBertError, RuntimeError):
  """SentencePiece cannot build the asked vocabulary from the sample."""


def _training_error(error: RuntimeError, vocab_size: int, inputs
                    ) -> TrainingError:
  """SentencePiece's failure as one line with the fix that applies (a sample
  of lines it would skip is refused before:
  `sentencepiece_sample.check_has_text`)."""
  message = " ".join(str(error).split())
  too_high = re.search(r"Vocabulary size too high \((\d+)\)\. Please set it "
                       r"to a value <= (\d+)", message)
  too_small = re.search(r"Vocabulary size is smaller than required_chars\. "
                        r"(\d+) vs (\d+)", message)
  if too_high:
    fix = (f"the sample allows at most {too_high.group(2)} pieces: lower "
           f"--vocab_size to {too_high.group(2)} or less, or add text.")
  elif too_small:
    fix = (f"the sample has {too_small.group(2)} characters that need pieces: "
           f"raise --vocab_size to more than {too_small.group(2)} or lower "
           "--character_coverage.")
  else:
    fix = f"SentencePiece says: {message}"
  return TrainingError(f"SentencePiece could not train --vocab_size "
                       f"{vocab_size} on the sample of {list(inputs)}: {fix}")


def train_model(sample_file: str, model_prefix: str, vocab_size: int, *,
                character_coverage: float, num_threads: int,
                seed_pieces: str, inputs,
                seed: int = 0) -> None:
  """A unigram model with the fixed special ids (local files, the sample in
  the model's folder).

  Deterministic: the sample is read in order, the generator is seeded and the
  thread count given; it runs in the model's folder on file names, so the
  model records names, not this run's temporary paths.
  """
  seed_options = {}
  if seed_pieces == "words" or (seed_pieces == "auto" and
                                vocab_size <= AUTO_WORD_SEEDS_MAX_VOCAB):
    seed_file = model_prefix + ".seed_pieces.tsv"
    write_seed_pieces(sample_file, seed_file)
    seed_options["seed_sentencepieces_file"] = os.path.basename(seed_file)
  spm.set_random_generator_seed(seed)
  pieces = {role: names[0] for role, names in tokenizer.ROLE_PIECES.items()}
  try:
    with contextlib.chdir(os.path.dirname(model_prefix)):
      spm.SentencePieceTrainer.Train(
          input=os.path.basename(sample_file),
          model_prefix=os.path.basename(model_prefix),
          model_type="unigram", vocab_size=vocab_size,
          character_coverage=character_coverage,
          pad_id=tokenizer.PAD_ID, unk_id=tokenizer.UNK_ID, bos_id=-1,
          eos_id=-1, pad_piece=pieces["pad_id"], unk_piece=pieces["unk_id"],
          control_symbols=[pieces["cls_id"], pieces["sep_id"],
                           pieces["mask_id"]],
          input_sentence_size=0, shuffle_input_sentence=False,
          max_sentence_length=sentencepiece_sample.MAX_LINE_BYTES,
          num_threads=num_threads, hard_vocab_limit=True, minloglevel=2,
          **seed_options)
  except RuntimeError as e:
    raise _training_error(e, vocab_size, inputs) from None


def draw_training_sample(files: Sequence[text_inputs.InputFile],
                         sample_path: str,
                         options: sentencepiece_sample.SampleOptions, *,
                         sample_with_beam: bool = False,
                         runner: str = "DirectRunner",
                         beam_args: Sequence[str] = (), inputs=(),
                         log: Callable[..., None] = print) -> Dict[str, Any]:
  """Writes the sample into `sample_path` and its summary into `PATH.json`
  (`sentencepiece_sample`'s steps, here or with Apache Beam on `runner`);
  returns the summary."""
  runner = runner if sample_with_beam else None
  if runner:
    data_engine.require_beam("--sample_with_beam")
    if (runner not in data_engine.DIRECT_RUNNERS and
        not fileio.is_remote(sample_path)):
      raise errors.UsageError(
          f"--sample_path {sample_path!r} is local, but the {runner} workers "
          "cannot write to this machine; give a shared location "
          "(--sample_path gs://bucket/spm/sample.txt).")
  log(f"train_sentencepiece: drawing the sample of {len(files)} files"
      f"{f' with Apache Beam {runner}' if runner else ''} -> {sample_path}")
  steps = [
      data_engine.Step("Count", files, functools.partial(
          sentencepiece_sample.count_languages, options=options, log=log),
                       functools.partial(sentencepiece_sample.plan_sample,
                                         options=options)),
      data_engine.Step("Draw", list(enumerate(files)), functools.partial(
          sentencepiece_sample.draw_part, options=options,
          sample_path=sample_path), functools.partial(
              sentencepiece_sample.write_sample, options=options,
              sample_path=sample_path))]
  try:
    data_engine.run(steps, runner=runner, beam_args=beam_args)
  finally:
    for part in fileio.glob(sample_path + ".part-*"):
      fileio.remove(part)
  summary = fileio.read_json(sample_path + ".json")
  try:
    sentencepiece_sample.check_has_text(summary, inputs, log)
  except text_inputs.TextInputError:
    for written in (sample_path, sample_path + ".json"):
      fileio.remove(written)
    raise  # also an input without any text
  for lang, m in summary["languages"].items():
    log(f"  {lang}: {m['lines']} lines -> {m['sample_lines']} in the sample "
        f"(q={m['sampling_probability']:.3f})")
  return summary


MODEL_SUFFIXES = (".model", ".vocab", ".json")


def _publish(local_prefix: str, output_dir: str, model_prefix: str,
             overwrite: bool) -> Tuple[str, Dict[str, Any]]:
  """Publishes the model, its vocabulary and its metadata as one set
  (`output_sets.atomic_file_set`): (the model path, the metadata)."""
  names = [model_prefix + suffix for suffix in MODEL_SUFFIXES]
  with output_sets.atomic_file_set(output_dir, names, overwrite) as staging:
    for suffix in (".vocab", ".model"):
      fileio.copy(local_prefix + suffix,
                  fileio.join(staging, model_prefix + suffix))
    meta = tokenizer.write_tokenizer_metadata(
        fileio.join(staging, model_prefix + ".model"))
  return fileio.join(output_dir, model_prefix + ".model"), meta


@outputs.writes_output("output_dir")
def train_sentencepiece(inputs: Sequence[str], output_dir, vocab_size: int, *,
                        model_prefix: str = "sentencepiece",
                        input_format: str = "auto",
                        languages: Optional[Sequence[str]] = None,
                        language_field: Optional[str] = None,
                        tfds: Optional[tfds_text_inputs.TfdsTextOptions] = None,
                        language_sampling_alpha: float = 0.7,
                        sample_size: int = 2_000_000,
                        character_coverage: float = 0.99995, seed: int = 0,
                        num_threads: int = DEFAULT_NUM_THREADS,
                        seed_pieces: str = "auto",
                        sample_with_beam: bool = False,
                        runner: str = "DirectRunner",
                        beam_args: Sequence[str] = (),
                        sample_path: Optional[str] = None,
                        sample_only: bool = False,
                        overwrite: bool = False,
                        verbose: bool = True) -> Dict[str, Any]:
  """Trains `<output_dir>/<model_prefix>.model` (docs/data.md: the flags of
  the same names); returns its metadata dict, with the sample's summary.

  The sample is drawn (with Apache Beam on `runner` when `sample_with_beam`)
  into `sample_path`, or a local temporary file; `sample_only` stops there
  (returns the summary alone). The model depends on `num_threads`, not on
  the machine.
  """
  log = print if verbose else (lambda *a, **k: None)
  _check_arguments(vocab_size, seed_pieces, sample_only, sample_path)
  options = sentencepiece_sample.SampleOptions(
      language_sampling_alpha, sample_size, seed,
      tuple(languages or ()) or None)
  files = tfds_text_inputs.resolve_inputs(inputs, input_format, languages,
                                          language_field, tfds)
  sampling = dict(sample_with_beam=sample_with_beam, runner=runner,
                  beam_args=beam_args, inputs=inputs, log=log)
  if sample_only:
    return {"sample": draw_training_sample(files, sample_path, options,
                                           **sampling)}
  output_dir = fileio.as_str(output_dir).rstrip("/")
  _check_output(output_dir, model_prefix, overwrite, files, sample_path)
  start = time.time()
  with local_files.local_scratch_dir(SCRATCH_PREFIX) as tmp_dir:
    local_sample = os.path.join(tmp_dir, "sample.txt")
    sample = draw_training_sample(files, sample_path or local_sample, options,
                                  **sampling)
    if sample_path:
      fileio.copy(sample_path, local_sample)
    log(f"train_sentencepiece: training a unigram model, vocab_size "
        f"{vocab_size}, on {sample['lines']} lines")
    local_prefix = os.path.join(tmp_dir, model_prefix)
    train_model(local_sample, local_prefix, vocab_size,
                character_coverage=character_coverage, num_threads=num_threads,
                seed_pieces=seed_pieces, inputs=inputs, seed=seed)
    model_path, meta = _publish(local_prefix, output_dir, model_prefix,
                                overwrite)
  log(f"train_sentencepiece: wrote {model_path} (sha256 {meta['sha256'][:12]}"
      f"...) in {time.time() - start:.1f}s")
  return dict(meta, sample=sample)


def _check_arguments(vocab_size: int, seed_pieces: str, sample_only: bool,
                     sample_path: Optional[str]) -> None:
  if sample_only and not sample_path:
    raise errors.UsageError("--sample_only needs --sample_path (where the "
                            "sample is written).")
  if vocab_size <= len(tokenizer.ROLE_PIECES):
    raise errors.UsageError(
        f"--vocab_size must exceed {len(tokenizer.ROLE_PIECES)} (the special "
        f"pieces), got {vocab_size}.")
  if seed_pieces not in SEED_PIECES:
    raise errors.UsageError(f"--seed_pieces must be one of {SEED_PIECES}, got "
                            f"{seed_pieces!r}.")


def _check_output(output_dir: str, model_prefix: str, overwrite: bool, files,
                  sample_path: Optional[str]) -> None:
  """Before any work: an existing model only with `overwrite`; no file of
  the model's set may be an input file or the sample."""
  output_sets.refuse_existing_members(
      output_dir, [model_prefix + suffix for suffix in MODEL_SUFFIXES],
      overwrite)
  inputs = {f"--input {f.path}": f.path for f in files}
  inputs["--sample_path"] = sample_path
  for suffix in MODEL_SUFFIXES:
    output_overlap.refuse_overlap(
        fileio.join(output_dir, model_prefix + suffix), inputs, "the output")


def write_seed_pieces(sample_file, output_file, *, max_pieces: int = 200_000,
                      max_piece_length: int = 16) -> int:
  """Writes whole-word seed pieces (`piece<TAB>count`) weighted by token count.

  SentencePiece 0.2 seeds by type frequency, so on a small corpus a frequent
  short word can be split into letters. Words are split as SentencePiece
  pre-tokenises. Returns the number of seed pieces written.
  """
  counts = collections.Counter()
  with fileio.open_file(sample_file, "r") as f:
    for line in f:
      for token in line.split():
        runs = _RUNS.findall(token)
        if runs:
          counts[_WORD_START + runs[0]] += 1
          counts.update(runs[1:])
  written = 0
  with fileio.atomic_write(output_file, "w") as f:
    for piece, count in counts.most_common():
      if len(piece) < 2 or len(piece) > max_piece_length or count < 2:
        continue
      f.write(f"{piece}\t{count}\n")
      written += 1
      if written >= max_pieces:
        break
  return written
