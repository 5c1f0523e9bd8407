"""Raw multilingual text -> sharded pre-training TFRecords + metadata.json.

`create_pretraining_data` (the `rembert-create-pretraining-data` command)
checks the flags, model, inputs and output before any work, then runs the
record engine in local worker processes (`pretraining_record_engine`) or as
an Apache Beam pipeline (`beam_pretraining_records`, `runner=`); the same
bytes for a seed either way. Records are written into a staging directory
inside the output directory and swapped in when complete (`staged_output`).

Example:
<!-- snippet: not run: needs a corpus and a SentencePiece model -->
```python
from rembert_tf.data import pretraining_instances
from rembert_tf.data import pretraining_record_creation
meta = pretraining_record_creation.create_pretraining_data(
    inputs=["/tmp/corpus/{lang}/*.txt"], output_dir="/tmp/records",
    sentencepiece_model="/tmp/spm/sentencepiece.model",
    options=pretraining_instances.RecordOptions(seq_length=128,
                                                max_predictions_per_seq=20,
                                                num_output_shards=4),
    num_workers=2)
```
"""
import dataclasses
import time
from typing import Any, Dict, Optional, Sequence

from rembert_tf.common import errors
from rembert_tf.common import fileio
from rembert_tf.common import outputs
from rembert_tf.data import pretraining_record_engine
from rembert_tf.data import pretraining_instances
from rembert_tf.data import pretraining_record_format
from rembert_tf.data import tfds_text_inputs


class staged_output:  # pylint: disable=invalid-name
  """Context: a staging directory inside the output, swapped in on success.

  On failure the staging directory (and an output directory this run created)
  is removed; the old records are untouched.
  """

  def __init__(self, output_dir: str):
    self.output_dir = output_dir
    self.created = not fileio.exists(output_dir)
    self.staging = None

  def __enter__(self) -> str:
    self.staging = pretraining_record_format.new_staging_directory(
        self.output_dir)
    return self.staging

  def __exit__(self, exc_type, exc, tb):
    if exc_type is None:
      pretraining_record_format.swap_in_records(self.staging, self.output_dir)
      return False
    fileio.rmtree(self.staging)
    if self.created and fileio.isdir(self.output_dir) and not fileio.listdir(
        self.output_dir):
      fileio.rmtree(self.output_dir)
    if fileio.is_disk_full(exc):  # Name the output, not a staging file.
      raise fileio.disk_full_error(self.output_dir, exc) from None
    return False


@outputs.writes_output("output_dir")
def create_pretraining_data(inputs: Sequence[str],
                            output_dir,
                            sentencepiece_model,
                            options: Optional[
                                pretraining_instances.RecordOptions] = None,
                            *,
                            input_format: str = "auto",
                            languages: Optional[Sequence[str]] = None,
                            language_field: Optional[str] = None,
                            tfds: Optional[
                                tfds_text_inputs.TfdsTextOptions] = None,
                            num_workers: int = 1,
                            runner: Optional[str] = None,
                            beam_args: Sequence[str] = (),
                            overwrite: bool = False,
                            verbose: bool = True,
                            **option_fields) -> Dict[str, Any]:
  """Makes pre-training records; returns the metadata written to metadata.json.

  Args:
    inputs: input specs (see text_inputs and tfds_text_inputs).
    output_dir: gets `pretrain-XXXXX-of-YYYYY.tfrecord` and metadata.json.
    sentencepiece_model: a model with [CLS], [SEP], [MASK], a padding and an
      unknown piece.
    options: `pretraining_instances.RecordOptions`; keyword arguments named
      like its fields override it.
    input_format, languages, language_field: see `text_inputs.resolve_inputs`.
    num_workers: processes or Beam workers; the output does not depend on it.
    runner: None (local engine) or an Apache Beam runner name, with
      `beam_args` as pipeline options.
    overwrite: replace records already in output_dir.
  Raises:
    errors.RemBertError subclasses (TextInputError, OutputExistsError,
    TokenizerError, UsageError).
  """
  options = dataclasses.replace(
      options or pretraining_instances.RecordOptions(), **option_fields)
  if num_workers < 1:
    raise errors.UsageError(f"--num_workers must be >= 1, got {num_workers}.")
  log = (lambda m: print(m, flush=True)) if verbose else (lambda m: None)
  start = time.time()
  prepared = pretraining_instances.prepare(
      inputs, output_dir, sentencepiece_model, options,
      input_format=input_format, languages=languages,
      language_field=language_field, tfds=tfds, overwrite=overwrite)
  with staged_output(prepared.output_dir) as staging:
    meta = _create_records(prepared, staging, runner, num_workers, beam_args,
                           log, verbose)
    pretraining_instances.check_has_sequences(meta, inputs)
  _log_summary(log, meta, time.time() - start)
  return meta


def _create_records(prepared, staging, runner, num_workers, beam_args, log,
                    verbose) -> Dict[str, Any]:
  """Records and metadata.json into `staging`, by the engine asked for."""
  if runner:
    # Imported only when asked for: loading Apache Beam takes seconds.
    from rembert_tf.data import beam_pretraining_records  # pylint: disable=g-import-not-at-top
    return beam_pretraining_records.run_pipeline(
        prepared, staging, runner=runner, num_workers=num_workers,
        beam_args=beam_args, log=log)
  return pretraining_record_engine.create_records(prepared, staging,
                                                  num_workers, log, verbose)


def _log_summary(log, meta: Dict[str, Any], elapsed: float) -> None:
  languages = meta["languages"].values()
  tokens = sum(l["tokens"] for l in languages)
  log(f"create_pretraining_data: {meta['num_examples']} sequences from "
      f"{sum(l['documents'] for l in languages)} documents, {tokens} tokens "
      f"in {elapsed:.1f}s ({tokens / max(elapsed, 1e-9):,.0f} tokens/s)")
  if meta["languages_without_text"]:
    log("  languages without text: "
        f"{', '.join(meta['languages_without_text'])}")
