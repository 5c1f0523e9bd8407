"""TensorFlow Datasets in tests, without downloads: prepared metadata, mocked reads.

`mocked_tfds(data_dir, examples)` writes, for each (builder, config) of
`examples`, the metadata a prepared dataset has in `data_dir`
(`<name>/<config>/<version>/dataset_info.json`: its splits, their shards'
example counts, their bytes), then runs the block under
`tfds.testing.mock_data` (policy USE_FILES: builders read that metadata, so
unknown configs, unprepared datasets and missing splits behave as with real
data). Reading a split (or `split[kshard]`) yields the given examples,
serialized and decoded by the builder's own features. Inside the block
TFDS's Cloud Storage lookups are switched back on and fail loudly if
reached: the code under test must switch them off itself.

`prepare_tfds(data_dir, examples)` writes really prepared datasets (metadata
and TFRecord shards), read by TFDS without any mock: for worker processes,
which a mock in the test's process does not reach.

`run_command_cases` runs a command's `main(argv)` for several argvs in one
process under `mocked_tfds`.

Example:
```python
import tfds_testlib
examples = {("wikiann", "de", "validation"): [
    {"tokens": ["Anna"], "tags": ["B-PER"], "langs": ["de"], "spans": ["PER: Anna"]}]}
with tfds_testlib.mocked_tfds(tmp_path / "tfds", examples):
  ...  # code under test reads wikiann/de:validation from tmp_path / "tfds"
```
"""
import collections
import contextlib
import json
import os
import pathlib
import re
import subprocess
import sys
from typing import Dict, List, Optional, Sequence, Tuple
from unittest import mock

import tensorflow as tf
import tensorflow_datasets as tfds
from tensorflow_datasets.core.utils import gcs_utils

SplitKey = Tuple[str, Optional[str], str]  # (builder, config, split)
TESTS = pathlib.Path(__file__).resolve().parent
REPO = TESTS.parent


def _builder(data_dir, name: str, config: Optional[str]):
  kwargs = {"config": config} if config is not None else {}
  return tfds.builder(name, data_dir=str(data_dir), **kwargs)


def _shard_lengths(count: int, shards: int) -> List[int]:
  return [len(range(k, count, shards)) for k in range(shards)]


def _shard_examples(rows: List[dict], shards: int, shard: int) -> List[dict]:
  """Shard `shard` of `rows`: contiguous, as `_shard_lengths` counts them."""
  lengths = _shard_lengths(len(rows), shards)
  start = sum(lengths[:shard])
  return rows[start:start + lengths[shard]]


def write_metadata(data_dir, name: str, config: Optional[str],
                   splits: Dict[str, Tuple[int, int, int]]) -> str:
  """dataset_info.json (and features) of a prepared dataset; its path.

  `splits`: split -> (examples, shards, bytes)."""
  builder = _builder(data_dir, name, config)
  path = str(builder.data_path)
  os.makedirs(path, exist_ok=True)
  template = lambda split: tfds.core.ShardedFileTemplate(  # noqa: E731
      data_dir=builder.data_path, dataset_name=builder.name, split=split,
      filetype_suffix="tfrecord",
      template=tfds.core.naming.DEFAULT_FILENAME_TEMPLATE)
  builder.info.set_splits(tfds.core.SplitDict([
      tfds.core.SplitInfo(name=split,
                          shard_lengths=_shard_lengths(count, shards),
                          num_bytes=num_bytes,
                          filename_template=template(split))
      for split, (count, shards, num_bytes) in splits.items()]))
  builder.info.write_to_directory(builder.data_path)
  return path


def _split_table(data_dir, examples, shards):
  """{(builder, config): {split: (examples, shards, bytes)}}."""
  splits = collections.defaultdict(dict)
  for key, rows in examples.items():
    name, config, split = key
    features = _builder(data_dir, name, config).info.features
    num_bytes = sum(len(features.serialize_example(e)) for e in rows)
    splits[(name, config)][split] = (len(rows), shards.get(key, 1), num_bytes)
  return splits


def prepare_tfds(data_dir, examples: Dict[SplitKey, List[dict]],
                 shards: Optional[Dict[SplitKey, int]] = None) -> None:
  """Really prepared datasets in data_dir: metadata and TFRecord shards of
  `examples` (as `tfds build` leaves them; read without any mock)."""
  shards = shards or {}
  for (name, config), counts in _split_table(data_dir, examples,
                                             shards).items():
    write_metadata(data_dir, name, config, counts)
    builder = _builder(data_dir, name, config)
    for split, (_, num_shards, _) in counts.items():
      paths = builder.info.splits[split].filename_template.sharded_filepaths(
          num_shards)
      for shard, path in enumerate(paths):
        with tf.io.TFRecordWriter(os.fspath(path)) as writer:
          for example in _shard_examples(examples[(name, config, split)],
                                         num_shards, shard):
            writer.write(builder.info.features.serialize_example(example))


