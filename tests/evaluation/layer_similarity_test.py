"""Linear CKA: the properties that make it a similarity of representations."""
import numpy as np
import pytest

import testlib
from rembert_tf.common import errors
from rembert_tf.common import fileio
from rembert_tf.common import outputs
from rembert_tf.common import output_lock
from rembert_tf.evaluation import layer_similarity


def _random(shape, seed=0):
  return np.random.default_rng(seed).normal(size=shape)


def _orthogonal(size, seed=1):
  q, _ = np.linalg.qr(_random((size, size), seed))
  return q


@pytest.mark.parametrize("shape", [(20, 50), (200, 8)])  # Gram and feature paths
def test_identical_representations_have_cka_one(shape):
  x = _random(shape)
  assert layer_similarity.linear_cka(x, x) == pytest.approx(1.0, abs=1e-12)


@pytest.mark.parametrize("shape", [(20, 50), (200, 8)])
def test_invariant_to_orthogonal_transform_and_isotropic_scaling(shape):
  x, y = _random(shape, 0), _random(shape, 2)
  expected = layer_similarity.linear_cka(x, y)
  assert 0.0 < expected < 1.0
  q = _orthogonal(shape[1])
  assert layer_similarity.linear_cka(x @ q, y) == pytest.approx(expected, rel=1e-9)
  assert layer_similarity.linear_cka(x, 7.5 * y) == pytest.approx(expected, rel=1e-9)
  assert layer_similarity.linear_cka(0.1 * (x @ q), y + 3.0) == pytest.approx(
      expected, rel=1e-9)   # a constant shift is removed by centring


def test_hand_computed_case():
  # x = [1, 2, 3] centres to [-1, 0, 1]; y = [1, 0, 0] to [2/3, -1/3, -1/3].
  # ||y^T x||^2 = 1, ||x^T x|| = 2, ||y^T y|| = 6/9: CKA = 1 / (2 * 2/3) = 0.75.
  x = np.array([[1.0], [2.0], [3.0]])
  y = np.array([[1.0], [0.0], [0.0]])
  assert layer_similarity.linear_cka(x, y) == pytest.approx(0.75, abs=1e-12)
  # Two features: x2 = [x, x] is x scaled by sqrt(2) up to a rotation.
  assert layer_similarity.linear_cka(np.hstack([x, x]), y) == pytest.approx(0.75)


def test_gram_and_feature_paths_agree_and_matrix_is_layer_by_layer():
  layers_a = [_random((30, 12), s) for s in range(3)]
  layers_b = [layers_a[0], _random((30, 40), 9)]
  matrix = layer_similarity.cka_matrix(layers_a, layers_b)   # n=30 <= 40: Gram
  assert matrix.shape == (3, 2)
  assert matrix[0, 0] == pytest.approx(1.0)
  features = layer_similarity._cka(
      [layer_similarity._centered(x) for x in layers_a],
      [layer_similarity._centered(y) for y in layers_b], grams=False)
  np.testing.assert_allclose(matrix, features, rtol=1e-9)


def test_different_row_counts_are_an_error():
  with pytest.raises(layer_similarity.LayerSimilarityError, match="row counts"):
    layer_similarity.cka_matrix([_random((5, 3))], [_random((6, 3))])


def _written(out):
  """The matrix of the result written under `out`."""
  return fileio.read_json(fileio.join(out, layer_similarity.RESULT_JSON))[
      "matrix"]


def _similarity(value):
  return layer_similarity.LayerSimilarity(
      matrix=np.full((2, 2), value), label_a="a", label_b="b", num_inputs=3,
      pooling="mean")


@pytest.mark.parametrize("root", ["local", "ram"])
def test_results_are_one_set_replaced_only_with_overwrite(root, tmp_path,
                                                          monkeypatch):
  out = (str(tmp_path / "sim") if root == "local"
         else f"ram://similarity_test/{tmp_path.name}/sim")
  fileio.write_text(fileio.join(out, "logs", "run.log"), "kept\n")
  layer_similarity.write_similarity(_similarity(0.5), out)
  with pytest.raises(errors.OutputExistsError, match="--overwrite"):
    layer_similarity.write_similarity(_similarity(0.7), out)
  with monkeypatch.context() as patch:  # Killed while the new set moves in:
    # three moves aside, the marker, the third move in.
    faults = testlib.StepFaults(patch, at=7)
    original = outputs.swap_in
    patch.setattr(outputs, "swap_in", lambda *a, **k: (
        setattr(faults, "armed", True), original(*a, **k))[1])
    with pytest.raises(testlib.Killed):
      layer_similarity.write_similarity(_similarity(0.7), out, overwrite=True)
  with monkeypatch.context() as patch:  # The next run finishes the swap.
    patch.setattr(output_lock, "pid_running", lambda pid: False)
    with pytest.raises(errors.OutputExistsError):
      layer_similarity.write_similarity(_similarity(0.9), out)
  assert _written(out)[0][0] == 0.7  # Past the marker: completed.
  assert fileio.read_text(fileio.join(out, "logs", "run.log")) == "kept\n"
  assert sorted(fileio.listdir(out)) == sorted(
      ["logs", *layer_similarity.RESULT_FILES])
  layer_similarity.write_similarity(_similarity(0.9), out, overwrite=True)
  assert _written(out)[0][0] == 0.9


def test_an_output_in_a_checkpoint_is_refused_before_any_work(tmp_path):
  checkpoint = tmp_path / "ckpt"
  checkpoint.mkdir()
  (tmp_path / "link").symlink_to(checkpoint)
  with pytest.raises(errors.UsageError, match=r"--output_dir .*/link/sim lies "
                     r"inside --checkpoint .*/ckpt \(real paths"):
    layer_similarity.analyze_checkpoints(
        str(checkpoint), None, ["a b"], sp_model=str(tmp_path / "sp.model"),
        output_dir=str(tmp_path / "link" / "sim"))
  assert list(checkpoint.iterdir()) == []


CASES = [
    (("--seq_length=0"), "--seq_length 0: [CLS], a piece and [SEP] need at "
     "least 3 positions; give at least 3 (e.g. 128)."),
    (("--seq_length=-4"), "--seq_length -4: [CLS], a piece and [SEP] need at "
     "least 3 positions; give at least 3 (e.g. 128)."),
    (("--max_sentences=0"), "--max_sentences 0: must be at least 1."),
    (("--max_sentences=-1"), "--max_sentences -1: must be at least 1."),
]


def test_the_command_refuses_numbers_out_of_range_in_one_line(tmp_path):
  sentences = tmp_path / "s.txt"
  sentences.write_text("a sentence\nanother one\n")
  base = [f"--checkpoint={tmp_path}/none", f"--sentences={sentences}",
          f"--output_dir={tmp_path}/out"]
  results = testlib.run_command_cases("rembert_tf.cli.layer_similarity",
                                      [base + [a] for a, _ in CASES])
  for (_, line), result in zip(CASES, results):
    assert testlib.assert_one_line_error(
        "rembert-layer-similarity", result) == (
            f"rembert-layer-similarity: error: {line}")
  assert not (tmp_path / "out").exists()
