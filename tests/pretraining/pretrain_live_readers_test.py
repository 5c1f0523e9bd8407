"""Reading a model_dir while its trainer, in another process, saves every
step and rotates its checkpoints (max_to_keep=2): the export and the
conversion read the newest intact checkpoint, held against the rotation even
when the one they chose first is deleted before they read it; an encoder
export older than the newest full checkpoint is not used."""
import os
import signal
import subprocess
import time

import numpy as np
import pytest
import tensorflow as tf

from rembert_tf.conversion import converter
from rembert_tf.export import encoder_export
from rembert_tf.checkpoints import checkpoint_integrity
from rembert_tf.checkpoints import checkpoint_layout
from rembert_tf.checkpoints import checkpoint_restore
from rembert_tf.checkpoints import checkpoint_snapshot

from rembert_tf.common import errors

import pretrain_testlib

DEADLINE_SECONDS = 300


@pytest.fixture(scope="module")
def records(tmp_path_factory):
  root = tmp_path_factory.mktemp("records")
  return pretrain_testlib.write_records(root, splits=(("train", 1),))


def wait_for(predicate, what):
  deadline = time.time() + DEADLINE_SECONDS
  while time.time() < deadline:
    if predicate():
      return
    time.sleep(0.2)
  raise AssertionError(f"{what} never came")


def checkpoint_step(model_dir) -> int:
  """The step of model_dir's newest checkpoint; -1 before the first (or
  while its state file is being replaced)."""
  try:
    latest = tf.train.latest_checkpoint(model_dir)
  except (tf.errors.OpError, ValueError):
    return -1
  return int(latest.rsplit("-", 1)[1]) if latest else -1


def rotated_away_once(monkeypatch, model_dir):
  """The first resolve of model_dir returns only once the trainer deleted
  the checkpoints it chose: the read that follows must not use them."""
  resolve = checkpoint_layout.resolve
  first = []

  def resolve_then_rotate(source):
    resolved = resolve(source)
    if source == model_dir and not first:
      first.append(resolved)
      wait_for(lambda: not any(
          os.path.exists(p + ".index") for p in (
              resolved.encoder_checkpoint, resolved.pretrainer_checkpoint)),
               f"the rotation of {resolved.encoder_checkpoint}")
    return resolved

  monkeypatch.setattr(checkpoint_layout, "resolve", resolve_then_rotate)
  return first


def encoder_weights(source):
  return checkpoint_restore.load_encoder(source)[1].get_weights()


def test_readers_of_a_model_dir_whose_trainer_rotates_checkpoints(
    records, tmp_path, monkeypatch):
  config = pretrain_testlib.write_experiment_yaml(
      tmp_path / "exp.yaml", records, train_steps=100000, steps_per_loop=1,
      checkpoint_interval=1)
  model_dir = str(tmp_path / "live")
  trainer = subprocess.Popen(
      pretrain_testlib.train_command(
          config, model_dir, "--params_override",
          # Weights change at every step (the rate would reach 0 at step 100).
          "trainer.max_to_keep=2,"
          "trainer.optimizer_config.learning_rate.polynomial.decay_steps="
          "100000"),
      cwd=pretrain_testlib.REPO, env=pretrain_testlib.subprocess_env(),
      stdout=subprocess.DEVNULL, stderr=open(tmp_path / "train.log", "w"))
  try:
    # The trainer may save ten checkpoints a second: any step from 3 on.
    wait_for(lambda: checkpoint_step(model_dir) >= 3, "the trainer's ckpt-3")
    first = rotated_away_once(monkeypatch, model_dir)
    exported = encoder_export.export_encoder(
        model_dir, str(tmp_path / "export"), verify=False)
    assert first and os.path.exists(os.path.join(exported, "saved_model.pb"))
    monkeypatch.undo()
    first = rotated_away_once(monkeypatch, model_dir)
    converter.convert_checkpoint("rembert_tf", "rembert_tf", model_dir,
                                 str(tmp_path / "converted"))
    assert first and checkpoint_layout.latest_checkpoint(
        str(tmp_path / "converted" / "encoder")) is not None
    assert trainer.poll() is None  # the trainer rotated all along
    # SIGTERM settles the writes in flight (a SIGKILL could leave the export
    # of step N complete and the full checkpoint of step N not).
    trainer.send_signal(signal.SIGTERM)
    assert trainer.wait(timeout=DEADLINE_SECONDS) == errors.EXIT_PREEMPTED
  finally:
    if trainer.poll() is None:
      trainer.send_signal(signal.SIGKILL)
      trainer.wait(timeout=60)
  assert "Traceback" not in (tmp_path / "train.log").read_text()[-5000:]
  # A full checkpoint newer than the newest encoder export: its encoder is read.
  monkeypatch.undo()
  full = tf.train.latest_checkpoint(model_dir)
  older_export = sorted(tf.train.get_checkpoint_state(
      f"{model_dir}/encoder").all_model_checkpoint_paths,
                        key=lambda p: int(p.rsplit("-", 1)[1]))[0]
  assert int(older_export.rsplit("-", 1)[1]) < int(full.rsplit("-", 1)[1])
  checkpoint_integrity.name_as_latest(f"{model_dir}/encoder", older_export)
  resolved = checkpoint_layout.resolve(model_dir)
  assert resolved.encoder_checkpoint == full
  with checkpoint_snapshot.held(model_dir, ["encoder"]) as held:
    assert held.encoder_checkpoint != full  # a copy
    from_dir = encoder_weights(held)
  for got, want in zip(from_dir, encoder_weights(full)):
    np.testing.assert_array_equal(got, want)
  assert any(not np.array_equal(got, old) for got, old in
             zip(from_dir, encoder_weights(older_export)))
