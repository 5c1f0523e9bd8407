"""The released RemBERT's layout, end to end, on a tiny model.

A TF1 checkpoint in the released layout (BERT names, Adam slots, global_step,
an output side with undocumented names) and a SentencePiece model with the
released special ids ([PAD]=0 [UNK]=1 [CLS]=312 [SEP]=313 [MASK]=314):

1. convert with the output side -> a rembert_tf checkpoint directory;
2. export the encoder and the preprocessor -> raw multilingual text (six
   scripts) through the preprocessing SavedModel into the encoder SavedModel,
   equal to the converted encoder on the same ids;
3. fine-tune each task type (sentence-pair classification, tagging, span QA)
   for a few steps from the converted directory through
   `python -m rembert_tf.finetune`'s flags -> predictions -> the scorer.
"""
import json
import os
import pathlib
import subprocess
import sys

import numpy as np
import pytest
import tensorflow as tf

import conversion_testlib
import testlib
from pretraining import pretrain_testlib
from rembert_tf.conversion import converter
from rembert_tf.data import tokenizer
from rembert_tf.evaluation import xtreme_scorer
from rembert_tf.export import encoder_export
from rembert_tf.export import preprocessor_export
from rembert_tf.checkpoints import checkpoint_layout
from rembert_tf.checkpoints import checkpoint_restore
from rembert_tf.checkpoints import pretrainer_restore

REPO = pathlib.Path(__file__).resolve().parents[2]
SEQ_LENGTH = 32
# One sentence per script the demo corpus (and so the vocabulary) covers.
TEXTS = ["The river flows past the old mill.",
         "El río pasa junto al viejo molino.",
         "Река течёт мимо старой мельницы.",
         "Το ποτάμι κυλά δίπλα στον παλιό μύλο.",
         "يمر النهر بجانب الطاحونة القديمة.",
         "नदी पुरानी चक्की के पास से बहती है।",
         "河水流过古老的磨坊。"]


@pytest.fixture(scope="module")
def converted(tmp_path_factory):
  """The released layout converted with its output side and vocabulary."""
  sp_model = testlib.released_layout_sentencepiece()
  special = tokenizer.SpecialTokens.from_model(sp_model)
  cfg = conversion_testlib.small_config(
      vocab_size=special.vocab_size, max_position_embeddings=64,
      hidden_dropout_prob=0.0, attention_probs_dropout_prob=0.0)
  folder = tmp_path_factory.mktemp("release")
  canonical, prefix = conversion_testlib.write_released_checkpoint(folder, cfg)
  out = folder / "converted"
  converter.convert_checkpoint("tf1", "rembert_tf", prefix, out,
                               sp_model=sp_model, with_output_side=True)
  return cfg, canonical, out


def test_text_to_embeddings_with_the_released_vocabulary(converted, tmp_path):
  cfg, canonical, out = converted
  assert pretrainer_restore.has_output_side(out)
  _, pretrainer = pretrainer_restore.load_pretrainer(out)
  np.testing.assert_array_equal(
      pretrainer.masked_lm.output_embedding.numpy(),
      canonical["cls/predictions/output_embedding"])
  sp_model = checkpoint_layout.find_sentencepiece(out)
  encoder_export.export_encoder(out, tmp_path / "encoder")
  preprocessor_export.export_preprocessor(
      sp_model, tmp_path / "preprocessor", seq_length=SEQ_LENGTH,
      max_seq_length=cfg.max_position_embeddings)
  pre = tf.saved_model.load(str(tmp_path / "preprocessor"))
  encoder = tf.saved_model.load(str(tmp_path / "encoder"))
  inputs = pre(tf.constant(TEXTS))
  ids = inputs["input_word_ids"].numpy()
  mask = inputs["input_mask"].numpy()
  lengths = mask.sum(axis=1)
  assert ids.shape == (len(TEXTS), SEQ_LENGTH)
  assert (ids[:, 0] == testlib.RELEASED_CLS_ID).all()
  assert (ids[np.arange(len(TEXTS)), lengths - 1] == testlib.RELEASED_SEP_ID).all()
  assert (ids[mask == 0] == 0).all()  # [PAD] = 0
  processor = tokenizer.load_sentencepiece(sp_model)
  for row, text, length in zip(ids, TEXTS, lengths):
    pieces = processor.encode(text)[:SEQ_LENGTH - 2]
    assert row[1:length - 1].tolist() == pieces, text
  text_ids = ids[(mask == 1) & (ids != testlib.RELEASED_CLS_ID)
                 & (ids != testlib.RELEASED_SEP_ID)]
  assert (text_ids != 1).mean() > 0.8  # mostly known pieces, not [UNK]
  outputs = encoder(inputs)
  assert outputs["pooled_output"].shape == (len(TEXTS), cfg.hidden_size)
  _, converted_encoder = checkpoint_restore.load_encoder(out)
  expected = converted_encoder(inputs, training=False)
  np.testing.assert_allclose(outputs["sequence_output"],
                             expected["sequence_output"], atol=1e-5, rtol=0)
  # The preprocessor reports the released ids.
  special = pre.tokenize.get_special_tokens_dict()
  assert int(special["start_of_sequence_id"]) == testlib.RELEASED_CLS_ID
  assert int(special["end_of_segment_id"]) == testlib.RELEASED_SEP_ID
  assert int(special["mask_id"]) == testlib.RELEASED_MASK_ID


