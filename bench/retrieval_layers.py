r"""Retrieval quality per encoder layer: Tatoeba accuracy and BUCC F1 on the demo's sets.

Writes Tatoeba- and BUCC-like sets from the demo grammar
(`rembert_tf.demo.retrieval_sets`: exact translations in the six non-English
demo languages, BUCC's aligned pairs hidden among unaligned sentences), then
runs `rembert-retrieve`'s library for every layer of `--checkpoint` (the demo
pre-trains one: `python -m rembert_tf.demo --run_dir DIR --nofinetune
--norandom_init_baseline`, then `--checkpoint DIR/pretrain`) and prints a
table: per layer, Tatoeba accuracy per language and its mean, and BUCC's mean
test F1 (its threshold chosen on the sample set). The default layer
(`depth // 2 + 2`) is marked.

Example:
```bash
.venv/bin/python bench/retrieval_layers.py --checkpoint runs/demo/pretrain \
  --json_out layers.json
```
"""
import json
import os
import sys
import tempfile

from absl import app
from absl import flags

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import sidebyside  # noqa: F401  pylint: disable=g-import-not-at-top,wrong-import-position,unused-import
import bench_command  # pylint: disable=g-import-not-at-top,wrong-import-position

FLAGS = flags.FLAGS
flags.DEFINE_string("checkpoint", None, "Encoder checkpoint (e.g. the demo's "
                    "RUN_DIR/pretrain).")
flags.DEFINE_list("languages", None, "Demo languages (default: all six "
                  "non-English ones).")
flags.DEFINE_integer("num_sentences", 500, "Tatoeba pairs per language.")
flags.DEFINE_integer("bucc_aligned", 100, "BUCC aligned pairs per split.")
flags.DEFINE_integer("seed", 0, "Seeds the sets.")
flags.DEFINE_string("work_dir", None, "Sets and per-layer outputs (default: a "
                    "temporary directory).")
flags.DEFINE_string("json_out", "", "Also write the table as JSON here.")


def sweep(checkpoint, root, languages):
  """{layer: {"tatoeba": {lang: acc, "avg": x}, "bucc2018": avg F1}}."""
  import tensorflow as tf  # pylint: disable=g-import-not-at-top
  from rembert_tf.retrieval import bitext  # pylint: disable=g-import-not-at-top
  from rembert_tf.retrieval import retrieval_runner  # pylint: disable=g-import-not-at-top
  from rembert_tf.retrieval import sentence_embedder  # pylint: disable=g-import-not-at-top
  from rembert_tf.checkpoints import checkpoint_restore  # pylint: disable=g-import-not-at-top
  strategy = tf.distribute.OneDeviceStrategy("/cpu:0")
  depth = checkpoint_restore.model_config_of(checkpoint).num_hidden_layers
  source = bitext.DownloadSource(os.path.join(root, "download"))
  rows = {}
  for layer in range(1, depth + 1):
    embedder = sentence_embedder.SentenceEmbedder(
        checkpoint, strategy, layer=layer)
    results = retrieval_runner.run_retrieval(
        {"tatoeba": languages, "bucc2018": languages}, source, embedder,
        strategy, os.path.join(root, f"layer-{layer}"),
        label_folder=os.path.join(root, "labels"), progress=lambda line: None)
    scores = results["scores"]
    rows[layer] = dict(tatoeba=dict(scores["tatoeba"]["accuracy"],
                                    avg=scores["tatoeba"]["avg_accuracy"]),
                       bucc2018=scores["bucc2018"]["avg_f1"])
    print(f"  layer {layer}/{depth}: Tatoeba {rows[layer]['tatoeba']['avg']:.1f}"
          f", BUCC F1 {rows[layer]['bucc2018']:.1f}", flush=True)
  return depth, rows


def markdown(depth, rows, languages) -> str:
  from rembert_tf.retrieval import sentence_embedder  # pylint: disable=g-import-not-at-top
  default = sentence_embedder.default_layer(depth)
  lines = ["| layer | " + " | ".join(f"Tatoeba {l}" for l in languages)
           + " | Tatoeba mean | BUCC F1 (mean) |",
           "|" + " --- |" * (len(languages) + 3)]
  for layer, row in rows.items():
    name = f"{layer} (default)" if layer == default else str(layer)
    cells = [f"{row['tatoeba'][l]:.1f}" for l in languages]
    lines.append(f"| {name} | " + " | ".join(cells) +
                 f" | {row['tatoeba']['avg']:.1f} | {row['bucc2018']:.1f} |")
  return "\n".join(lines)


def main(argv):
  del argv
  if not FLAGS.checkpoint:
    raise app.UsageError("--checkpoint is required.")
  from rembert_tf.common import errors  # pylint: disable=g-import-not-at-top
  from rembert_tf.checkpoints import checkpoint_layout  # pylint: disable=g-import-not-at-top
  from rembert_tf.demo import retrieval_sets  # pylint: disable=g-import-not-at-top
  try:  # a missing or unusable checkpoint is one line before the sets are made
    checkpoint_layout.resolve(FLAGS.checkpoint)
  except errors.RemBertError as e:
    sys.exit(f"--checkpoint: {errors.one_line(e)}")
  languages = FLAGS.languages or list(retrieval_sets.DEFAULT_LANGUAGES)
  root = FLAGS.work_dir or tempfile.mkdtemp(prefix="retrieval_layers_")
  try:
    retrieval_sets.write_retrieval_sets(
        root, languages=languages, num_sentences=FLAGS.num_sentences,
        bucc_aligned=FLAGS.bucc_aligned, seed=FLAGS.seed)
  except ValueError as e:  # the demo grammar refuses an unknown language
    sys.exit(f"--languages: {e}")
  print(f"{FLAGS.checkpoint}: Tatoeba {FLAGS.num_sentences} pairs and BUCC "
        f"{FLAGS.bucc_aligned} aligned pairs (+2 unaligned sentences per side "
        f"each) per language and split, in {root}", flush=True)
  depth, rows = sweep(FLAGS.checkpoint, root, languages)
  print()
  print(markdown(depth, rows, languages))
  if FLAGS.json_out:
    with open(FLAGS.json_out, "w", encoding="utf-8") as f:
      json.dump(dict(checkpoint=FLAGS.checkpoint, depth=depth, rows=rows,
                     languages=languages, num_sentences=FLAGS.num_sentences,
                     bucc_aligned=FLAGS.bucc_aligned, seed=FLAGS.seed), f,
                indent=1)


if __name__ == "__main__":
  bench_command.run(main)
