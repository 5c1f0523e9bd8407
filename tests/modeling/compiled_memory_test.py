"""The XLA-compiled training step needs no more memory than Model Garden's.

Runs bench/compiled_memory.py at its `ci` shape (hidden 64, 4 heads, FFN
256, batch 2 x seq 128: the released block's proportions) in one subprocess:
XLA's buffer assignment is only written when XLA_FLAGS is set before
TensorFlow initialises, which this process did long ago. For one block
(`RemBertTransformerBlock` against Model Garden's `TransformerEncoderBlock`,
same arguments) and the whole encoder (`RemBertEncoder` against Model
Garden's `BertEncoderV2` with `embedding_width` = E_in, one block), in
float32 and mixed_bfloat16, dropout 0 and 0.1, the compiled forward +
gradients must use at most Model Garden's total bytes. That the two compute
the same numbers is checked by transformer_block_test.py and
fast_paths_test.py.
"""
import json
import os
import pathlib
import subprocess
import sys

import pytest

REPO = pathlib.Path(__file__).resolve().parents[2]
PRECISIONS = ("float32", "mixed_bfloat16")
DROPOUTS = (0.0, 0.1)


@pytest.fixture(scope="module")
def rows(tmp_path_factory):
  out = tmp_path_factory.mktemp("compiled_memory") / "rows.json"
  env = dict(os.environ, PYTHONPATH=os.pathsep.join(
      [str(REPO)] + [p for p in [os.environ.get("PYTHONPATH")] if p]))
  env.pop("XLA_FLAGS", None)
  done = subprocess.run(
      [sys.executable, str(REPO / "bench" / "compiled_memory.py"),
       "--shape=ci", "--encoder_layers=1", f"--json_out={out}"],
      env=env, cwd=REPO, capture_output=True, text=True, timeout=600,
      check=False)
  assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-3000:]
  return {(r["kind"], r["precision"], r["dropout"]): r
          for r in json.loads(out.read_text())["rows"]}


def test_every_case_is_measured_on_the_same_parameters(rows):
  assert sorted(rows) == sorted((kind, precision, dropout)
                                for kind in ("block", "encoder")
                                for precision in PRECISIONS
                                for dropout in DROPOUTS)
  for key, row in rows.items():
    ours, theirs = row["rembert_tf"], row["model_garden"]
    # Same variables and inputs: the compiled programs' parameters agree.
    assert ours["parameter_bytes"] == theirs["parameter_bytes"] > 0, key
    assert ours["total_bytes"] > ours["parameter_bytes"], key
  # Dropout shows in the buffers (Model Garden keeps its random bits).
  for kind in ("block", "encoder"):
    for precision in PRECISIONS:
      assert (rows[kind, precision, 0.1]["model_garden"]["total_bytes"]
              > rows[kind, precision, 0.0]["model_garden"]["total_bytes"])


@pytest.mark.parametrize("kind", ["block", "encoder"])
def test_rembert_tf_needs_no_more_than_model_garden(rows, kind):
  over = {key: f"{row['ratio']:.3f}x" for key, row in rows.items()
          if key[0] == kind and row["ratio"] > 1.0}
  assert not over, f"more XLA buffer bytes than Model Garden's {kind}: {over}"
