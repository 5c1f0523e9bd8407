"""The data commands: flags reach the library; bad input is one line, exit 1, nothing lost.

Each command's flags live in absl's global registry, so each command runs in
its own process; the table-driven cases of one command share that process
(`_DRIVER` parses each case's flags and calls `main`).
"""
import json
import os
import pathlib
import subprocess
import sys

import data_testlib
import testlib

REPO = pathlib.Path(__file__).resolve().parents[2]

# Runs main(argv) of one command module for each case; prints one JSON line per
# case: exit code and stderr.
_DRIVER = r"""
import contextlib, importlib, io, json, sys
from absl import flags
module = importlib.import_module(sys.argv[1])
from rembert_tf.common import command
prog = module.PROG
for argv in json.loads(sys.argv[2]):
  flags.FLAGS.unparse_flags()
  err = io.StringIO()
  code = 0
  with contextlib.redirect_stderr(err), contextlib.redirect_stdout(io.StringIO()):
    try:
      code = module.main(command.parse_flags(prog, ["prog"] + argv))
    except SystemExit as e:
      code = e.code
  print(json.dumps({"code": code, "stderr": err.getvalue()}), flush=True)
"""


def _env():
  return dict(os.environ, TF_CPP_MIN_LOG_LEVEL="2",
              PYTHONPATH=os.pathsep.join([str(REPO), os.environ.get("PYTHONPATH", "")]))


def _tool(name, *args):
  return subprocess.run([sys.executable, str(REPO / "tools" / name), *args],
                        capture_output=True, text=True, cwd=str(REPO),
                        env=_env(), timeout=300, check=False)


def _run_cases(module, cases):
  done = subprocess.run(
      [sys.executable, "-c", _DRIVER, module, json.dumps([c[0] for c in cases])],
      capture_output=True, text=True, cwd=str(REPO), env=_env(), timeout=300,
      check=False)
  assert done.returncode == 0, done.stderr[-3000:]
  return [json.loads(line) for line in done.stdout.splitlines()
          if line.startswith("{")]


def _assert_one_line_errors(prog, cases, results):
  assert len(results) == len(cases)
  for (argv, expected), result in zip(cases, results):
    lines = result["stderr"].strip().splitlines()
    assert result["code"] == 1, (argv, result)
    assert len(lines) == 1 and lines[0].startswith(f"{prog}: error: "), (argv, lines)
    assert "Traceback" not in result["stderr"]
    assert expected in lines[0], (argv, expected, lines[0])


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
  # The records alone (what a bucket receives); the log beside them.
  assert sorted(p.name for p in (tmp_path / "records").iterdir()) == [
      "metadata.json", "pretrain-00000-of-00002.tfrecord",
      "pretrain-00001-of-00002.tfrecord"]
  assert len(list((tmp_path / "records.logs").glob(
      "rembert-create-pretraining-data-*.log"))) == 1


def test_create_pretraining_data_bad_input_is_one_line_and_keeps_records(tmp_path):
  corpus = data_testlib.corpus_dir()
  model = data_testlib.sentencepiece_model()
  records = tmp_path / "records"
  common = [f"--sentencepiece_model={model}", "--seq_length=32",
            "--max_predictions_per_seq=5", "--languages=el",
            "--num_output_shards=2"]
  base = common + [f"--input={corpus}/{{lang}}/*.txt"]
  broken = tmp_path / "broken" / "en"
  broken.mkdir(parents=True)
  (broken / "wiki_00.json").write_text("{not json\n{\"title\": \"no text\"}\n")
  (tmp_path / "a_file").write_text("x")
  cases = [
      (base + [f"--output_dir={records}"], "ok"),
      (base + [f"--output_dir={records}"], "already holds pre-training records"),
      (common + [f"--output_dir={records}", "--overwrite", "--languages=en",
                 f"--input={tmp_path}/broken/{{lang}}/*.json"], "no text"),
      (base + [f"--output_dir={tmp_path}/o", "--seq_length=100000"],
       "--seq_length must be in [3, 8192]"),
      (base + [f"--output_dir={tmp_path}/o", "--max_predictions_per_seq=31"],
       "--max_predictions_per_seq must be in [1, 30]"),
      (base + [f"--output_dir={tmp_path}/o",
               f"--sentencepiece_model={model.parent}"], "is a directory"),
      (common + [f"--output_dir={tmp_path}/o", f"--input=el={corpus}/el"],
       "is a directory"),
      (common + [f"--output_dir={tmp_path}/o", f"--input={corpus}/{{lang}}"],
       "matches only directories"),
      (base + [f"--output_dir={tmp_path}/a_file/records"], "is a file"),
      (base + [f"--output_dir={tmp_path}/o", "--masked_lm_prob=1.5"],
       "--masked_lm_prob"),
      (base + [f"--output_dir={tmp_path}/held"],
       f"{tmp_path}/held is being written by another run (pid "),
  ]
  with testlib.held_by_another_process(tmp_path / "held"):
    results = _run_cases("rembert_tf.cli.create_pretraining_data", cases)
  assert results[0]["code"] == 0, results[0]
  before = {p.name: p.read_bytes() for p in records.iterdir()}
  _assert_one_line_errors("rembert-create-pretraining-data", cases[1:],
                          results[1:])
  # The failed --overwrite left the old records byte-identical, no temporaries.
  assert {p.name: p.read_bytes() for p in records.iterdir()} == before
  assert not (tmp_path / "o").exists()


