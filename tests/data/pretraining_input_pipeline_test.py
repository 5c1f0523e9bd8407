"""The input pipeline: static shapes, InputContext sharding, metadata checks."""
import numpy as np
import pytest
import tensorflow as tf
from official.nlp.data import data_loader_factory

from rembert_tf.common import fileio
from rembert_tf.data import example_encoding
from rembert_tf.data import pretraining_input_pipeline
from rembert_tf.data import pretraining_record_creation
from rembert_tf.data import tfrecord_writer
from rembert_tf.data import tokenizer
from rembert_tf.modeling import rembert_config

SEQ, PRED, VOCAB = 24, 5, 2000


def _sequences(n, offset=0):
  rng = np.random.default_rng(offset)
  # Example i starts with token 1000 + i (identifies it after shuffling).
  return [[1000 + offset + i] + list(rng.integers(5, 900, rng.integers(4, SEQ - 3)))
          for i in range(n)]


def _masked_example(content):
  """An already-masked record; position 1 (the example's id) is never masked."""
  ids = [tokenizer.CLS_ID] + content + [tokenizer.SEP_ID]
  labels = [ids[2], ids[4]]
  ids[2] = ids[4] = tokenizer.MASK_ID
  pad, unused = SEQ - len(ids), PRED - 2
  return example_encoding.encode_example(
      int_features=dict(input_word_ids=ids + [tokenizer.PAD_ID] * pad,
                        input_mask=[1] * len(ids) + [0] * pad,
                        input_type_ids=[0] * SEQ,
                        masked_lm_positions=[2, 4] + [0] * unused,
                        masked_lm_ids=labels + [0] * unused),
      float_features=dict(masked_lm_weights=[1.0, 1.0] + [0.0] * unused))


@pytest.fixture(scope="module")
def static_dir(tmp_path_factory):
  """Records masked at positions 2 and 4: the fixture writer's metadata and
  shards, each shard's records made again here."""
  out = tmp_path_factory.mktemp("static")
  pretraining_record_creation.write_pretraining_records(
      out, _sequences(64), seq_length=SEQ, max_predictions_per_seq=PRED,
      vocab_size=VOCAB, num_shards=4)
  for k, shard in enumerate(sorted(out.glob("*.tfrecord"))):
    tfrecord_writer.write_tfrecord_file(
        shard, [_masked_example(c) for c in _sequences(64)[k::4]])
  return out


def test_fixture_writer_masks_token_lists(tmp_path):
  meta = pretraining_record_creation.write_pretraining_records(
      tmp_path, _sequences(10), seq_length=SEQ, max_predictions_per_seq=PRED,
      vocab_size=VOCAB, num_shards=2)
  assert meta["num_examples"] == 10 and meta["layout"] == "static"
  dataset = pretraining_input_pipeline.RemBertPretrainDataLoader(
      _params(tmp_path, is_training=False, global_batch_size=10)).load()
  batch = next(iter(dataset))
  weights = batch["masked_lm_weights"].numpy()
  assert (weights.sum(1) >= 1).all()
  with pytest.raises(FileExistsError):
    pretraining_record_creation.write_pretraining_records(
        tmp_path, _sequences(2), seq_length=SEQ, max_predictions_per_seq=PRED,
        vocab_size=VOCAB)


@pytest.fixture(scope="module")
def unmasked_dir(tmp_path_factory):
  out = tmp_path_factory.mktemp("unmasked")
  pretraining_record_creation.write_pretraining_records(
      out, _sequences(64), seq_length=SEQ, max_predictions_per_seq=PRED,
      vocab_size=VOCAB, num_shards=2, layout="unmasked")
  return out


def _params(directory, **kwargs):
  values = dict(input_path=str(directory / "*.tfrecord"), global_batch_size=8,
                seq_length=SEQ, max_predictions_per_seq=PRED, is_training=True)
  values.update(kwargs)
  return pretraining_input_pipeline.RemBertPretrainDataConfig(**values)


EXPECTED = {"input_word_ids": (tf.int32, SEQ), "input_mask": (tf.int32, SEQ),
            "input_type_ids": (tf.int32, SEQ),
            "masked_lm_positions": (tf.int32, PRED),
            "masked_lm_ids": (tf.int32, PRED),
            "masked_lm_weights": (tf.float32, PRED)}


def _check_spec(dataset, batch):
  spec = dataset.element_spec
  assert set(spec) == set(EXPECTED)
  for name, (dtype, width) in EXPECTED.items():
    assert spec[name].dtype == dtype, name
    assert spec[name].shape.as_list() == [batch, width], name


