"""The rules every output follows: not one of its inputs (real paths), one
lock per real path, a killed run's local scratch removed by the next run."""
import os

import pytest

import testlib
from rembert_tf.common import errors
from rembert_tf.common import fileio
from rembert_tf.common import local_files
from rembert_tf.common import output_lock
from rembert_tf.common import output_overlap


@pytest.mark.parametrize("output, how", [
    ("data", "is"), ("", "holds"), ("data/sub/out", "lies inside")])
def test_an_output_overlapping_an_input_is_refused(tmp_path, output, how):
  (tmp_path / "data" / "sub").mkdir(parents=True)
  out = str(tmp_path / output) if output else str(tmp_path)
  with pytest.raises(errors.UsageError) as refused:
    output_overlap.refuse_overlap(out, {"--model_dir": str(tmp_path / "data")},
                           "--output_dir")
  assert str(refused.value).startswith(
      f"--output_dir {out} {how} --model_dir {tmp_path / 'data'} (real paths ")
  assert "Choose --output_dir outside --model_dir." in str(refused.value)


def test_overlap_compares_real_paths(tmp_path):
  (tmp_path / "run").mkdir()
  os.symlink(tmp_path / "run", tmp_path / "link")
  with pytest.raises(errors.UsageError, match=r"is --model_dir .*/run \(real"):
    output_overlap.refuse_overlap(tmp_path / "link/", {"--model_dir": tmp_path / "run"})
  with pytest.raises(errors.UsageError, match="lies inside"):
    output_overlap.refuse_overlap(tmp_path / "link" / ".." / "run" / "export",
                           {"--model_dir": str(tmp_path / "link")})
  # A sibling whose name starts alike, and inputs not given, are fine.
  output_overlap.refuse_overlap(tmp_path / "run2", {"--model_dir": tmp_path / "run",
                                             "--sentencepiece_model": None})
  output_overlap.refuse_overlap(None, {"--model_dir": tmp_path / "run"})


def test_overlap_on_ram_paths_is_normalized():
  with pytest.raises(errors.UsageError, match="holds"):
    output_overlap.refuse_overlap("ram://rules/run/", {"--input": "ram://rules//run/a/../b"})
  output_overlap.refuse_overlap("ram://rules/run", {"--input": "ram://rules/runs/b"})


def test_a_second_writer_through_a_symbolic_link_is_refused(tmp_path):
  model_dir = tmp_path / "model_dir"
  model_dir.mkdir()
  os.symlink(model_dir, tmp_path / "alias")
  with testlib.held_by_another_process(model_dir):
    with pytest.raises(output_lock.OutputLockedError,
                       match="is being written by another run"):
      with output_lock.writing_output(tmp_path / "alias"):
        pass


def test_a_killed_runs_scratch_directory_is_removed_by_the_next(
    tmp_path, monkeypatch):
  monkeypatch.setenv("TMPDIR", str(tmp_path))
  import tempfile  # pylint: disable=g-import-not-at-top
  monkeypatch.setattr(tempfile, "tempdir", None)
  dead = tmp_path / f"rembert_tf-x-{2 ** 22 + 7}@{fileio.HOST}-abcd"
  live = tmp_path / f"rembert_tf-x-{os.getpid()}@{fileio.HOST}-ef01"
  other = tmp_path / "rembert_tf-x-not-a-run"
  for path in (dead, live, other):
    path.mkdir()
    (path / "sample.txt").write_text("lines")
  with local_files.local_scratch_dir("rembert_tf-x-") as scratch:
    assert os.path.basename(scratch).startswith(
        f"rembert_tf-x-{fileio.owner_tag()}-")
    assert not dead.exists() and live.exists() and other.exists()
  assert not os.path.exists(scratch)