def test_train_sentencepiece_tool_and_its_errors(tmp_path):
  corpus = data_testlib.corpus_dir()
  done = _tool("train_sentencepiece.py", f"--input=el={corpus}/el/*.txt",
               f"--output_dir={tmp_path}/spm", "--vocab_size=150")
  assert done.returncode == 0, done.stderr
  assert json.loads((tmp_path / "spm" / "sentencepiece.json").read_text())[
      "vocab_size"] == 150
  # The vocabulary alone; the log beside it.
  assert sorted(p.name for p in (tmp_path / "spm").iterdir()) == [
      "sentencepiece.json", "sentencepiece.model", "sentencepiece.vocab"]
  assert len(list((tmp_path / "spm.logs").glob(
      "rembert-train-sentencepiece-*.log"))) == 1
  tiny = tmp_path / "tiny" / "en"
  tiny.mkdir(parents=True)
  (tiny / "a.txt").write_text("hello world\nhello there\n")
  tiny_input = f"--input={tmp_path}/tiny/{{lang}}/*.txt"
  one_line = tmp_path / "one_line" / "en"
  one_line.mkdir(parents=True)
  (one_line / "a.txt").write_text(" ".join(["word"] * 5000) + "\n")
  cases = [
      ([f"--input={tmp_path}/one_line/{{lang}}/*.txt",
        f"--output_dir={tmp_path}/o", "--vocab_size=50"],
       "every line is longer than 8192 bytes (the longest has 24999), and "
       "SentencePiece skips such lines. Split the text into lines"),
      ([f"--input=el={corpus}/el/*.txt", f"--output_dir={tmp_path}/spm",
        "--vocab_size=150"], "already exists"),
      ([tiny_input, f"--output_dir={tmp_path}/o", "--sample_size=0"],
       "--sample_size 0: must be at least 1."),
      ([tiny_input, f"--output_dir={tmp_path}/o", "--vocab_size=500"],
       "lower --vocab_size to"),
      ([tiny_input, f"--output_dir={tmp_path}/o", "--vocab_size=8"],
       "raise --vocab_size to more than"),
      ([f"--input=el={corpus}/el", f"--output_dir={tmp_path}/o"],
       "is a directory"),
      ([f"--input={tmp_path}/{{lang}}/*.x", f"--output_dir={tmp_path}/o"],
       "matches no files"),
      ([tiny_input, f"--output_dir={tmp_path}/o", "--num_threads=0"],
       "--num_threads 0: must be at least 1."),
      ([tiny_input, f"--output_dir={tmp_path}/held"],
       f"{tmp_path}/held is being written by another run (pid "),
  ]
  with testlib.held_by_another_process(tmp_path / "held"):
    results = _run_cases("rembert_tf.cli.train_sentencepiece", cases)
  _assert_one_line_errors("rembert-train-sentencepiece", cases, results)
  assert "Lower" not in results[4]["stderr"] and "lower --vocab" not in results[4]["stderr"]
  assert not (tmp_path / "o" / "sentencepiece.model").exists()
