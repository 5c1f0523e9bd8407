"""Encoder-only SavedModel export and the preprocessing SavedModel."""
import pathlib
import re
import subprocess
import sys

import numpy as np
import pytest
import sentencepiece as spm
import tensorflow as tf
import tensorflow_hub as hub
import testlib
import tf_keras

from rembert_tf.common import fileio
from rembert_tf.common import outputs
from rembert_tf.data import tokenizer
from rembert_tf.export import encoder_export
from rembert_tf.export import preprocessor_export
from rembert_tf.checkpoints import checkpoint_layout
from rembert_tf.checkpoints import checkpoint_writing
from rembert_tf.modeling import rembert_config
from rembert_tf.modeling import rembert_pretrainer

REPO = pathlib.Path(__file__).resolve().parents[2]
SEQ_LENGTH = 12

_WORDS = ("the cat sat on a mat while dogs ran far away from home and birds "
          "sang loud songs in green trees near old river banks every day").split()


@pytest.fixture(scope="module")
def sp_model(tmp_path_factory):
  """A tiny unigram model with the fixed rembert_tf special ids."""
  folder = tmp_path_factory.mktemp("spm")
  rng = np.random.default_rng(0)
  sentences = [" ".join(rng.choice(_WORDS, size=8)) for _ in range(300)]
  spm.SentencePieceTrainer.train(
      sentence_iterator=iter(sentences), model_prefix=str(folder / "sp"),
      model_type="unigram", vocab_size=90, pad_id=0, unk_id=1, bos_id=-1,
      eos_id=-1, control_symbols=["[CLS]", "[SEP]", "[MASK]"],
      hard_vocab_limit=False, minloglevel=2)
  path = folder / "sp.model"
  tokenizer.load_sentencepiece(path)  # The fixed ids hold.
  return path


@pytest.fixture(scope="module")
def trained_dir(sp_model, tmp_path_factory):
  """A checkpoint dir like a pre-training model_dir, with random weights."""
  cfg = testlib.tiny_config(vocab_size=96)
  model = rembert_pretrainer.build_pretrainer(cfg)
  rng = np.random.default_rng(1)
  for v in model.variables:
    v.assign((0.2 * rng.standard_normal(v.shape)
              + (1.0 if "gamma" in v.name else 0.0)).astype(np.float32))
  path = tmp_path_factory.mktemp("model") / "model_dir"
  with outputs.atomic_directory(path) as tmp:
    checkpoint_writing.write_checkpoint_dir(tmp, cfg, model.encoder, model)
    tokenizer.copy_sentencepiece(
        sp_model, fileio.join(tmp, checkpoint_layout.SENTENCEPIECE_FILE))
  return cfg, model, path


@pytest.fixture(scope="module")
def cli_run(trained_dir, tmp_path_factory):
  """rembert-export's tools/ script with --export_preprocessor, run once: the
  SavedModels every test here reads."""
  _, _, path = trained_dir
  folder = tmp_path_factory.mktemp("cli")
  result = subprocess.run(
      [sys.executable, str(REPO / "tools" / "export_savedmodel.py"),
       "--checkpoint", str(path), "--output_dir", str(folder / "cli_encoder"),
       "--export_preprocessor", "--seq_length", str(SEQ_LENGTH)],
      capture_output=True, text=True, timeout=300, check=False)
  assert result.returncode == 0, result.stderr[-3000:]
  return folder


@pytest.fixture(scope="module")
def exported(cli_run):
  return cli_run / "cli_encoder"


@pytest.fixture(scope="module")
def preprocessor_dir(cli_run):
  return cli_run / "cli_encoder_preprocessor"


@pytest.fixture(scope="module")
def loaded(exported):
  return tf.saved_model.load(str(exported))


@pytest.fixture(scope="module")
def pre(preprocessor_dir):
  return tf.saved_model.load(str(preprocessor_dir))


