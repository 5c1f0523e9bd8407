"""Checkpoints are used only when intact: a directory falls back to its newest
intact checkpoint with one line, a named prefix that is not intact is refused.

Each fault is what a kill or a copy cut short leaves (`testlib.CHECKPOINT_FAULTS`).
"""
import os

import pytest
import tensorflow as tf

import testlib
from rembert_tf.common import errors
from rembert_tf.checkpoints import checkpoint_integrity
from rembert_tf.checkpoints import checkpoint_layout


def write_steps(directory, steps=(1, 2, 3)):
  """A CheckpointManager's checkpoints of one variable (its value = the step)."""
  variable = tf.Variable(tf.zeros([64]))
  manager = tf.train.CheckpointManager(tf.train.Checkpoint(v=variable),
                                       str(directory), max_to_keep=5)
  for step in steps:
    variable.assign(tf.fill([64], float(step)))
    manager.save(checkpoint_number=step)
  return [str(directory / f"ckpt-{s}") for s in steps]


def read_value(prefix):
  variable = tf.Variable(tf.zeros([64]))
  tf.train.Checkpoint(v=variable).read(prefix).assert_existing_objects_matched()
  return float(variable[0])


def test_intact_checkpoints_have_no_problem(tmp_path):
  prefixes = write_steps(tmp_path)
  assert [checkpoint_integrity.problem(p) for p in prefixes] == [None] * 3
  needed = checkpoint_integrity.data_bytes(
      tf.compat.v1.train.NewCheckpointReader(prefixes[-1]))
  assert needed == (os.path.getsize(prefixes[-1] + ".data-00000-of-00001"),
                    True)
  assert checkpoint_layout.latest_checkpoint(tmp_path) == prefixes[-1]


@pytest.mark.parametrize("fault", sorted(testlib.CHECKPOINT_FAULTS))
def test_a_directory_falls_back_to_its_newest_intact_checkpoint(fault, tmp_path):
  prefixes = write_steps(tmp_path)
  part = testlib.CHECKPOINT_FAULTS[fault](str(tmp_path), prefixes[-1])
  assert part in checkpoint_integrity.problem(prefixes[-1])
  lines = []
  used = checkpoint_layout.latest_checkpoint(tmp_path, report=lines.append)
  assert used == prefixes[1] and read_value(used) == 2.0
  assert len(lines) == 1, lines
  assert lines[0].startswith(f"{tmp_path}: ckpt-3 is not intact (")
  assert part in lines[0]
  assert lines[0].endswith("; using ckpt-2, the newest intact checkpoint.")
  # TensorFlow's CheckpointManager trusts the `checkpoint` file: once it names
  # the intact one, the manager restores it and keeps counting from it.
  checkpoint_integrity.name_as_latest(tmp_path, used)
  variable = tf.Variable(tf.zeros([64]))
  manager = tf.train.CheckpointManager(tf.train.Checkpoint(v=variable),
                                       str(tmp_path), max_to_keep=5)
  assert manager.restore_or_initialize() == used
  assert float(variable[0]) == 2.0
  assert manager.checkpoints == prefixes[:2]
  assert checkpoint_layout.latest_checkpoint(tmp_path, report=lines.append) == used
  assert len(lines) == 1  # nothing to report any more


def test_a_fallback_of_a_source_is_shown_once_when_its_checkpoint_is_read(
    tmp_path, capsys):
  prefixes = write_steps(tmp_path)
  testlib.CHECKPOINT_FAULTS["truncated_data"](str(tmp_path), prefixes[-1])
  for _ in range(3):  # a command resolves its source several times
    assert checkpoint_layout.latest_checkpoint(tmp_path) == prefixes[1]
  assert capsys.readouterr().err == ""
  checkpoint_layout.announce_fallback(prefixes[1])
  checkpoint_layout.latest_checkpoint(tmp_path)
  checkpoint_layout.announce_fallback(prefixes[1])
  err = capsys.readouterr().err.splitlines()
  assert len(err) == 1 and "ckpt-3 is not intact" in err[0]


def test_no_intact_checkpoint_is_one_error_naming_each(tmp_path):
  prefixes = write_steps(tmp_path, steps=(1, 2))
  testlib.CHECKPOINT_FAULTS["truncated_data"](str(tmp_path), prefixes[1])
  testlib.CHECKPOINT_FAULTS["deleted_index"](str(tmp_path), prefixes[0])
  with pytest.raises(checkpoint_layout.CheckpointError) as e:
    checkpoint_layout.latest_checkpoint(tmp_path)
  message = errors.one_line(e.value)
  assert message.startswith(f"{tmp_path}: no intact checkpoint (ckpt-2: ")
  assert "ckpt-1: ckpt-1.index is missing" in message
  assert "Copy the checkpoint files again" in message


def test_a_named_prefix_that_is_not_intact_is_refused(tmp_path):
  prefixes = write_steps(tmp_path)
  testlib.CHECKPOINT_FAULTS["truncated_data"](str(tmp_path), prefixes[-1])
  with pytest.raises(checkpoint_layout.CheckpointError) as e:
    checkpoint_layout.resolve(prefixes[-1])
  message = errors.one_line(e.value)
  assert message.startswith(f"{prefixes[-1]}: the checkpoint is not intact (")
  assert f"pass {prefixes[1]} (the newest intact checkpoint there)" in message


def test_an_index_that_is_not_one_is_unreadable(tmp_path):
  prefixes = write_steps(tmp_path, steps=(1,))
  with open(prefixes[0] + ".index", "wb") as f:
    f.write(b"\x00" * 100)
  assert "ckpt-1.index is unreadable" in checkpoint_integrity.problem(prefixes[0])


def test_checkpoints_on_a_gs_like_filesystem(tmp_path):
  """ram:// (what the tests use for gs://): sizes and the state file through
  tf.io.gfile."""
  local = write_steps(tmp_path)
  remote = "ram://checkpoint_integrity_test"
  tf.io.gfile.makedirs(remote)
  for name in os.listdir(tmp_path):
    tf.io.gfile.copy(str(tmp_path / name), f"{remote}/{name}", overwrite=True)
  data = f"{remote}/ckpt-3.data-00000-of-00001"
  tf.io.gfile.remove(data)  # (ram:// appends to a file opened for writing)
  with tf.io.gfile.GFile(data, "wb") as f:
    f.write(open(local[-1] + ".data-00000-of-00001", "rb").read()[:100])
  lines = []
  assert checkpoint_layout.latest_checkpoint(remote, report=lines.append) == (
      f"{remote}/ckpt-2")
  assert "ckpt-3.data-00000-of-00001 has 100 of its" in lines[0]
