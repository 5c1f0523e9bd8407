"""Checkpoint conversion: round trips, TF1 import, mismatch errors, and fidelity.

The fidelity test checks the rembert_tf encoder against an independent numpy
implementation of the released RemBERT forward pass (the Hugging Face /
TF1 architecture), run on the Hugging Face-layout weights the converter
writes: embeddings sum, LayerNorm(eps), E_in -> hidden projection, post-LN
blocks with exact (erf) GELU, tanh pooler.
"""
import json
import math
import pathlib
import re
import subprocess
import sys

import numpy as np
import pytest
import tensorflow as tf
from safetensors.numpy import load_file, save_file

from rembert_tf.common import fileio
from rembert_tf.common import outputs
from rembert_tf.conversion import converter
from rembert_tf.conversion import tensor_sources
from rembert_tf.conversion import weight_layout
from rembert_tf.checkpoints import checkpoint_layout
from rembert_tf.checkpoints import checkpoint_writing
from rembert_tf.checkpoints import checkpoint_restore
from rembert_tf.checkpoints import pretrainer_restore
from rembert_tf.checkpoints import checkpoint_reading
from rembert_tf.modeling import rembert_config
from rembert_tf.modeling import rembert_encoder
from rembert_tf.modeling import rembert_pretrainer

import conversion_testlib
from conversion_testlib import randomize, small_config, tf1_json_config, write_tf1_checkpoint

REPO = pathlib.Path(__file__).resolve().parents[2]
def write_dir(path, cfg, model, encoder):
  with outputs.atomic_directory(str(path)) as tmp:
    checkpoint_writing.write_checkpoint_dir(tmp, cfg, encoder, model)
  return path


def encoder_inputs(cfg, batch=3, seq=9, seed=1):
  rng = np.random.default_rng(seed)
  ids = rng.integers(0, cfg.vocab_size, [batch, seq])
  lengths = np.array([seq] + list(rng.integers(2, seq + 1, [batch - 1])))
  mask = (np.arange(seq)[None] < lengths[:, None]).astype(np.int32)
  types = ((np.arange(seq)[None] >= 3) * mask).astype(np.int32)
  return dict(input_word_ids=(ids * mask).astype(np.int32), input_mask=mask,
              input_type_ids=types)


# === independent numpy reference of the released RemBERT forward pass ===
_erf = np.vectorize(math.erf)


def _layer_norm(x, weights, name, eps):
  mean = x.mean(-1, keepdims=True)
  var = ((x - mean) ** 2).mean(-1, keepdims=True)
  return (x - mean) / np.sqrt(var + eps) * weights[name + ".weight"] + weights[name + ".bias"]


def _linear(x, weights, name):  # torch Linear: weight [out, in]
  return x @ weights[name + ".weight"].T + weights[name + ".bias"]


def reference_forward(w, cfg, inputs):
  """RemBERT (HF/TF1 architecture) in float64 numpy from HF-named weights."""
  w = {k: v.astype(np.float64) for k, v in w.items()}
  ids, mask, types = (inputs["input_word_ids"], inputs["input_mask"],
                      inputs["input_type_ids"])
  batch, seq = ids.shape
  eps = cfg.layer_norm_eps
  p = "rembert."
  x = (w[p + "embeddings.word_embeddings.weight"][ids]
       + w[p + "embeddings.position_embeddings.weight"][:seq][None]
       + w[p + "embeddings.token_type_embeddings.weight"][types])
  x = _layer_norm(x, w, p + "embeddings.LayerNorm", eps)
  x = _linear(x, w, p + "encoder.embedding_hidden_mapping_in")
  heads = cfg.num_attention_heads
  head_dim = cfg.hidden_size // heads
  additive_mask = (1.0 - mask[:, None, None, :]) * -1e9
  layers = []
  for i in range(cfg.num_hidden_layers):
    q = f"{p}encoder.layer.{i}."

    def split(t):
      return t.reshape(batch, seq, heads, head_dim).transpose(0, 2, 1, 3)

    query = split(_linear(x, w, q + "attention.self.query"))
    key = split(_linear(x, w, q + "attention.self.key"))
    value = split(_linear(x, w, q + "attention.self.value"))
    scores = query @ key.transpose(0, 1, 3, 2) / math.sqrt(head_dim) + additive_mask
    scores = np.exp(scores - scores.max(-1, keepdims=True))
    probs = scores / scores.sum(-1, keepdims=True)
    context = (probs @ value).transpose(0, 2, 1, 3).reshape(batch, seq, -1)
    attention = _layer_norm(_linear(context, w, q + "attention.output.dense") + x,
                            w, q + "attention.output.LayerNorm", eps)
    inner = _linear(attention, w, q + "intermediate.dense")
    inner = 0.5 * inner * (1.0 + _erf(inner / math.sqrt(2.0)))  # exact GELU
    x = _layer_norm(_linear(inner, w, q + "output.dense") + attention,
                    w, q + "output.LayerNorm", eps)
    layers.append(x)
  pooled = np.tanh(_linear(x[:, 0], w, p + "pooler.dense"))
  return dict(sequence_output=x, pooled_output=pooled, encoder_outputs=layers)


