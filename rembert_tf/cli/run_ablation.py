r"""Runs the ablation suite: pre-train, fine-tune, compare, tabulate. Resumable.

Every row (default: the paper's base-scale experiments
`configs/experiments/ablation_*.yaml`) is pre-trained on the same records with
the same schedule, fine-tuned on each task with the paper's protocol (rate
chosen on English dev, mean and std over seeds), and compared layer by layer
(linear CKA, pre-trained vs fine-tuned). Writes `results.md` / `results.json`
(model, E_in, E_out, layers, #PT, #FT, MLM accuracy, per-task scores, average,
the paper's numbers beside the rows it reports) and `figures/*.png`. Running
the same command again skips every finished step and resumes the rest.

Examples:
```bash
# the whole suite at demo size on this machine (CPU, < 30 minutes)
python tools/run_ablation.py --scale demo --output_dir runs/ablation_demo
# base scale on TPUs
python tools/run_ablation.py --output_dir gs://BUCKET/ablation \
  --train_records 'gs://BUCKET/records/train/*.tfrecord' \
  --eval_records 'gs://BUCKET/records/eval/*.tfrecord' \
  --xtreme_records_dir gs://BUCKET/xtreme_records \
  --strategy tpu --tpu NAME --mixed_precision mixed_bfloat16 \
  --finetune_flags=--strategy=tpu,--tpu=NAME2
```
"""
import argparse
import contextlib
import sys
from typing import List, Optional

from rembert_tf.common import console  # noqa: E402
console.quiet_tensorflow_import()  # before anything below imports TensorFlow
from rembert_tf.cli import harness  # noqa: E402
from rembert_tf.common import errors
from rembert_tf import ablation
from rembert_tf.common import fileio
from rembert_tf.common import outputs
from rembert_tf.common import output_lock
from rembert_tf.runtime import preemption
from rembert_tf.runtime import process_settings
from rembert_tf.runtime import strategies

PROG = "run_ablation"


def _floats(text: str) -> List[float]:
  try:
    return [float(v) for v in text.split(",") if v]
  except ValueError:
    raise argparse.ArgumentTypeError(
        f"{text!r}: expected comma-separated numbers, e.g. 1e-5,2e-5") from None


def _names(text: str) -> List[str]:
  return [v.strip() for v in text.split(",") if v.strip()]


def build_parser() -> argparse.ArgumentParser:
  parser = argparse.ArgumentParser(
      prog=PROG, description=__doc__.split("\n\n")[0],
      formatter_class=argparse.ArgumentDefaultsHelpFormatter)
  add = parser.add_argument
  add("--verbose", action="store_true", help="Show every log line on the "
      "console too (absl, TensorFlow, orbit); by default they go to the log "
      "file only (OUTPUT_DIR/logs/).")
  add("--output_dir", required=True, help="Everything goes here (local or gs://).")
  add("--scale", choices=["base", "demo"], default="base",
      help="base: the paper's rows on your records / XTREME data; demo: "
      "demo-size rows on the demo corpus and its XNLI-like task.")
  add("--experiments", type=_names, default=None,
      help="Base scale: experiment YAMLs / names (default: every ablation_*).")
  add("--models", type=_names, default=None,
      help="Only these rows (by name, e.g. coupled_768,decoupled_768).")
  add("--train_records", help="Base scale: pre-training records (glob).")
  add("--eval_records", help="Base scale: held-out records (glob; default "
      "the training records).")
  add("--xtreme_data_dir", help="The XTREME download/ folder (records are "
      "made once per task by the first fine-tuning run).")
  add("--xtreme_records_dir", help="Or: tools/create_finetuning_data.py "
      "--output_dir (OUTPUT/<task>/ per task).")
  add("--sp_model", help="SentencePiece model for --xtreme_data_dir (default: "
      "the one beside each pre-training run).")
  add("--tasks", type=_names, default=None,
      help="XTREME tasks (default: all six; demo: xnli).")
  add("--learning_rates", type=_floats, default=None,
      help="Fine-tuning rates swept per task (default base 1e-5,2e-5,3e-5; "
      "demo 3e-4,1e-3).")
  add("--num_seeds", type=int, default=None,
      help="Fine-tuning runs per rate (default base 3, demo 2).")
  add("--finetune_flags", type=_names, default=None,
      help="Extra flags for every fine-tuning run, comma-separated "
      "(e.g. --num_train_epochs=2,--strategy=tpu).")
  add("--params_override", default=None,
      help="Applied to every row's experiment (dotted keys or YAML), e.g. "
      "trainer.train_steps=100000.")
  add("--strategy", default=strategies.DEFAULT_STRATEGY,
      choices=list(strategies.STRATEGIES),
      help="Pre-training distribution strategy.")
  add("--tpu", help="TPU name or grpc:// address for --strategy tpu.")
  add("--mixed_precision",
      choices=list(process_settings.PRECISION_FLAG_VALUES),
      help="Pre-training precision (default: the experiment's).")
  add("--allow_different_schedules", action="store_true",
      help="Run rows whose experiments differ outside the model.")
  add("--similarity_sentences", help="Sentences for the layer similarity "
      "(text, or TSV: first column). Default: XNLI English dev.")
  add("--similarity_max_sentences", type=int, default=256)
  add("--corpus_megabytes", type=float, default=3.0, help="Demo corpus size.")
  return parser


@errors.command(PROG)
def main(argv: Optional[List[str]] = None) -> int:
  """Parses `argv` (without the program name) and runs the suite."""
  args = build_parser().parse_args(argv)
  options = ablation.SuiteOptions(
      output_dir=args.output_dir, scale=args.scale, experiments=args.experiments,
      models=args.models, train_records=args.train_records,
      eval_records=args.eval_records, xtreme_data_dir=args.xtreme_data_dir,
      xtreme_records_dir=args.xtreme_records_dir, sp_model=args.sp_model,
      tasks=args.tasks, learning_rates=args.learning_rates,
      num_seeds=args.num_seeds, finetune_flags=args.finetune_flags,
      params_override=args.params_override, strategy=args.strategy,
      tpu=args.tpu, mixed_precision=args.mixed_precision,
      allow_different_schedules=args.allow_different_schedules,
      similarity_sentences=args.similarity_sentences,
      similarity_max_sentences=args.similarity_max_sentences,
      corpus_megabytes=args.corpus_megabytes)
  _refuse_output_overlapping_inputs(args)
  try:
    # One suite per directory; several workers of one suite: the chief's.
    with (outputs.writing_output(args.output_dir)
          if output_lock.is_chief_process() else contextlib.nullcontext()):
      ablation.run_suite(options)
  except preemption.TrainingPreempted as e:
    print(f"{PROG}: preempted: {e}",
          file=sys.stderr)
    return errors.EXIT_PREEMPTED
  return 0


def _refuse_output_overlapping_inputs(args) -> None:
  """Before any work: --output_dir must not be, hold or lie in an input."""
  inputs = {f"--{name}": getattr(args, name) for name in (
      "xtreme_data_dir", "xtreme_records_dir", "sp_model",
      "similarity_sentences")}
  for name in ("train_records", "eval_records"):
    for path in fileio.glob(getattr(args, name)) if getattr(args, name) else ():
      inputs[f"--{name} ({path})"] = path
  outputs.refuse_overlap(args.output_dir, inputs, "--output_dir")


def run() -> None:
  """Console-script entry point: logs to OUTPUT_DIR/logs/, errors as one line."""
  harness.run_argparse_command(main, build_parser, PROG)


if __name__ == "__main__":
  run()