@pytest.mark.parametrize("batch_size,seq_length", [(1, 5), (4, 32), (2, 17)])
def test_exported_outputs_equal_in_memory_encoder(trained_dir, loaded,
                                                  batch_size, seq_length):
  cfg, model, _ = trained_dir
  inputs = encoder_export.random_encoder_inputs(cfg, batch_size, seq_length, seed=7)
  expected = model.encoder(inputs, training=False)
  actual = loaded(inputs, training=False)
  assert set(actual) >= {"sequence_output", "pooled_output", "encoder_outputs", "default"}
  assert actual["sequence_output"].shape == (batch_size, seq_length, cfg.hidden_size)
  assert len(actual["encoder_outputs"]) == cfg.num_hidden_layers
  assert encoder_export.max_abs_difference(expected, actual) <= 1e-5
  served = loaded.signatures["serving_default"](**inputs)
  assert served["encoder_outputs"].shape == (cfg.num_hidden_layers, batch_size,
                                             seq_length, cfg.hidden_size)
  np.testing.assert_allclose(served["pooled_output"], expected["pooled_output"],
                             atol=1e-5, rtol=0)
  # The signature computes the real tokens only: zeros at padded positions.
  real = inputs["input_mask"].numpy()[..., None]
  np.testing.assert_allclose(served["encoder_outputs"][-1] * real,
                             expected["sequence_output"] * real, atol=1e-5,
                             rtol=0)
  np.testing.assert_array_equal(served["sequence_output"] * (1 - real), 0)
  assert encoder_export.max_abs_difference(
      expected, dict(served, encoder_outputs=tf.unstack(
          served["encoder_outputs"])), inputs["input_mask"]) <= 1e-5


def test_savedmodel_holds_the_encoder_alone(trained_dir, exported, loaded):
  cfg, model, _ = trained_dir
  encoder_params = model.encoder.count_params()
  sizes = [int(np.prod(v.shape)) for v in loaded.variables]
  assert sum(sizes) == encoder_params
  assert len(loaded.variables) == len(model.encoder.variables)
  output_side_shapes = {tuple(v.shape) for v in model.output_side_variables()}
  assert (cfg.vocab_size, cfg.output_embedding_size) in output_side_shapes
  exported_shapes = {tuple(v.shape) for v in loaded.variables}
  assert (cfg.vocab_size, cfg.output_embedding_size) not in exported_shapes
  assert (cfg.vocab_size,) not in exported_shapes  # the MLM output bias
  for v in loaded.variables:
    assert "predictions" not in v.name and "output_embedding" not in v.name
  # On disk: float32 #FT parameters plus a small overhead, not #PT.
  data = sum(f.stat().st_size for f in (exported / "variables").glob("variables.data-*"))
  assert 4 * encoder_params <= data < 4 * encoder_params + 64 * 1024
  # Every tensor in the SavedModel's variables checkpoint: #FT numbers in all.
  stored = [shape for name, shape in tf.train.list_variables(
      str(exported / "variables" / "variables"))
            if name != "_CHECKPOINTABLE_OBJECT_GRAPH"]
  assert sum(int(np.prod(shape)) for shape in stored) == encoder_params
  assert (exported / "assets" / "sentencepiece.model").exists()


def test_trainable_hub_keras_layer(trained_dir, exported):
  cfg, model, _ = trained_dir
  layer = hub.KerasLayer(str(exported), trainable=True)
  inputs = {name: tf_keras.Input(shape=(None,), dtype=tf.int32, name=name)
            for name in encoder_export.INPUT_NAMES}
  pooled = layer(inputs)["pooled_output"]
  classifier = tf_keras.Model(inputs, tf_keras.layers.Dense(2)(pooled))
  assert len(layer.trainable_variables) == len(model.encoder.trainable_variables)
  batch = encoder_export.random_encoder_inputs(cfg, 2, 9, seed=3)
  with tf.GradientTape() as tape:
    loss = tf.reduce_sum(classifier(batch, training=True) ** 2)
  grads = tape.gradient(loss, layer.trainable_variables)
  assert all(g is not None for g in grads)
  before = layer.trainable_variables[0].numpy().copy()
  tf_keras.optimizers.SGD(0.1).apply_gradients(zip(grads, layer.trainable_variables))
  assert not np.array_equal(before, layer.trainable_variables[0].numpy())


def test_export_from_full_model_garden_checkpoint(trained_dir, tmp_path):
  """A pre-training model_dir without encoder/: read model/encoder_network of ckpt-N."""
  cfg, model, path = trained_dir
  model_dir = tmp_path / "mg_model_dir"
  model_dir.mkdir()
  rembert_config.save_model_config(cfg, model_dir / checkpoint_layout.MODEL_CONFIG_FILE)
  tf.train.CheckpointManager(
      tf.train.Checkpoint(model=model, global_step=tf.Variable(7, dtype=tf.int64)),
      str(model_dir), max_to_keep=1).save(checkpoint_number=7)
  out = tmp_path / "export"
  encoder_export.export_encoder(model_dir, out)
  loaded = tf.saved_model.load(str(out))
  inputs = encoder_export.random_encoder_inputs(cfg, 2, 6)
  assert encoder_export.max_abs_difference(
      model.encoder(inputs, training=False), loaded(inputs, training=False)) <= 1e-5