def assert_outputs_close(expected, actual, atol=1e-5):
  for key in ("sequence_output", "pooled_output"):
    np.testing.assert_allclose(np.asarray(actual[key]), expected[key], atol=atol,
                               rtol=0, err_msg=key)
  assert len(actual["encoder_outputs"]) == len(expected["encoder_outputs"])
  for e, a in zip(expected["encoder_outputs"], actual["encoder_outputs"]):
    np.testing.assert_allclose(np.asarray(a), e, atol=atol, rtol=0)


def slot_values(model_or_encoder, with_output_side):
  if with_output_side:
    slots = weight_layout.slots_for_pretrainer(model_or_encoder)
  else:
    slots = weight_layout.slots_for_encoder(model_or_encoder)
  return {s.name: s.read() for s in slots}


@pytest.fixture(scope="module")
def source_dir(tmp_path_factory):
  """A decoupled pretrainer with random weights, as a rembert_tf checkpoint dir."""
  cfg = small_config()
  model = rembert_pretrainer.build_pretrainer(cfg)
  randomize(model.variables, seed=0)
  path = write_dir(tmp_path_factory.mktemp("conv") / "rembert_tf", cfg, model,
                   model.encoder)
  return cfg, model, path


@pytest.fixture(scope="module")
def hf_dir(source_dir, tmp_path_factory):
  _, _, path = source_dir
  out = tmp_path_factory.mktemp("hf") / "hf"
  converter.convert_checkpoint("rembert_tf", "hf", path, out)
  return out


def test_hf_layout_names_config_and_transposes(source_dir, hf_dir):
  cfg, model, _ = source_dir
  tensors = load_file(str(hf_dir / "model.safetensors"))
  h, e_in, e_out = cfg.hidden_size, cfg.input_embedding_size, cfg.output_embedding_size
  expected_shapes = {
      "rembert.embeddings.word_embeddings.weight": (cfg.vocab_size, e_in),
      "rembert.embeddings.position_embeddings.weight": (cfg.max_position_embeddings, e_in),
      "rembert.embeddings.token_type_embeddings.weight": (2, e_in),
      "rembert.embeddings.LayerNorm.weight": (e_in,),
      "rembert.encoder.embedding_hidden_mapping_in.weight": (h, e_in),
      "rembert.encoder.layer.1.attention.self.query.weight": (h, h),
      "rembert.encoder.layer.1.attention.output.dense.weight": (h, h),
      "rembert.encoder.layer.1.attention.output.LayerNorm.bias": (h,),
      "rembert.encoder.layer.0.intermediate.dense.weight": (cfg.intermediate_size, h),
      "rembert.encoder.layer.0.output.dense.weight": (h, cfg.intermediate_size),
      "rembert.encoder.layer.0.output.LayerNorm.weight": (h,),
      "rembert.pooler.dense.weight": (h, h),
      "cls.predictions.dense.weight": (e_out, h),
      "cls.predictions.LayerNorm.weight": (e_out,),
      "cls.predictions.decoder.weight": (cfg.vocab_size, e_out),
      "cls.predictions.decoder.bias": (cfg.vocab_size,),
  }
  for name, shape in expected_shapes.items():
    assert tensors[name].shape == shape, name
  # 5 embedding + 2 projection + 16 per layer + 2 pooler + 6 head tensors.
  assert len(tensors) == 5 + 2 + 16 * cfg.num_hidden_layers + 2 + 6
  # torch Linear weights are [out, in]: the HF query weight is the transposed,
  # per-head-flattened Keras kernel.
  kernel = model.encoder.transformer_layers[1]._attention_layer._query_dense.kernel
  np.testing.assert_array_equal(
      tensors["rembert.encoder.layer.1.attention.self.query.weight"],
      kernel.numpy().reshape(h, h).T)
  np.testing.assert_array_equal(tensors["cls.predictions.decoder.weight"],
                                model.masked_lm.output_embedding.numpy())
  config = json.loads((hf_dir / "config.json").read_text())
  assert config["model_type"] == "rembert"
  assert config["input_embedding_size"] == e_in
  assert config["output_embedding_size"] == e_out
  assert config["hidden_act"] == "gelu"