def _write(path: pathlib.Path, text: str):
  path.parent.mkdir(parents=True, exist_ok=True)
  path.write_text(text, encoding="utf-8")


def _squad(paragraphs):
  data = [{"title": f"t{i}", "paragraphs": [{"context": context, "qas": [
      {"id": qid, "question": q, "answers": [
          {"text": a, "answer_start": context.index(a)}]}
      for qid, q, a in qas]}]} for i, (context, qas) in enumerate(paragraphs)]
  return json.dumps({"version": "1.1", "data": data}, ensure_ascii=False)


def write_download(root: pathlib.Path):
  """A tiny XTREME download/ folder: xnli, panx, mlqa (en + one other language)."""
  pairs = [("The river flows.", "Water is moving.", "entailment"),
           ("The mill is old.", "The mill is new.", "contradiction"),
           ("The river is long.", "It rains today.", "neutral")] * 3
  es_pairs = [("El río pasa.", "El agua se mueve.", "entailment"),
              ("El molino es viejo.", "El molino es nuevo.", "contradiction")]
  _write(root / "xnli/train-en.tsv", "".join(f"{a}\t{b}\t{l}\n" for a, b, l in pairs))
  _write(root / "xnli/dev-en.tsv", "".join(f"{a}\t{b}\t{l}\n" for a, b, l in pairs))
  _write(root / "xnli/dev-es.tsv", "".join(f"{a}\t{b}\t{l}\n" for a, b, l in es_pairs))
  ner = [[("Anna", "B-PER"), ("lives", "O"), ("in", "O"), ("Rome", "B-LOC")],
         [("The", "O"), ("river", "O"), ("flows", "O")]] * 3
  ru = [[("Анна", "B-PER"), ("живёт", "O"), ("в", "O"), ("Москве", "B-LOC")]]
  tags = lambda rows: "".join("".join(f"{w}\t{t}\n" for w, t in s) + "\n"
                              for s in rows)
  _write(root / "panx/train-en.tsv", tags(ner))
  _write(root / "panx/dev-en.tsv", tags(ner))
  _write(root / "panx/dev-ru.tsv", tags(ru))
  en_qa = [("The river flows past the old mill near the town.",
            [("q1", "What does the river flow past?", "the old mill")]),
           ("Anna lives in Rome and works at the mill.",
            [("q2", "Where does Anna live?", "Rome")])]
  ar_qa = [("يمر النهر بجانب الطاحونة القديمة.",
            [("q3", "بجانب ماذا يمر النهر؟", "الطاحونة القديمة")])]
  _write(root / "squad/train-v1.1.json", _squad(en_qa * 3))
  _write(root / "mlqa/MLQA_V1/dev/dev-context-en-question-en.json", _squad(en_qa))
  _write(root / "mlqa/MLQA_V1/dev/dev-context-ar-question-ar.json", _squad(ar_qa))


# Runs each fine-tuning through the command's own flags, in one process
# (one TensorFlow import for the three task types).
_DRIVER = """
import json, sys
from absl import flags
from rembert_tf.cli import finetune
for argv in json.loads(sys.argv[1]):
  flags.FLAGS.unparse_flags()
  flags.FLAGS(["rembert-finetune"] + argv)
  finetune.main([])
"""

TASKS = {"xnli": ("en,es", SEQ_LENGTH), "panx": ("en,ru", SEQ_LENGTH),
         "mlqa": ("en,ar", 64)}


