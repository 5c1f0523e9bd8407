r"""Linear CKA between every pair of layers of two checkpoints, on the same inputs.

Writes `layer_similarity.md` (the table), `layer_similarity.png` (heatmap) and
`layer_similarity.json` under --output_dir. Three uses:
* pre-trained vs fine-tuned: --checkpoint_a PRETRAIN_DIR --checkpoint_b FINETUNED_DIR;
* two models: --checkpoint_a MODEL_1 --checkpoint_b MODEL_2 (same vocabulary);
* one model, two languages: --checkpoint_a MODEL --sentences en.txt
  --sentences_b de.txt (parallel sentences, line by line).
A checkpoint is anything fine-tuning starts from (a pre-training model_dir, a
rembert_tf checkpoint directory, an exported SavedModel), or a fine-tuning run
kept with `--keep_checkpoints` (its model config comes from checkpoint_a, or
--model_config).

Example:
```bash
python tools/layer_similarity.py --checkpoint_a runs/pretrain \
  --checkpoint_b runs/ft/xnli/runs/lr-2e-05_seed-0 \
  --sentences download/xnli/dev-en.tsv --output_dir runs/cka
```
"""
import argparse
from typing import List, Optional

from rembert_tf.common import console  # noqa: E402
console.quiet_tensorflow_import()  # before anything below imports TensorFlow
from rembert_tf.cli import harness  # noqa: E402
from rembert_tf.common import errors

PROG = "layer_similarity"


def build_parser() -> argparse.ArgumentParser:
  parser = argparse.ArgumentParser(
      prog=PROG, description=__doc__.split("\n\n")[0],
      formatter_class=argparse.ArgumentDefaultsHelpFormatter)
  add = parser.add_argument
  add("--checkpoint_a", required=True, help="First checkpoint (table rows).")
  add("--checkpoint_b", help="Second checkpoint (columns); default: the first.")
  add("--sentences", required=True, help="Inputs: one sentence per line "
      "(a TSV's first column is used).")
  add("--sentences_b", help="Parallel inputs for checkpoint_b (e.g. the same "
      "sentences in another language); default: --sentences.")
  add("--sp_model", help="SentencePiece model (default: checkpoint_a's "
      "sentencepiece.model).")
  add("--model_config", help="Model config (name or YAML) for a checkpoint "
      "that carries none (default: checkpoint_a's).")
  add("--seq_length", type=int, default=128)
  add("--max_sentences", type=int, default=512)
  add("--pooling", choices=["mean", "tokens"], default="mean",
      help="mean: one vector per sentence; tokens: every real token (same "
      "sentences on both sides only).")
  add("--verbose", action="store_true", help="Show every log line on the "
      "console too (absl, TensorFlow, orbit); by default they go to the log "
      "file only (OUTPUT_DIR/logs/).")
  add("--output_dir", required=True)
  return parser


@errors.command(PROG)
def main(argv: Optional[List[str]] = None) -> int:
  args = build_parser().parse_args(argv)
  from rembert_tf.common import fileio  # pylint: disable=g-import-not-at-top
  from rembert_tf.evaluation import layer_similarity  # pylint: disable=g-import-not-at-top

  def read(path):
    if not fileio.exists(path):
      raise errors.UsageError(f"--sentences {path}: no such file.")
    lines = [l.split("\t")[0].strip() for l in fileio.read_text(path).splitlines()]
    return [l for l in lines if l][:args.max_sentences]

  if args.max_sentences < 1:
    raise errors.UsageError(f"--max_sentences {args.max_sentences}: must be "
                            "at least 1.")
  sentences_a = read(args.sentences)
  sentences_b = read(args.sentences_b) if args.sentences_b else None
  result = layer_similarity.analyze_checkpoints(
      args.checkpoint_a, args.checkpoint_b, sentences_a, sentences_b,
      sp_model=args.sp_model, seq_length=args.seq_length,
      pooling=args.pooling, output_dir=args.output_dir,
      model_config=args.model_config)
  print(result.markdown())
  print(f"written: {args.output_dir}/{{{layer_similarity.RESULT_MARKDOWN},"
        f"{layer_similarity.RESULT_HEATMAP},{layer_similarity.RESULT_JSON}}}")
  return 0


def run() -> None:
  """Console-script entry point: logs to OUTPUT_DIR/logs/, errors as one line."""
  harness.run_argparse_command(main, build_parser, PROG)


if __name__ == "__main__":
  run()