def test_rembert_tf_hf_rembert_tf_round_trip_is_bit_identical(
    source_dir, hf_dir, tmp_path):
  cfg, model, _ = source_dir
  back = tmp_path / "back"
  converter.convert_checkpoint("hf", "rembert_tf", hf_dir, back)
  assert (back / "pretrainer").is_dir() and (back / "encoder").is_dir()
  loaded_cfg, loaded_pretrainer = pretrainer_restore.load_pretrainer(back)
  assert loaded_cfg.as_dict() == cfg.as_dict()
  before = slot_values(model, True)
  after = slot_values(loaded_pretrainer, True)
  assert sorted(before) == sorted(after)
  for name in before:
    np.testing.assert_array_equal(before[name], after[name], err_msg=name)
    assert before[name].dtype == after[name].dtype == np.float32
  # The encoder-only checkpoint of the result matches too (what fine-tuning reads).
  _, encoder = checkpoint_restore.load_encoder(back)
  for a, b in zip(model.encoder.variables, encoder.variables):
    np.testing.assert_array_equal(a.numpy(), b.numpy())


def test_encoder_matches_numpy_reference_of_released_architecture(
    source_dir, hf_dir, tmp_path):
  cfg, model, _ = source_dir
  weights = load_file(str(hf_dir / "model.safetensors"))
  inputs = encoder_inputs(cfg)
  expected = reference_forward(weights, cfg, inputs)
  assert_outputs_close(expected, model.encoder(inputs, training=False))
  # And after converting HF -> rembert_tf: the converted encoder computes the
  # released architecture's outputs from the HF weights.
  back = tmp_path / "from_hf"
  converter.convert_checkpoint("hf", "rembert_tf", hf_dir, back, encoder_only=True)
  assert not (back / "pretrainer").exists()
  _, encoder = checkpoint_restore.load_encoder(back)
  assert_outputs_close(expected, encoder(inputs, training=False))


def test_reference_detects_approximate_gelu(source_dir, hf_dir):
  """The fidelity check can fail: a tanh-GELU encoder is off by more than 1e-5."""
  cfg, model, _ = source_dir
  approx = rembert_encoder.build_encoder(
      rembert_config.model_config_from_dict(
          dict(cfg.as_dict(), hidden_act="gelu_approx")))
  for a, b in zip(approx.variables, model.encoder.variables):
    a.assign(b)
  weights = load_file(str(hf_dir / "model.safetensors"))
  inputs = encoder_inputs(cfg)
  expected = reference_forward(weights, cfg, inputs)
  with pytest.raises(AssertionError):
    assert_outputs_close(expected, approx(inputs, training=False))


def hf_names_from_tf1(tensors):
  """TF1 BERT names -> HF names, written independently of the converter."""
  out = {}
  for name, value in tensors.items():
    key = re.sub(r"layer_(\d+)", r"layer.\1", name.replace("bert/", "rembert/", 1))
    key = key.replace("/", ".")
    if key.endswith(".kernel"):
      key, value = key[:-len(".kernel")] + ".weight", value.T
    elif key.endswith(".gamma"):
      key = key[:-len(".gamma")] + ".weight"
    elif key.endswith(".beta"):
      key = key[:-len(".beta")] + ".bias"
    elif key.endswith("_embeddings"):
      key += ".weight"
    out[key] = value
  return out