def test_failed_export_leaves_nothing(tmp_path, trained_dir):
  _, _, path = trained_dir
  empty = tmp_path / "empty"
  empty.mkdir()
  rembert_config.save_model_config(trained_dir[0], empty / "model_config.yaml")
  with pytest.raises(checkpoint_layout.CheckpointError, match=r"no\s+checkpoint found"):
    encoder_export.export_encoder(empty, tmp_path / "out")
  assert not (tmp_path / "out").exists()
  assert not list(tmp_path.glob(".out*"))
  (tmp_path / "taken").mkdir()
  with pytest.raises(FileExistsError):
    encoder_export.export_encoder(path, tmp_path / "taken")


def python_pack(processor, first, second=None, seq_length=SEQ_LENGTH):
  """BERT packing in plain Python: [CLS] a [SEP] (b [SEP]), round-robin trim."""
  a = processor.encode(first)
  b = processor.encode(second) if second is not None else None
  budget = seq_length - (3 if b is not None else 2)
  if b is None:
    a = a[:budget]
  else:
    while len(a) + len(b) > budget:  # drop from the longer, a first on ties
      if len(a) > len(b):
        a = a[:-1]
      else:
        b = b[:-1]
  ids = [tokenizer.CLS_ID] + a + [tokenizer.SEP_ID]
  types = [0] * len(ids)
  if b is not None:
    ids += b + [tokenizer.SEP_ID]
    types += [1] * (len(b) + 1)
  pad = seq_length - len(ids)
  return (ids + [tokenizer.PAD_ID] * pad, [1] * len(ids) + [0] * pad,
          types + [0] * pad)


def test_preprocessor_single_sentences(sp_model, pre):
  processor = tokenizer.load_sentencepiece(sp_model)
  texts = ["the cat sat", "dogs ran far away from home and birds sang loud songs", ""]
  packed = pre(tf.constant(texts))
  for i, text in enumerate(texts):
    ids, mask, types = python_pack(processor, text)
    assert packed["input_word_ids"][i].numpy().tolist() == ids, text
    assert packed["input_mask"][i].numpy().tolist() == mask
    assert packed["input_type_ids"][i].numpy().tolist() == types
  assert packed["input_word_ids"].dtype == tf.int32
  special = pre.tokenize.get_special_tokens_dict()
  assert int(special["start_of_sequence_id"]) == tokenizer.CLS_ID
  assert int(special["padding_id"]) == tokenizer.PAD_ID


def test_preprocessor_pairs_with_truncation(sp_model, pre):
  processor = tokenizer.load_sentencepiece(sp_model)
  firsts = ["the cat sat on a mat", "birds sang", "old river banks every day near home"]
  seconds = ["dogs ran", "green trees near old river banks every day", "a"]
  for seq_length in (SEQ_LENGTH, 24):
    packed = pre.bert_pack_inputs(
        [pre.tokenize(tf.constant(firsts)), pre.tokenize(tf.constant(seconds))],
        seq_length=tf.constant(seq_length))
    for i, (a, b) in enumerate(zip(firsts, seconds)):
      ids, mask, types = python_pack(processor, a, b, seq_length)
      assert packed["input_word_ids"][i].numpy().tolist() == ids, (a, b)
      assert packed["input_mask"][i].numpy().tolist() == mask
      assert packed["input_type_ids"][i].numpy().tolist() == types


def test_text_to_embeddings_with_two_savedmodels(trained_dir, loaded, pre,
                                                 sp_model):
  cfg, model, _ = trained_dir
  encoder = loaded
  texts = ["the cat sat on a mat", "birds sang loud songs"]
  embeddings = encoder(pre(tf.constant(texts)))["pooled_output"]
  processor = tokenizer.load_sentencepiece(sp_model)
  packed = [python_pack(processor, t) for t in texts]
  inputs = {name: tf.constant([p[j] for p in packed], tf.int32)
            for j, name in enumerate(encoder_export.INPUT_NAMES)}
  np.testing.assert_allclose(embeddings, model.encoder(inputs, training=False)[
      "pooled_output"], atol=1e-5, rtol=0)
  assert embeddings.shape == (2, cfg.hidden_size)


def files_of(folder: pathlib.Path):
  return sorted(str(p.relative_to(folder)) for p in folder.rglob("*")
                if p.is_file())


# What a (tf_keras) SavedModel holds; the encoder adds its documented
# model_config.yaml and the SentencePiece model as its `sp_model_file` asset.
SAVEDMODEL_FILES = ["fingerprint.pb", "keras_metadata.pb", "saved_model.pb",
                    "variables/variables.data-00000-of-00001",
                    "variables/variables.index"]
