"""Raw multilingual text -> sharded pre-training TFRecords + metadata.json.

`create_pretraining_data` (wrapped by `rembert-create-pretraining-data`)
checks the flags, the SentencePiece model, the inputs and the output before
any work (`pretraining_instances.prepare`), then runs the record engine
(`pretraining_record_engine`): in worker processes on this machine (default),
or its steps as an Apache Beam pipeline (`beam_pretraining_records`,
`runner=`) for Wikipedia / mC4 scale on Dataflow, Flink or Spark; the same
bytes for a seed either way.

The records are written into a staging directory
`.create_pretraining_data.tmp-*` inside the output directory (`staged_output`),
which is swapped in when complete (`pretraining_record_format.
swap_in_records`): old records stay until the new ones are complete, a failed
run removes its staging directory, and the next run removes one a killed run
left. A directory that already holds records is refused unless
`overwrite=True`. The output may be on any filesystem (`gs://`).

Example:
<!-- snippet: not run: needs a corpus and a SentencePiece model -->
```python
from rembert_tf.data import pretraining_instances
from rembert_tf.data import pretraining_record_creation
from rembert_tf.data import tfds_text_inputs
meta = pretraining_record_creation.create_pretraining_data(
    inputs=["/tmp/corpus/{lang}/*.txt"], output_dir="/tmp/records",
    sentencepiece_model="/tmp/spm/sentencepiece.model",
    options=pretraining_instances.RecordOptions(seq_length=128,
                                                max_predictions_per_seq=20,
                                                num_output_shards=4),
    num_workers=2)
print(meta["num_examples"], meta["languages"]["en"]["sequences"])
# Text from TFDS datasets prepared on Cloud Storage:
meta = pretraining_record_creation.create_pretraining_data(
    inputs=["tfds:wiki40b/{lang}"], output_dir="gs://b/records",
    sentencepiece_model="gs://b/spm/sentencepiece.model",
    tfds=tfds_text_inputs.TfdsTextOptions(data_dir="gs://b/tensorflow_datasets"))
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

  On any failure the staging directory (and the output directory, when this
  run created it and it is empty) is removed; the old records are untouched.
  A full disk is reported naming the output directory.
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
    inputs: input specs (`corpus/{lang}/*.txt`, `en=path/*.json`; see
      text_inputs): plain text, wikiextractor or C4/mC4 JSON lines, gzipped
      or not, on any filesystem.
    output_dir: gets `pretrain-XXXXX-of-YYYYY.tfrecord` and metadata.json.
    sentencepiece_model: any SentencePiece model with [CLS], [SEP], [MASK], a
      padding and an unknown piece (ids by piece name).
    options: the record settings (`pretraining_instances.RecordOptions`);
      keyword arguments named like its fields (`seq_length=128`,
      `masking=Masking(...)`) override it.
    input_format, languages, language_field: see `text_inputs.resolve_inputs`;
      `tfds:` inputs are read from `tfds.data_dir` (`tfds_text_inputs`).
    num_workers: processes (local) or Beam workers; the output does not depend
      on it.
    runner: None for the local multiprocess engine, or an Apache Beam runner
      name (`DirectRunner`, `DataflowRunner`, `FlinkRunner`, `SparkRunner`);
      `beam_args` are Beam pipeline options (`--project=...`). Both engines
      write the same bytes for a seed.
    overwrite: replace records already in output_dir (the old ones stay until
      the new ones are complete).
  Raises:
    text_inputs.TextInputError (missing / empty input),
    errors.OutputExistsError (records exist), tokenizer.TokenizerError (bad
    model), errors.UsageError (bad flag): all `errors.RemBertError`.
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