def test_static_shapes_and_values(static_dir):
  dataset = data_loader_factory.get_data_loader(_params(static_dir)).load()
  _check_spec(dataset, 8)
  batches = list(dataset.take(20))  # Repeats forever when training.
  assert len(batches) == 20
  batch = batches[0]
  ids = batch["input_word_ids"].numpy()
  assert (ids[:, 0] == tokenizer.CLS_ID).all()
  np.testing.assert_array_equal(batch["masked_lm_positions"].numpy()[:, :3],
                                np.tile([2, 4, 0], (8, 1)))
  np.testing.assert_array_equal(batch["masked_lm_weights"].numpy()[:, :3],
                                np.tile([1, 1, 0], (8, 1)))
  assert (ids[:, 2] == tokenizer.MASK_ID).all()


def test_eval_reads_each_example_once_and_drops_remainder(static_dir):
  params = _params(static_dir, is_training=False, global_batch_size=10)
  dataset = pretraining_input_pipeline.RemBertPretrainDataLoader(params).load()
  _check_spec(dataset, 10)
  firsts = np.concatenate([b["input_word_ids"][:, 1].numpy() for b in dataset])
  assert len(firsts) == 60  # 64 examples, remainder of 4 dropped.
  assert len(set(firsts.tolist())) == 60


def test_input_context_shards_files(static_dir):
  seen = []
  for pipeline_id in range(2):
    context = tf.distribute.InputContext(num_input_pipelines=2,
                                         input_pipeline_id=pipeline_id,
                                         num_replicas_in_sync=2)
    params = _params(static_dir, is_training=False, global_batch_size=8)
    dataset = pretraining_input_pipeline.RemBertPretrainDataLoader(params).load(context)
    _check_spec(dataset, 4)  # Per-replica batch.
    seen.append({int(x) for b in dataset for x in b["input_word_ids"][:, 1]})
  assert seen[0] and seen[1] and not seen[0] & seen[1]
  assert len(seen[0] | seen[1]) == 64
  # Training (shuffled, repeated): hosts shuffle the file list alike, so
  # their file shards stay disjoint even without a configured seed.
  train_seen = []
  for pipeline_id in range(2):
    context = tf.distribute.InputContext(num_input_pipelines=2,
                                         input_pipeline_id=pipeline_id,
                                         num_replicas_in_sync=2)
    dataset = pretraining_input_pipeline.RemBertPretrainDataLoader(_params(
        static_dir, shuffle_buffer_size=1, cycle_length=1)).load(context)
    # One epoch of this host's 2 files (16 examples each) = 8 batches of 4.
    train_seen.append({int(x) for b in dataset.take(8)
                       for x in b["input_word_ids"][:, 1]})
  assert not train_seen[0] & train_seen[1]
  assert len(train_seen[0] | train_seen[1]) == 64


def test_distributed_dataset_on_two_devices(static_dir, two_cpu_strategy):
  loader = pretraining_input_pipeline.RemBertPretrainDataLoader(_params(static_dir))
  dataset = two_cpu_strategy.distribute_datasets_from_function(loader.load)
  batch = next(iter(dataset))
  local = two_cpu_strategy.experimental_local_results(batch["input_word_ids"])
  assert [t.shape.as_list() for t in local] == [[4, SEQ], [4, SEQ]]


def test_dynamic_masking(unmasked_dir):
  params = _params(unmasked_dir, use_dynamic_masking=True, global_batch_size=16,
                   masked_lm_prob=0.2)
  dataset = pretraining_input_pipeline.RemBertPretrainDataLoader(params).load()
  _check_spec(dataset, 16)
  original = {}
  for b in tf.data.TFRecordDataset(sorted(
      str(p) for p in unmasked_dir.glob("*.tfrecord"))):
    ids = tf.train.Example.FromString(b.numpy()).features.feature[
        "input_word_ids"].int64_list.value
    original[ids[1]] = np.array(ids)
  batch = next(iter(dataset))
  ids = batch["input_word_ids"].numpy()
  positions = batch["masked_lm_positions"].numpy()
  labels = batch["masked_lm_ids"].numpy()
  weights = batch["masked_lm_weights"].numpy()
  assert weights.sum() > 0
  for row in range(16):
    real = weights[row] > 0
    assert real.sum() <= PRED
    assert not np.isin(positions[row][real], [0]).any()  # Never [CLS].
    # Labels are the original tokens (looked up by the unmasked record).
    source = [o for o in original.values()
              if (np.delete(o, positions[row][real]) ==
                  np.delete(ids[row], positions[row][real])).all()]
    assert source, row
    np.testing.assert_array_equal(source[0][positions[row][real]],
                                  labels[row][real])
  assert (ids == tokenizer.MASK_ID).sum() > 0