def _no_gcs(*args, **kwargs):
  raise AssertionError(f"TFDS tried Cloud Storage: {args} {kwargs}")


@contextlib.contextmanager
def mocked_tfds(data_dir, examples: Dict[SplitKey, List[dict]],
                shards: Optional[Dict[SplitKey, int]] = None):
  """Prepared-looking datasets in data_dir whose splits read `examples`
  (in `shards[key]` shards, default 1; `split[kshard]` reads shard k)."""
  shards = shards or {}
  for (name, config), counts in _split_table(data_dir, examples,
                                             shards).items():
    write_metadata(data_dir, name, config, counts)

  def as_dataset(self, split, decoders=None, read_config=None,
                 shuffle_files=False):
    del decoders, read_config, shuffle_files
    config = self.builder_config.name if self.builder_config else None
    split = str(split)
    shard = re.match(r"^(.*)\[(\d+)shard\]$", split)
    if shard:
      key = (self.name, config, shard.group(1))
      rows = _shard_examples(examples[key], shards.get(key, 1),
                             int(shard.group(2)))
    else:
      rows = examples[(self.name, config, split)]
    features = self.info.features
    serialized = [features.serialize_example(e) for e in rows]
    return tf.data.Dataset.from_tensor_slices(
        tf.constant(serialized, tf.string)).map(features.deserialize_example)

  with tfds.testing.mock_data(policy=tfds.testing.MockPolicy.USE_FILES,
                              data_dir=str(data_dir),
                              as_dataset_fn=as_dataset), \
      mock.patch.object(gcs_utils, "_is_gcs_disabled", False), \
      mock.patch.object(gcs_utils, "exists", _no_gcs):
    yield


# Runs main(argv) of one command module for each case, in one process under
# mocked_tfds; prints one JSON line per case: exit code and stderr.
_DRIVER = r"""
import contextlib, importlib, io, json, sys
spec = json.loads(sys.argv[1])
sys.path[:0] = spec["paths"]
from absl import flags
import tfds_testlib
module = importlib.import_module(spec["module"])
fixtures, function = spec["examples"].split(":")
examples = getattr(importlib.import_module(fixtures), function)()
shards = None
if isinstance(examples, tuple):  # (examples, shards)
  examples, shards = examples
with tfds_testlib.mocked_tfds(spec["tfds_data_dir"], examples, shards):
  for argv in spec["cases"]:
    flags.FLAGS.unparse_flags()
    err = io.StringIO()
    code = 0
    quiet = contextlib.redirect_stdout(io.StringIO())
    with contextlib.redirect_stderr(err), quiet:
      try:
        code = module.main(flags.FLAGS(["prog"] + argv)) or 0
      except SystemExit as e:
        code = e.code
    print(json.dumps({"code": code, "stderr": err.getvalue()}), flush=True)
"""


def run_command_cases(module: str, examples: str, tfds_data_dir,
                      cases: Sequence[Sequence[str]],
                      paths: Sequence[pathlib.Path] = ()) -> List[dict]:
  """Runs `module.main(argv)` per case in one process under `mocked_tfds`,
  with `TFDS_DATA_DIR` naming `tfds_data_dir` (TFDS's own default data
  directory: what a case without `--tfds_data_dir` reads).

  `examples` names the function giving the examples, or (examples, shards)
  ("module:function", importable from tests/ or `paths`). Each command needs its own process:
  commands define absl flags of the same names.
  """
  spec = {"module": module, "examples": examples,
          "tfds_data_dir": str(tfds_data_dir), "cases": [list(c) for c in cases],
          "paths": [str(TESTS)] + [str(p) for p in paths]}
  env = dict(os.environ, TF_CPP_MIN_LOG_LEVEL="2", PYTHONPATH=os.pathsep.join(
      [str(REPO), os.environ.get("PYTHONPATH", "")]),
             TFDS_DATA_DIR=str(tfds_data_dir))
  done = subprocess.run([sys.executable, "-c", _DRIVER, json.dumps(spec)],
                        capture_output=True, text=True, cwd=str(REPO), env=env,
                        timeout=600, check=False)
  assert done.returncode == 0, done.stderr[-3000:]
  results = [json.loads(line) for line in done.stdout.splitlines()
             if line.startswith("{")]
  assert len(results) == len(cases), done.stdout[-3000:]
  return results
