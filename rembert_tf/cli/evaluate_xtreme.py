r"""Scores XTREME predictions against labels with the benchmark's metric definitions.

A drop-in replacement for the official XTREME scorer (same JSON shape, scores
in percent) for the nine tasks (xnli, pawsx, udpos, panx, xquad, mlqa, tydiqa,
bucc2018, tatoeba), with MLQA's per-language normalisation, error messages
that name the files, and a markdown table. The table and the JSON add the
XTREME score (the mean of the task scores) and the category means
(classification, structured prediction, question answering, retrieval), over
the tasks present; the missing ones are named (the official keys `all_task`,
`classification`, `tagging`, `qa`, `retrieval` are written only when all their
tasks are present, as the official scorer does).

Example:

  rembert-evaluate-xtreme --prediction_folder out/predictions \
    --label_folder out/labels --split dev --tasks xnli,mlqa \
    --output_file scores.json --compare paper
"""
from absl import flags

from rembert_tf.common import command  # noqa: E402
command.quiet_tensorflow_import()  # before anything below imports TensorFlow
from rembert_tf.common import command_names  # noqa: E402
from rembert_tf.common import errors
from rembert_tf.common import fileio
from rembert_tf.common import output_overlap
from rembert_tf.common import outputs

from rembert_tf.evaluation import xtreme_benchmark
from rembert_tf.evaluation import xtreme_scorer

PROG = command_names.console_script(__spec__.name)  # rembert-evaluate-xtreme
FLAGS = flags.FLAGS
flags.DEFINE_string("prediction_folder", None,
                    "Folder with <task>/<split>-<lang>.{tsv,json} predictions.")
flags.DEFINE_string("label_folder", None, "Folder with labels, same layout.")
flags.DEFINE_list("tasks", None, "Tasks to score (default: every task folder "
                  "present in both folders).")
flags.DEFINE_list("languages", None, "Languages to score (default: every "
                  "language with a prediction file).")
flags.DEFINE_string("split", "test", "File prefix: test (as the official "
                    "scorer) or dev.")
flags.DEFINE_string("output_file", None, "Write the scores as JSON here.")
flags.DEFINE_bool("overwrite", False, "Replace an existing --output_file.")
flags.DEFINE_enum("compare", None, ["paper"], "Put the paper's coupled / "
                  "decoupled averages beside the scores.")
flags.DEFINE_bool("allow_missing_answers", False, "QA: score unanswered "
                  "questions as 0 (official behaviour) instead of failing.")


@errors.command(PROG)
def main(argv):
  del argv
  for name in ("prediction_folder", "label_folder"):
    if not FLAGS[name].value:
      raise errors.UsageError(f"--{name} is required.")
  if FLAGS.output_file:  # before the scoring: where the scores go
    fileio.check_output_location(FLAGS.output_file)
    if fileio.isdir(FLAGS.output_file):
      raise errors.UsageError(
          f"--output_file {FLAGS.output_file} is a directory; give the path "
          "of the JSON file to write (e.g. DIR/scores.json).")
    output_overlap.refuse_overlap(FLAGS.output_file, {
        "--prediction_folder": FLAGS.prediction_folder,
        "--label_folder": FLAGS.label_folder}, "--output_file")
    outputs.refuse_existing([FLAGS.output_file], FLAGS.overwrite)
  results = xtreme_scorer.evaluate_folders(
      FLAGS.prediction_folder, FLAGS.label_folder, tasks=FLAGS.tasks,
      split=FLAGS.split, languages=FLAGS.languages,
      allow_missing_answers=FLAGS.allow_missing_answers)
  print(xtreme_scorer.format_markdown(results,
                                      compare_paper=FLAGS.compare == "paper"))
  print(xtreme_benchmark.format_markdown(xtreme_benchmark.summarize(results)))
  if FLAGS.output_file:
    with outputs.taking_output(FLAGS.output_file):
      outputs.refuse_existing([FLAGS.output_file], FLAGS.overwrite)
      xtreme_scorer.write_json(xtreme_benchmark.official_report(results),
                               FLAGS.output_file)
    print(f"Wrote {FLAGS.output_file}")


def run():
  command.run(main, __doc__, program=PROG)


if __name__ == "__main__":
  run()