@pytest.fixture(scope="module")
def tf1_checkpoint(tmp_path_factory):
  # layer_norm_eps far from the default, so the reference check sees it is used.
  cfg = small_config(hidden_dropout_prob=0.0, attention_probs_dropout_prob=0.0,
                     layer_norm_eps=1e-3)
  tensors = conversion_testlib.canonical_tensors(cfg, seed=5)
  # An output side under undocumented names: must be skipped, not needed.
  extra = {"cls/predictions/output_bias": np.zeros([cfg.vocab_size], np.float32),
           "cls/predictions/some_undocumented/kernel": np.ones([3, 4], np.float32)}
  folder = tmp_path_factory.mktemp("tf1")
  prefix = write_tf1_checkpoint(folder / "model.ckpt", tensors, extra)
  config_path = folder / "config.json"
  config_path.write_text(json.dumps(tf1_json_config(cfg)))
  return cfg, tensors, prefix, config_path


def test_tf1_to_rembert_tf_keeps_every_encoder_tensor(tf1_checkpoint, tmp_path):
  cfg, tensors, prefix, config_path = tf1_checkpoint
  names = [n for n, _ in tf.train.list_variables(prefix)]
  assert "global_step" in names and any(n.endswith("/adam_m") for n in names)
  out = tmp_path / "converted"
  converter.convert_checkpoint("tf1", "rembert_tf", prefix, out,
                               config=config_path)
  assert files_of(out) == [
      "encoder/checkpoint", "encoder/ckpt-0.data-00000-of-00001",
      "encoder/ckpt-0.index", "model_config.yaml"]
  loaded_cfg, encoder = checkpoint_restore.load_encoder(out)
  assert loaded_cfg.as_dict() == cfg.as_dict()
  values = slot_values(encoder, False)
  assert sorted(values) == sorted(tensors)
  for name, value in tensors.items():
    np.testing.assert_array_equal(values[name], value, err_msg=name)
  # The converted encoder computes the released architecture from the TF1 weights.
  inputs = encoder_inputs(cfg, seed=4)
  assert_outputs_close(reference_forward(hf_names_from_tf1(tensors), cfg, inputs),
                       encoder(inputs, training=False))
  # The encoder checkpoint holds the encoder alone.
  stored = [n for n, _ in tf.train.list_variables(
      checkpoint_layout.encoder_checkpoint_path(out))
            if n.startswith("encoder/") and "VARIABLE_VALUE" in n]
  assert len(stored) == len(encoder.variables)


def reference_mlm_logits(tensors, cfg, sequence_output, positions):
  """BERT's MLM head in float64 numpy from canonical tensors: dense, GELU,
  LayerNorm, then logits against the separate output embedding."""
  t = {k: v.astype(np.float64) for k, v in tensors.items()}
  x = np.take_along_axis(np.asarray(sequence_output, np.float64),
                         positions[..., None], axis=1)
  x = x @ t["cls/predictions/transform/dense/kernel"] + t[
      "cls/predictions/transform/dense/bias"]
  x = 0.5 * x * (1.0 + _erf(x / math.sqrt(2.0)))
  mean = x.mean(-1, keepdims=True)
  var = ((x - mean) ** 2).mean(-1, keepdims=True)
  x = ((x - mean) / np.sqrt(var + cfg.layer_norm_eps)
       * t["cls/predictions/transform/LayerNorm/gamma"]
       + t["cls/predictions/transform/LayerNorm/beta"])
  return x @ t["cls/predictions/output_embedding"].T + t["cls/predictions/output_bias"]


@pytest.fixture(scope="module")
def released_checkpoint(tmp_path_factory):
  cfg = small_config(hidden_dropout_prob=0.0, attention_probs_dropout_prob=0.0)
  folder = tmp_path_factory.mktemp("released")
  canonical, prefix = conversion_testlib.write_released_checkpoint(folder, cfg)
  return cfg, canonical, prefix


