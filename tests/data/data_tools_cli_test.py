"""The thin tools: flags reach the library; errors exit 1 with the message."""
import json
import os
import pathlib
import subprocess
import sys

import data_testlib

REPO = pathlib.Path(__file__).resolve().parents[2]


def _tool(name, *args):
  env = dict(os.environ, TF_CPP_MIN_LOG_LEVEL="2")
  return subprocess.run([sys.executable, str(REPO / "tools" / name), *args],
                        capture_output=True, text=True, cwd=str(REPO), env=env,
                        timeout=300, check=False)


def test_create_pretraining_data_tool(tmp_path):
  args = [f"--input={data_testlib.corpus_dir()}/{{lang}}/*.txt",
          f"--output_dir={tmp_path}/records",
          f"--sentencepiece_model={data_testlib.sentencepiece_model()}",
          "--seq_length=48", "--max_predictions_per_seq=7", "--languages=ar,zh",
          "--num_output_shards=2", "--num_workers=2"]
  done = _tool("create_pretraining_data.py", *args)
  assert done.returncode == 0, done.stderr
  assert "tokens/s" in done.stdout
  meta = json.loads((tmp_path / "records" / "metadata.json").read_text())
  assert (meta["seq_length"], meta["max_predictions_per_seq"]) == (48, 7)
  assert sorted(meta["languages"]) == ["ar", "zh"]
  again = _tool("create_pretraining_data.py", *args)
  assert again.returncode == 1
  assert "already holds pre-training records" in again.stderr


def test_train_sentencepiece_tool(tmp_path):
  done = _tool("train_sentencepiece.py",
               f"--input=el={data_testlib.corpus_dir()}/el/*.txt",
               f"--output_dir={tmp_path}", "--vocab_size=150")
  assert done.returncode == 0, done.stderr
  assert json.loads((tmp_path / "sentencepiece.json").read_text())[
      "vocab_size"] == 150
  missing = _tool("train_sentencepiece.py", f"--input={tmp_path}/{{lang}}/*.x",
                  f"--output_dir={tmp_path}/o", "--vocab_size=150")
  assert missing.returncode == 1 and "matches no files" in missing.stderr