ENCODER_FILES = sorted(SAVEDMODEL_FILES + [
    "assets/sentencepiece.model", "model_config.yaml"])


def test_export_tool_cli(cli_run):
  # Each SavedModel holds what its format defines; the log is beside them.
  assert files_of(cli_run / "cli_encoder") == ENCODER_FILES
  assert files_of(cli_run / "cli_encoder_preprocessor") == SAVEDMODEL_FILES
  assert sorted(p.name for p in cli_run.iterdir()) == [
      "cli_encoder", "cli_encoder.logs", "cli_encoder_preprocessor"]
  (log,) = (cli_run / "cli_encoder.logs").glob("rembert-export-*.log")
  assert "(exit code 0)" in log.read_text()


def test_preprocessor_serving_signature_feeds_the_encoders_by_name(
    trained_dir, loaded, pre, preprocessor_dir):
  """TF Serving's view: one signature's outputs are the other's inputs."""
  encoder = loaded
  packed = pre.signatures["serving_default"](
      sentences=tf.constant(["the cat sat", "birds sang loud songs"]))
  assert sorted(packed) == sorted(encoder_export.INPUT_NAMES)
  served = encoder.signatures["serving_default"](**packed)
  assert served["pooled_output"].shape == (2, trained_dir[0].hidden_size)
  np.testing.assert_allclose(served["pooled_output"],
                             encoder(pre(tf.constant(
                                 ["the cat sat", "birds sang loud songs"])))[
                                     "pooled_output"], atol=1e-5, rtol=0)
  shown = subprocess.run(
      [str(pathlib.Path(sys.executable).parent / "saved_model_cli"), "show",
       "--dir", str(preprocessor_dir), "--all"],
      capture_output=True, text=True, timeout=120, check=False)
  assert shown.returncode == 0, shown.stderr[-2000:]
  serving = shown.stdout.split("signature_def['serving_default']:")[1].split(
      "signature_def[")[0]
  inputs, outputs = serving.split("The given SavedModel SignatureDef "
                                  "contains the following output(s):")
  assert "inputs['sentences']" in inputs
  assert sorted(re.findall(r"outputs\['(\w+)'\]", outputs)) == sorted(
      encoder_export.INPUT_NAMES)


def test_special_ids_of_a_foreign_sentencepiece_model(tmp_path):
  """Another layout ([PAD], [CLS], [SEP] at other ids) is looked up by piece."""
  rng = np.random.default_rng(2)
  sentences = [" ".join(rng.choice(_WORDS, size=6)) for _ in range(200)]
  spm.SentencePieceTrainer.train(
      sentence_iterator=iter(sentences), model_prefix=str(tmp_path / "foreign"),
      vocab_size=70, unk_id=0, unk_piece="[UNK]", bos_id=-1, eos_id=-1,
      pad_id=-1, control_symbols=["[MASK]", "[PAD]", "[SEP]", "[CLS]"],
      hard_vocab_limit=False, minloglevel=2)
  pre = preprocessor_export.create_preprocessor(tmp_path / "foreign.model", 8)
  special = pre.tokenize.get_special_tokens_dict.__call__()
  assert int(special["mask_id"]) == 1 and int(special["padding_id"]) == 2
  assert int(special["end_of_segment_id"]) == 3
  assert int(special["start_of_sequence_id"]) == 4
  packed = pre(tf.constant(["the cat"]))
  row = packed["input_word_ids"][0].numpy().tolist()
  assert row[0] == 4 and 3 in row and row[-1] == 2


def test_export_refuses_a_sentencepiece_model_other_than_the_checkpoints(
    trained_dir, tmp_path):
  """Identity by content: --sentencepiece_model must be the checkpoint's own model."""
  _, _, path = trained_dir
  other = tmp_path / "other.model"
  other.write_bytes(b"another model")
  out = tmp_path / "encoder"
  result = subprocess.run(
      [sys.executable, str(REPO / "tools" / "export_savedmodel.py"),
       "--checkpoint", str(path), "--output_dir", str(out),
       "--export_preprocessor", "--sentencepiece_model", str(other)],
      capture_output=True, text=True, timeout=180, check=False)
  assert result.returncode == 1 and "Traceback" not in result.stderr
  lines = [l for l in result.stderr.splitlines() if ": error: " in l]
  assert len(lines) == 1, result.stderr
  for part in (f"--sentencepiece_model {other}", fileio.sha256(str(other)),
               fileio.sha256(str(path / "sentencepiece.model"))):
    assert part in lines[0], (part, lines[0])
  assert not out.exists()
  assert not (tmp_path / "encoder_preprocessor").exists()