def test_released_output_side_matched_by_role_and_shape(released_checkpoint,
                                                        tmp_path):
  cfg, canonical, prefix = released_checkpoint
  names = dict(tf.train.list_variables(prefix))
  assert "bert/embeddings/output_embedding/adam_v" in names
  out = tmp_path / "with_output_side"
  converter.convert_checkpoint("tf1", "rembert_tf", prefix, out,
                               with_output_side=True)
  assert sorted(p.name for p in out.iterdir()) == [
      "encoder", "model_config.yaml", "pretrainer"]
  loaded_cfg, pretrainer = pretrainer_restore.load_pretrainer(out)
  assert loaded_cfg.as_dict() == cfg.as_dict()
  values = slot_values(pretrainer, True)
  assert sorted(values) == sorted(canonical)
  for name, value in canonical.items():
    np.testing.assert_array_equal(values[name], value, err_msg=name)
  # The converted pretrainer computes the released MLM head from the TF1 weights.
  inputs = encoder_inputs(cfg, seed=2)
  positions = np.array([[0, 3], [1, 2], [4, 0]], np.int32)
  outputs = pretrainer(dict(inputs, masked_lm_positions=positions), training=False)
  expected = reference_mlm_logits(canonical, cfg, outputs["sequence_output"],
                                  positions)
  np.testing.assert_allclose(outputs["mlm_logits"], expected, atol=1e-4, rtol=0)
  # Its encoder/ checkpoint holds the same encoder (what fine-tuning reads),
  # also given as a checkpoint prefix (the config is found two levels up).
  for source in (out, checkpoint_layout.encoder_checkpoint_path(out)):
    _, encoder = checkpoint_restore.load_encoder(source)
    for a, b in zip(encoder.variables, pretrainer.encoder.variables):
      np.testing.assert_array_equal(a.numpy(), b.numpy())
  _, again = pretrainer_restore.load_pretrainer(
      checkpoint_layout.resolve(out).pretrainer_checkpoint)
  np.testing.assert_array_equal(again.masked_lm.output_embedding.numpy(),
                                canonical["cls/predictions/output_embedding"])
  with pytest.raises(checkpoint_layout.CheckpointError,
                     match="intermediate_size: .* has 64, the given config has 80"):
    checkpoint_restore.load_encoder(out, config=small_config(intermediate_size=80))


def test_released_output_side_only_when_asked(released_checkpoint, tmp_path):
  _, canonical, prefix = released_checkpoint
  out = tmp_path / "encoder_only"
  converter.convert_checkpoint("tf1", "rembert_tf", prefix, out)
  assert not (out / "pretrainer").exists()
  assert not pretrainer_restore.has_output_side(out)
  with pytest.raises(checkpoint_layout.CheckpointError, match="--with_output_side"):
    pretrainer_restore.load_pretrainer(out)
  _, encoder = checkpoint_restore.load_encoder(out)
  assert sorted(slot_values(encoder, False)) == sorted(
      n for n in canonical if n.startswith("bert/"))


def test_released_to_hf_with_output_side_and_released_special_ids(
    released_checkpoint, tmp_path):
  cfg, canonical, prefix = released_checkpoint
  import testlib  # pylint: disable=g-import-not-at-top
  out = tmp_path / "hf"
  converter.convert_checkpoint("tf1", "hf", prefix, out, with_output_side=True,
                               sp_model=testlib.released_layout_sentencepiece())
  tensors = load_file(str(out / "model.safetensors"))
  np.testing.assert_array_equal(tensors["cls.predictions.decoder.weight"],
                                canonical["cls/predictions/output_embedding"])
  np.testing.assert_array_equal(
      tensors["cls.predictions.dense.weight"],
      canonical["cls/predictions/transform/dense/kernel"].T)
  config = json.loads((out / "config.json").read_text())
  assert (config["pad_token_id"], config["bos_token_id"],
          config["eos_token_id"]) == (0, 312, 313)
  assert config["architectures"] == ["RemBertForMaskedLM"]
  assert (out / "sentencepiece.model").is_file()
  assert json.loads((out / "sentencepiece.json").read_text())["cls_id"] == 312
  # And back: the HF directory converts to the same pretrainer.
  back = tmp_path / "back"
  converter.convert_checkpoint("hf", "rembert_tf", out, back)
  _, pretrainer = pretrainer_restore.load_pretrainer(back)
  values = slot_values(pretrainer, True)
  for name, value in canonical.items():
    np.testing.assert_array_equal(values[name], value, err_msg=name)


