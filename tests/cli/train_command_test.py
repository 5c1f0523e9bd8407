"""rembert-train refusals that must leave nothing behind.

A strategy that cannot start (`--strategy tpu` on a machine without a TPU)
is one line, exit 1, and the --model_dir it would have written is not
created: a later run with the right strategy starts from a clean slate, and
no empty folder misleads a user into thinking a run is there.
"""
import testlib

TRAIN = "rembert_tf.cli.train"


def test_no_tpu_leaves_no_empty_model_dir(tmp_path, monkeypatch):
  for variable in ("TPU_NAME", "COLAB_TPU_ADDR",
                   "KUBE_GOOGLE_CLOUD_TPU_ENDPOINTS"):
    monkeypatch.delenv(variable, raising=False)
  model_dir = tmp_path / "runs" / "pretrain"
  (result,) = testlib.run_command_cases(TRAIN, [[
      "--config_file", "pretrain_tiny_demo", "--model_dir", str(model_dir),
      "--strategy", "tpu",
      "--params_override", "task.train_data.input_path=synthetic"]])
  testlib.assert_one_line_error("rembert-train", result,
                                "--strategy tpu: no TPU found on this machine")
  assert not (tmp_path / "runs").exists()   # nor the parent it created
