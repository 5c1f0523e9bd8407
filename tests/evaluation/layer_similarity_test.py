"""Linear CKA: the properties that make it a similarity of representations."""
import numpy as np
import pytest

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
  features = layer_similarity._cka_from_features(
      [layer_similarity._centered(x) for x in layers_a],
      [layer_similarity._centered(y) for y in layers_b])
  np.testing.assert_allclose(matrix, features, rtol=1e-9)


def test_different_row_counts_are_an_error():
  with pytest.raises(layer_similarity.LayerSimilarityError, match="row counts"):
    layer_similarity.cka_matrix([_random((5, 3))], [_random((6, 3))])


@pytest.mark.parametrize("argv, line", [
    (["--seq_length=0"], "--seq_length 0: [CLS], a piece and [SEP] need at "
     "least 3 positions; give at least 3 (e.g. 128)."),
    (["--seq_length=-4"], "--seq_length -4: [CLS], a piece and [SEP] need at "
     "least 3 positions; give at least 3 (e.g. 128)."),
    (["--max_sentences=0"], "--max_sentences 0: must be at least 1."),
    (["--max_sentences=-1"], "--max_sentences -1: must be at least 1."),
])
def test_the_command_refuses_numbers_out_of_range_in_one_line(
    argv, line, tmp_path, capsys):
  from rembert_tf.cli import layer_similarity as command  # pylint: disable=g-import-not-at-top
  sentences = tmp_path / "s.txt"
  sentences.write_text("a sentence\nanother one\n")
  with pytest.raises(SystemExit) as e:
    command.main([f"--checkpoint_a={tmp_path}/none", f"--sentences={sentences}",
                  f"--output_dir={tmp_path}/out"] + argv)
  assert e.value.code == 1
  assert capsys.readouterr().err.strip().splitlines() == [
      f"layer_similarity: error: {line}"]
  assert not (tmp_path / "out").exists()