def test_released_checkpoint_read_in_bounded_batches_on_ram(
    released_checkpoint, tmp_path, monkeypatch):
  """Tf1Source reads several tensors per RestoreV2 within the byte budget;
  on ram:// (as on gs://) both conversions write what one batch writes."""
  cfg, canonical, prefix = released_checkpoint
  remote = f"ram://conversion_batches/{tmp_path.name}"
  tf.io.gfile.makedirs(remote)
  folder = pathlib.Path(prefix).parent
  for path in folder.iterdir():
    tf.io.gfile.copy(str(path), f"{remote}/{path.name}", overwrite=True)
  remote_prefix = f"{remote}/{pathlib.Path(prefix).name}"
  calls, restore = [], tf.raw_ops.RestoreV2
  monkeypatch.setattr(tf.raw_ops, "RestoreV2",
                      lambda **kw: calls.append(kw["tensor_names"]) or restore(**kw))

  def convert(to_format, budget):
    monkeypatch.setattr(checkpoint_reading, "BATCH_BYTES", budget)
    out = f"{remote}/{to_format}_{budget}"
    converter.convert_checkpoint("tf1", to_format, remote_prefix, out,
                                 with_output_side=True)
    return out

  source = tensor_sources.Tf1Source(remote_prefix)
  source.add_output_side(cfg)
  names = sorted(source.shapes())
  monkeypatch.setattr(checkpoint_reading, "BATCH_BYTES", 2048)
  read = list(source.read(names))
  assert 1 < len(calls) < len(names)
  assert [n for n, _ in read] == names
  for name, value in read:
    assert value.dtype == tf.float32
    np.testing.assert_array_equal(value, canonical[name], err_msg=name)
  for to_format in ("rembert_tf", "hf"):
    calls.clear()
    small = convert(to_format, 2048)
    assert 1 < len(calls) < len(names)
    calls.clear()
    whole = convert(to_format, 1 << 28)
    assert len(calls) == 1
    if to_format == "hf":
      read_bytes = lambda d: tf.io.gfile.GFile(f"{d}/model.safetensors", "rb").read()
      assert read_bytes(small) == read_bytes(whole)
    else:
      _, pretrainer = pretrainer_restore.load_pretrainer(small)
      values = slot_values(pretrainer, True)
      for name, value in canonical.items():
        np.testing.assert_array_equal(values[name], value, err_msg=name)


def test_ambiguous_or_missing_output_side_lists_the_candidates(tmp_path):
  cfg = small_config()
  _, released = conversion_testlib.released_tf1_tensors(cfg, seed=3)
  released["cls/predictions/extra_bias"] = np.zeros([cfg.vocab_size], np.float32)
  prefix = write_tf1_checkpoint(tmp_path / "model.ckpt", released)
  (tmp_path / "config.json").write_text(json.dumps(tf1_json_config(cfg)))
  with pytest.raises(weight_layout.ConversionError) as error:
    converter.convert_checkpoint("tf1", "rembert_tf", prefix, tmp_path / "out",
                                 with_output_side=True)
  message = str(error.value)
  assert "cls/predictions/output_bias (97,) is ambiguous" in message
  assert "cls/predictions/extra_bias, cls/predictions/output_bias" in message
  # A config whose E_out matches nothing: the missing roles are named.
  values = tf1_json_config(cfg)
  values["output_embedding_size"] = 40
  (tmp_path / "config.json").write_text(json.dumps(values))
  with pytest.raises(weight_layout.ConversionError,
                     match=r"no tensor of shape \(97, 40\) for "
                     "cls/predictions/output_embedding"):
    converter.convert_checkpoint("tf1", "rembert_tf", prefix, tmp_path / "out",
                                 with_output_side=True)
  assert not (tmp_path / "out").exists()


def test_tf1_config_mismatch_is_one_error_listing_every_name(tf1_checkpoint, tmp_path):
  cfg, _, prefix, _ = tf1_checkpoint
  values = tf1_json_config(cfg)
  values["num_hidden_layers"] = 3        # the checkpoint has 2
  values["intermediate_size"] = 80       # the checkpoint has 64
  bad_config = tmp_path / "bad.json"
  bad_config.write_text(json.dumps(values))
  out = tmp_path / "never"
  with pytest.raises(weight_layout.ConversionError) as error:
    converter.convert_checkpoint("tf1", "rembert_tf", prefix, out, config=bad_config)
  message = str(error.value)
  assert "missing: bert/encoder/layer_2/attention/self/query/kernel" in message
  assert "missing: bert/encoder/layer_2/output/LayerNorm/beta" in message
  assert "bert/encoder/layer_0/intermediate/dense/kernel: found (32, 64), expected (32, 80)" in message
  assert "bert/encoder/layer_1/output/dense/kernel" in message
  assert not out.exists()
  assert not list(tmp_path.glob(".never*"))