def test_finetune_each_task_type_from_the_converted_release(converted, tmp_path):
  # The fine-tuning on Model Garden tasks (task-type registry) reads special
  # ids by piece name; the one before it assumed this project's 0-4 layout.
  pytest.importorskip("rembert_tf.finetuning.task_types")
  _, _, out = converted
  download = tmp_path / "download"
  write_download(download)
  runs = []
  for task, (languages, seq_length) in TASKS.items():
    runs.append([f"--task={task}", f"--data_dir={download}",
                 f"--init_checkpoint={out}", f"--output_dir={tmp_path / task}",
                 f"--languages={languages}", "--splits=dev",
                 f"--seq_length={seq_length}", "--num_train_steps=2",
                 "--train_batch_size=4", "--eval_batch_size=4",
                 "--learning_rate=1e-4", "--strategy=one_device"])
  env = dict(os.environ, PYTHONPATH=str(REPO), TF_CPP_MIN_LOG_LEVEL="2")
  done = subprocess.run([sys.executable, "-c", _DRIVER, json.dumps(runs)],
                        capture_output=True, text=True, env=env, timeout=900,
                        check=False)
  assert done.returncode == 0, done.stderr[-3000:]
  for task, (languages, _) in TASKS.items():
    (predictions,) = (tmp_path / task).glob(f"runs/*/predictions")
    labels = [p.parent for p in (tmp_path / task).glob(f"**/labels/{task}")]
    assert labels, f"{task}: no labels folder"
    scores = xtreme_scorer.evaluate_folders(
        str(predictions), str(labels[0]), tasks=[task], split="dev")
    metric = "f1" if task in ("panx", "mlqa") else "accuracy"
    for lang in languages.split(","):
      value = scores[task][metric][lang]
      assert 0.0 <= value <= 100.0, (task, lang, value)


def test_continue_pretraining_from_the_converted_release(converted, tmp_path):
  """Pre-training starts from the release's encoder AND output side.

  The first step's MLM loss equals the loss a forward pass of the converted
  weights gives on the same batch; a fresh output side would give another.
  """
  from rembert_tf.data import pretraining_record_creation  # pylint: disable=g-import-not-at-top
  from rembert_tf.modeling import rembert_pretrainer  # pylint: disable=g-import-not-at-top
  from rembert_tf.pretraining import experiments  # pylint: disable=g-import-not-at-top
  from rembert_tf.pretraining import masked_lm_task  # pylint: disable=g-import-not-at-top
  from rembert_tf.pretraining import runner  # pylint: disable=g-import-not-at-top

  cfg, _, out = converted
  special = tokenizer.SpecialTokens.from_model(out / "sentencepiece.model")
  rng = np.random.default_rng(5)
  examples = [list(rng.integers(special.mask_id + 1, cfg.vocab_size,
                                size=rng.integers(8, 24))) for _ in range(32)]
  pretraining_record_creation.write_pretraining_records(
      str(tmp_path / "records"), examples, seq_length=SEQ_LENGTH,
      max_predictions_per_seq=4, special=special, seed=1)
  config = experiments.load_experiment_config([], {
      "task": {
          "model_preset": str(out / checkpoint_layout.MODEL_CONFIG_FILE),
          "init_checkpoint": str(out),
          "train_data": {"input_path": str(tmp_path / "records" / "*.tfrecord"),
                         "global_batch_size": 8, "seq_length": SEQ_LENGTH,
                         "max_predictions_per_seq": 4, "seed": 3,
                         "is_training": True}},
      "trainer": {"train_steps": 1, "steps_per_loop": 1, "summary_interval": 1,
                  "checkpoint_interval": 1, "validation_interval": 100,
                  "optimizer_config": {
                      "learning_rate": {"constant": {"learning_rate": 1e-4}}}}})

  task, batch = pretrain_testlib.first_batch(config)  # (see its comment)
  inputs = {k: batch[k] for k in masked_lm_task.MODEL_INPUT_KEYS}
  released = rembert_pretrainer.build_pretrainer(config.task.model)
  pretrainer_restore.restore_pretrainer(released, str(out))
  expected = float(task.build_losses(batch, released(inputs)))
  fresh = rembert_pretrainer.build_pretrainer(config.task.model)
  checkpoint_restore.restore_encoder(fresh.encoder, str(out))  # encoder only
  encoder_only_loss = float(task.build_losses(batch, fresh(inputs)))

  metrics = runner.run(config, str(tmp_path / "continued"), mode="train",
                       strategy="one_device", deterministic=True)
  assert metrics["global_step"] == 1
  assert metrics["train_loss"] == pytest.approx(
      expected, rel=pretrain_testlib.STEP_ONE_LOSS_REL)
  assert abs(encoder_only_loss - expected) > 1e-3  # measured: 1.02