def test_mismatched_records_are_refused(static_dir, unmasked_dir):
  tiny = rembert_config.load_model_config("tiny")

  def load(model_config):
    return pretraining_input_pipeline.RemBertPretrainDataLoader(
        _params(static_dir), model_config=model_config).load()

  _check_spec(load(tiny.replace(vocab_size=VOCAB)), 8)
  with pytest.raises(pretraining_input_pipeline.DataMismatchError,
                     match=r"metadata.json: field `vocab_size` is 2000 but "
                     r"model config vocab_size is 3000"):
    load(tiny.replace(vocab_size=3000))
  with pytest.raises(pretraining_input_pipeline.DataMismatchError,
                     match="max_position_embeddings"):
    load(tiny.replace(vocab_size=VOCAB, max_position_embeddings=16))
  cases = [(dict(seq_length=32), "`seq_length` is 24"),
           (dict(max_predictions_per_seq=7), "`max_predictions_per_seq` is 5"),
           (dict(use_dynamic_masking=True), "--unmasked"),
           (dict(vocab_size=100), "`vocab_size` is 2000")]
  for overrides, message in cases:
    with pytest.raises(pretraining_input_pipeline.DataMismatchError, match=message):
      pretraining_input_pipeline.RemBertPretrainDataLoader(
          _params(static_dir, **overrides)).load()
  with pytest.raises(pretraining_input_pipeline.DataMismatchError,
                     match=r"field `layout` is 'unmasked' but the layout the "
                     r"data config \(use_dynamic_masking=False\) reads is "
                     r"'static'. Fix: set use_dynamic_masking=True"):
    pretraining_input_pipeline.RemBertPretrainDataLoader(_params(unmasked_dir)).load()


def test_missing_records_or_metadata(tmp_path, static_dir):
  with pytest.raises(pretraining_input_pipeline.DataMismatchError,
                     match="matches no files"):
    pretraining_input_pipeline.RemBertPretrainDataLoader(_params(tmp_path)).load()
  (tmp_path / "x.tfrecord").write_bytes(
      (static_dir / "pretrain-00000-of-00004.tfrecord").read_bytes())
  with pytest.raises(pretraining_input_pipeline.DataMismatchError,
                     match="metadata.json does not exist"):
    pretraining_input_pipeline.RemBertPretrainDataLoader(_params(tmp_path)).load()
  dataset = pretraining_input_pipeline.RemBertPretrainDataLoader(
      _params(tmp_path, check_metadata=False)).load()
  _check_spec(dataset, 8)


def test_records_on_ram_are_checked_by_the_loader_that_reads_them(static_dir,
                                                                   tmp_path):
  """A model of another vocabulary, a shard of another shape and a truncated
  shard, on a filesystem that is not local; the errors name the field."""
  root = "ram://pipeline_checks/records"
  for path in sorted(static_dir.iterdir()):
    fileio.copy(str(path), f"{root}/{path.name}")
  params = pretraining_input_pipeline.RemBertPretrainDataConfig(
      input_path=f"{root}/*.tfrecord", global_batch_size=8, seq_length=SEQ,
      max_predictions_per_seq=PRED)
  tiny = rembert_config.load_model_config("tiny")

  def load(model_config=tiny.replace(vocab_size=VOCAB)):
    return pretraining_input_pipeline.RemBertPretrainDataLoader(
        params, model_config=model_config, field="task.train_data").load()

  assert next(iter(load()))["input_word_ids"].shape == (8, SEQ)
  with pytest.raises(pretraining_input_pipeline.DataMismatchError,
                     match=f"{root}/metadata.json: field `vocab_size` is 2000 "
                     "but model config vocab_size is 3000"):
    load(tiny.replace(vocab_size=3000))
  other = tmp_path / "other"
  pretraining_record_creation.write_pretraining_records(
      other, [[7, 8, 9, 10]] * 4, seq_length=16, max_predictions_per_seq=PRED,
      vocab_size=VOCAB, num_shards=1)
  shard = f"{root}/pretrain-00001-of-00004.tfrecord"
  fileio.copy(str(next(other.glob("*.tfrecord"))), shard)
  with pytest.raises(pretraining_input_pipeline.DataMismatchError) as e:
    load()
  assert str(e.value) == (
      f"task.train_data.input_path: record shard {shard} holds records whose "
      f"input_word_ids has 16 values; the experiment reads {SEQ} "
      "(seq_length). Move it out of the records' folder, or make every shard "
      "with the same --seq_length and --max_predictions_per_seq.")
  data = fileio.read_bytes(f"{static_dir}/pretrain-00001-of-00004.tfrecord")
  fileio.write_bytes(shard, data[:-5])  # the first record intact, the end cut
  assert pretraining_input_pipeline.shard_of_other_shape(params) is None
  assert pretraining_input_pipeline.unreadable_shard(params).startswith(
      f"{shard} (")
  with pytest.raises(pretraining_input_pipeline.DataMismatchError,
                     match=r"task.train_data.input_path 'ram://pipeline_checks/"
                     r"none/\*.tfrecord' matches no files"):
    pretraining_input_pipeline.RemBertPretrainDataLoader(
        params.replace(input_path="ram://pipeline_checks/none/*.tfrecord"),
        field="task.train_data").load()