def test_hf_mismatch_is_one_error_and_nothing_written(hf_dir, tmp_path):
  tensors = load_file(str(hf_dir / "model.safetensors"))
  del tensors["rembert.encoder.layer.0.attention.self.key.bias"]
  tensors["rembert.encoder.layer.5.output.dense.weight"] = np.zeros([2, 2], np.float32)
  tensors["classifier.weight"] = np.zeros([3, 32], np.float32)
  tensors["rembert.pooler.dense.weight"] = np.zeros([32, 31], np.float32)
  bad = tmp_path / "bad_hf"
  bad.mkdir()
  save_file(tensors, str(bad / "model.safetensors"), metadata={"format": "pt"})
  (bad / "config.json").write_text((hf_dir / "config.json").read_text())
  out = tmp_path / "out"
  with pytest.raises(weight_layout.ConversionError) as error:
    converter.convert_checkpoint("hf", "rembert_tf", bad, out)
  message = str(error.value)
  for name in ("missing: rembert.encoder.layer.0.attention.self.key.bias",
               "unexpected: rembert.encoder.layer.5.output.dense.weight",
               "unexpected: classifier.weight",
               "wrong shape: rembert.pooler.dense.weight"):
    assert name in message, message
  assert not out.exists() and not list(tmp_path.glob(".out*"))


def test_pytorch_model_bin_is_refused(hf_dir, tmp_path):
  folder = tmp_path / "torch"
  folder.mkdir()
  (folder / "config.json").write_text((hf_dir / "config.json").read_text())
  (folder / "pytorch_model.bin").write_bytes(b"\x80\x02not really a pickle")
  for path in (folder, folder / "pytorch_model.bin"):
    with pytest.raises(weight_layout.ConversionError, match="unpickling runs"):
      converter.convert_checkpoint("hf", "rembert_tf", path, tmp_path / "out")
  assert not (tmp_path / "out").exists()


def test_equal_widths_identity_projection(tmp_path):
  """E_in == hidden: HF gets an exact identity projection; it is dropped on the way back."""
  cfg = small_config(input_embedding_size=32, output_embedding_size=32)
  encoder = rembert_encoder.build_encoder(cfg)
  randomize(encoder.variables, seed=3)
  src = tmp_path / "src"
  with outputs.atomic_directory(str(src)) as tmp:
    checkpoint_writing.write_checkpoint_dir(tmp, cfg, encoder)
  hf = tmp_path / "hf"
  converter.convert_checkpoint("rembert_tf", "hf", src, hf)
  weights = load_file(str(hf / "model.safetensors"))
  np.testing.assert_array_equal(
      weights["rembert.encoder.embedding_hidden_mapping_in.weight"], np.eye(32))
  inputs = encoder_inputs(cfg)
  assert_outputs_close(reference_forward(weights, cfg, inputs),
                       encoder(inputs, training=False))
  back = tmp_path / "back"
  converter.convert_checkpoint("hf", "rembert_tf", hf, back)
  _, restored = checkpoint_restore.load_encoder(back)
  for a, b in zip(encoder.variables, restored.variables):
    np.testing.assert_array_equal(a.numpy(), b.numpy())
  # A learned (non-identity) projection cannot be represented: refused.
  weights["rembert.encoder.embedding_hidden_mapping_in.weight"][0, 1] = 0.5
  learned = tmp_path / "learned"
  learned.mkdir()
  save_file(weights, str(learned / "model.safetensors"), metadata={"format": "pt"})
  (learned / "config.json").write_text((hf / "config.json").read_text())
  with pytest.raises(weight_layout.ConversionError, match="non-identity"):
    converter.convert_checkpoint("hf", "rembert_tf", learned, tmp_path / "x")


def files_of(folder):
  return sorted(str(p.relative_to(folder)) for p in folder.rglob("*")
                if p.is_file())


