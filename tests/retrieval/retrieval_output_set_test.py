"""rembert-retrieve's output is one set (predictions, labels, results.md,
results.json): a run killed, or meeting a full disk, at any write of a
rerun with --overwrite leaves the previous run's set or the new one, never
predictions of one run beside the results of another (the next run finishes
or undoes the swap it finds). The embedder is a stand-in whose vectors come
from each sentence's text, so each step costs milliseconds."""
import os
import zlib

import numpy as np
import pytest
import tensorflow as tf

import testlib
from rembert_tf.common import errors
from rembert_tf.common import fileio
from rembert_tf.common import output_lock
from rembert_tf.retrieval import bitext
from rembert_tf.retrieval import retrieval_runner

TASKS = {"tatoeba": ["es"], "bucc2018": ["zh"]}


class TextEmbedder:
  """Unit vectors drawn from a seed of (generation, sentence): a run of
  another generation predicts differently, and says so in results.json."""
  layer, num_layers, seq_length = 1, 1, 8

  def __init__(self, generation: str):
    self.source = generation

  def embed(self, sentences, description=None):
    del description
    rows = [np.random.default_rng(zlib.crc32(f"{self.source}|{s}".encode())
                                  ).standard_normal(16) for s in sentences]
    vectors = np.asarray(rows, np.float32).reshape(-1, 16)
    return vectors / np.linalg.norm(vectors, axis=1, keepdims=True)


def _run(demo_sets, out, generation, overwrite):
  return retrieval_runner.run_retrieval(
      TASKS, bitext.DownloadSource(str(demo_sets / "download")),
      TextEmbedder(generation), tf.distribute.get_strategy(), out,
      label_folder=str(demo_sets / "labels"), overwrite=overwrite,
      progress=lambda *a: None)


def _generation(out, predictions_of) -> str:
  """The one run whose files `out` holds, or fails on a mix."""
  results = fileio.read_json(fileio.join(out, retrieval_runner.RESULTS_JSON))
  predictions = fileio.read_text(
      fileio.join(out, "predictions", "tatoeba", "test-es.tsv"))
  for generation, expected in predictions_of.items():
    if predictions == expected:
      assert results["encoder"] == generation, "predictions of another run"
      return generation
  raise AssertionError(f"{out}: predictions of neither run")


@pytest.fixture
def old_and_new(demo_sets, tmp_path):
  """{generation: its Tatoeba predictions}, from runs into fresh folders."""
  predictions_of = {}
  for generation in ("old", "new"):
    out = str(tmp_path / f"reference-{generation}")
    _run(demo_sets, out, generation, overwrite=False)
    predictions_of[generation] = fileio.read_text(
        fileio.join(out, "predictions", "tatoeba", "test-es.tsv"))
  assert predictions_of["old"] != predictions_of["new"]
  return predictions_of


@pytest.mark.parametrize("fault", ["kill", "disk_full"])
def test_a_rerun_stopped_at_any_write_leaves_one_runs_set(
    fault, old_and_new, demo_sets, tmp_path, monkeypatch):
  outcomes = []
  for step in range(1, 400):
    out = str(tmp_path / f"out-{fault}-{step}")
    _run(demo_sets, out, "old", overwrite=False)
    with monkeypatch.context() as patch:
      faults = testlib.StepFaults(
          patch, at=step, **({"fault": testlib.disk_full,
                              "names": ("rename", "open_file")}
                             if fault == "disk_full" else {}))
      faults.armed = True
      try:
        _run(demo_sets, out, "new", overwrite=True)
      except testlib.Killed:
        pass
      except errors.InputError as e:
        assert str(e).startswith(f"{out}: writing it failed: no space left "
                                 "on the device."), (step, e)
    if faults.count < step:
      break
    with monkeypatch.context() as patch:  # The killed run's process is gone.
      running = output_lock.pid_running
      patch.setattr(output_lock, "pid_running",
                    lambda pid: pid != os.getpid() and running(pid))
      with pytest.raises(errors.OutputExistsError, match="--overwrite"):
        _run(demo_sets, out, "newest", overwrite=False)
    outcomes.append(_generation(out, old_and_new))
    assert sorted(os.listdir(tmp_path / f"out-{fault}-{step}")) == sorted(
        retrieval_runner.OUTPUT_SET), step
  assert step > 8 and outcomes[0] == "old"
  assert fault != "kill" or outcomes[-1] == "new"  # killed past the marker
  assert outcomes == sorted(outcomes, reverse=True)  # old, then new.
