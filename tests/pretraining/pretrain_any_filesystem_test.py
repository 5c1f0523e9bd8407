"""Pre-training with records and model_dir on a non-local TF filesystem.

TensorFlow's `ram://` filesystem stands in for `gs://`: a path there is not a
local path (pathlib, open and shutil cannot reach it), exactly like a bucket.
"""
import os

import numpy as np
import pytest
import tensorflow as tf

from rembert_tf.common import fileio
from rembert_tf.checkpoints import checkpoint_layout
from rembert_tf.modeling import rembert_config
from rembert_tf.modeling import rembert_encoder
from rembert_tf.pretraining import runner

import pretrain_testlib


@pytest.fixture(scope="module")
def ram_records(tmp_path_factory):
  local = tmp_path_factory.mktemp("records")
  spm = local / "spm.model"
  spm.write_bytes(b"stands in for a SentencePiece model; only copied")
  pretrain_testlib.write_records(
      local, num_shards=2, extra_metadata={"sentencepiece_model": str(spm)})
  root = "ram://pretrain_any_fs/records"
  for split in ("train", "eval"):
    for name in os.listdir(local / split):
      fileio.copy(str(local / split / name), f"{root}/{split}/{name}")
  return root


def test_train_checkpoint_resume_and_encoder_export_on_ram(ram_records):
  model_dir = "ram://pretrain_any_fs/model"
  lines = []
  metrics = runner.run(pretrain_testlib.make_config(ram_records, train_steps=2),
                       model_dir, mode="train_and_eval", print_fn=lines.append)
  assert metrics["checkpoint"] == f"{model_dir}/ckpt-2"
  assert np.isfinite(metrics["eval_masked_lm_accuracy"])
  for name in ("ckpt-2.index", "params.yaml", "model_config.yaml",
               "sentencepiece.model", "encoder/ckpt-2.index", "train"):
    assert fileio.exists(f"{model_dir}/{name}"), name
  assert not os.path.exists("ram:") and not os.path.exists("ram:/pretrain_any_fs")

  lines = []
  metrics = runner.run(pretrain_testlib.make_config(ram_records, train_steps=4),
                       model_dir, print_fn=lines.append)
  assert f"resumed from {model_dir}/ckpt-2 at step 2" in lines
  assert metrics["global_step"] == 4
  assert tf.train.latest_checkpoint(model_dir) == f"{model_dir}/ckpt-4"

  # The encoder export beside the checkpoint holds the trained encoder.
  cfg = rembert_config.load_model_config(f"{model_dir}/model_config.yaml")
  encoder = rembert_encoder.build_encoder(cfg)
  prefix = tf.train.latest_checkpoint(f"{model_dir}/{checkpoint_layout.ENCODER_SUBDIR}")
  assert prefix == f"{model_dir}/encoder/ckpt-4"
  tf.train.Checkpoint(encoder=encoder).read(prefix).assert_existing_objects_matched()
  # (tf.train.load_variable asks whether the prefix is a directory first,
  # which ram:// answers yes for any prefix.)
  full = tf.compat.v1.train.NewCheckpointReader(f"{model_dir}/ckpt-4")
  exported = tf.compat.v1.train.NewCheckpointReader(prefix)
  names = [n for n in full.get_variable_to_shape_map()
           if n.startswith("encoder/") and "OPTIMIZER" not in n]
  assert len(names) > 10
  for name in names:
    np.testing.assert_array_equal(full.get_tensor(name),
                                  exported.get_tensor(name))