def test_hf_names_invert_hf_name():
  cfg = small_config()
  hf_names = tensor_sources._hf_names(cfg)  # pylint: disable=protected-access
  for name in weight_layout.expected_canonical_shapes(cfg, output_side=True):
    hf, transpose = weight_layout.hf_name(name)
    assert hf_names[hf] == (name, transpose)
    assert hf_names[hf[len("rembert."):]
                    if hf.startswith("rembert.") else hf] == (name, transpose)


def test_convert_tool_cli(source_dir, tmp_path):
  _, _, path = source_dir
  tool = REPO / "tools" / "convert_checkpoint.py"
  out = tmp_path / "hf_cli"
  result = subprocess.run(
      [sys.executable, str(tool), "--from", "rembert_tf", "--to", "hf",
       "--checkpoint", str(path), "--output_dir", str(out), "--encoder_only"],
      capture_output=True, text=True, timeout=120, check=False)
  assert result.returncode == 0, result.stderr[-2000:]
  names = load_file(str(out / "model.safetensors"))
  assert not any(n.startswith("cls.") for n in names)
  # The folder one pushes to the Hugging Face hub holds its format alone; the
  # log is beside it.
  assert files_of(out) == ["config.json", "model.safetensors"]
  assert sorted(p.name for p in tmp_path.iterdir()) == ["hf_cli", "hf_cli.logs"]
  (log,) = (tmp_path / "hf_cli.logs").glob("rembert-convert-*.log")
  assert "(exit code 0)" in log.read_text()
  again = subprocess.run(
      [sys.executable, str(tool), "--from", "rembert_tf", "--to", "hf",
       "--checkpoint", str(path), "--output_dir", str(out)],
      capture_output=True, text=True, timeout=120, check=False)
  assert again.returncode == 1 and "already exists" in again.stderr


def test_pretraining_model_dir_to_clean_checkpoint_dir(source_dir, tmp_path):
  """A model_dir with only Model Garden's full ckpt-N (model + optimizer + step)."""
  import tf_keras  # pylint: disable=g-import-not-at-top
  cfg, model, _ = source_dir
  model_dir = tmp_path / "model_dir"
  model_dir.mkdir()
  rembert_config.save_model_config(cfg, model_dir / "model_config.yaml")
  optimizer = tf_keras.optimizers.Adam()
  optimizer.build(model.trainable_variables)
  tf.train.CheckpointManager(
      tf.train.Checkpoint(model=model, optimizer=optimizer,
                          global_step=tf.Variable(3, dtype=tf.int64)),
      str(model_dir), max_to_keep=1).save(checkpoint_number=3)
  out = tmp_path / "clean"
  converter.convert_checkpoint("rembert_tf", "rembert_tf", model_dir, out)
  loaded_cfg, loaded_pretrainer = pretrainer_restore.load_pretrainer(out)
  before, after = slot_values(model, True), slot_values(loaded_pretrainer, True)
  assert sorted(before) == sorted(after)
  for name in before:
    np.testing.assert_array_equal(before[name], after[name], err_msg=name)
  _, encoder = checkpoint_restore.load_encoder(out)  # fine-tuning's entry
  for a, b in zip(model.encoder.variables, encoder.variables):
    np.testing.assert_array_equal(a.numpy(), b.numpy())


def test_hf_masked_lm_without_pooler(source_dir, hf_dir, tmp_path):
  """RemBertForMaskedLM has no pooler: an error with the fix, or opt in."""
  cfg, model, _ = source_dir
  tensors = load_file(str(hf_dir / "model.safetensors"))
  for suffix in ("weight", "bias"):
    del tensors[f"rembert.pooler.dense.{suffix}"]
  folder = tmp_path / "mlm"
  folder.mkdir()
  save_file(tensors, str(folder / "model.safetensors"), metadata={"format": "pt"})
  (folder / "config.json").write_text((hf_dir / "config.json").read_text())
  with pytest.raises(weight_layout.ConversionError, match="--allow_missing_pooler"):
    converter.convert_checkpoint("hf", "rembert_tf", folder, tmp_path / "a")
  converter.convert_checkpoint("hf", "rembert_tf", folder, tmp_path / "b",
                               allow_missing_pooler=True)
  _, encoder = checkpoint_restore.load_encoder(tmp_path / "b")
  before, after = slot_values(model.encoder, False), slot_values(encoder, False)
  for name in before:
    if not name.startswith("bert/pooler/"):
      np.testing.assert_array_equal(before[name], after[name], err_msg=name)
