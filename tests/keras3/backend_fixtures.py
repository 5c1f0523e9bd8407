"""The fixtures keras_backends_test.py's Keras 3 processes read, written by the project's TensorFlow code.

| fixture          | source                                          | checked against                     |
| ---------------- | ----------------------------------------------- | ----------------------------------- |
| tiny             | rembert_tf checkpoint with the output side      | TF encoder and MLM logits           |
| released         | TF1 checkpoint in the released layout           | TF encoder and MLM logits           |
| same_width       | Hugging Face safetensors, E_in == hidden        | TF encoder                          |
| no_pooler        | the same without the pooler (an MLM export)     | TF encoder's sequence output        |
| xtreme           | the fine-tuning tests' one-layer checkpoint     | PAN-X and XQuAD records, the scorer |
| tokenizers       | released and project SentencePiece layouts     | the preprocessing SavedModel (model)|
| hf/NAME, mlm     | transformers' `save_pretrained` (transformers_fixtures.py), its masked-LM folder converted | transformers' outputs |

Each preset comes from `rembert-convert --to keras_hub` (`convert`: one
process for all of them); `damaged` breaks a copy of the masked-LM preset
one way per case.
"""
import json
import os
import pathlib
import shutil
import subprocess
import sys

import numpy as np
import tensorflow as tf

import testlib
from conversion import conversion_testlib
from rembert_tf.checkpoints import checkpoint_layout
from rembert_tf.checkpoints import checkpoint_writing
from rembert_tf.conversion import weight_layout
from rembert_tf.data import tokenizer
from rembert_tf.evaluation import xtreme_tasks
from rembert_tf.export import preprocessor_export
from rembert_tf.data import finetuning_data
from rembert_tf.data import xtreme_records
from rembert_tf.data import xtreme_readers
from rembert_tf.modeling import rembert_pretrainer

SEQ_LENGTH = 24   # packed length of the tokenizer checks
# XTREME windows small enough that XQuAD contexts span several windows.
TAGGING_LENGTH, SPAN_LENGTH, DOC_STRIDE, MAX_QUERY = 64, 32, 8, 12
TEXTS = [
    "The cat sleeps on the red mat.", "Der Hund läuft schnell über die Straße.",
    "El perro corre en el parque.", "Привет, как дела? Всё хорошо.",
    "Η γάτα κοιμάται στο χαλί.", "القطة تنام على الحصيرة الحمراء.",
    "बिल्ली लाल चटाई पर सोती है।", "猫睡在红色的垫子上。北京是中国的首都。",
    "Tiếng Việt có dấu: Hà Nội.", "日本語のテキストと한국어 텍스트",
    "emoji 😀 and\ttabs  and double  spaces", "",
    " ".join(["A long sentence that needs truncation."] * 6)]


REPO = pathlib.Path(__file__).resolve().parents[2]


def python_env(**extra):
  """This process's environment for a Keras 3 child: the checkout on the
  path, without tf-keras' switch."""
  env = dict(os.environ, PYTHONPATH=os.pathsep.join(
      [str(REPO)] + [p for p in [os.environ.get("PYTHONPATH")] if p]))
  env.pop("TF_USE_LEGACY_KERAS", None)
  env.update(extra)
  return env


def start(args, log: pathlib.Path, **extra_env) -> subprocess.Popen:
  """Starts a child process (children run side by side: most of their time
  is importing TensorFlow and Keras, one core each)."""
  out = log.open("w")
  process = subprocess.Popen([str(a) for a in args], stdout=out,
                             stderr=subprocess.STDOUT, text=True, cwd=REPO,
                             env=python_env(**extra_env))
  process.log = log
  return process


def finish(process: subprocess.Popen, timeout=900) -> str:
  """Waits for a child; its output, asserting it succeeded."""
  try:
    code = process.wait(timeout=timeout)
  except subprocess.TimeoutExpired:
    process.kill()
    raise
  output = process.log.read_text()
  assert code == 0, output[-6000:]
  return output


# --- references of the project's TensorFlow code --------------------------------


def _inputs(vocab_size, seed):
  rng = np.random.default_rng(seed)
  ids = rng.integers(5, vocab_size, size=(3, 20)).astype(np.int32)
  mask = np.ones_like(ids)
  mask[1, 13:], mask[2, 6:] = 0, 0
  types = np.zeros_like(ids)
  types[0, 9:] = 1
  positions = np.array([[1, 2, 3, 0], [4, 5, 9, 12], [1, 1, 2, 5]], np.int32)
  return dict(ids=ids, mask=mask, types=types, positions=positions)


def _reference(pretrainer, inputs):
  outputs = pretrainer(dict(input_word_ids=inputs["ids"],
                            input_mask=inputs["mask"],
                            input_type_ids=inputs["types"],
                            masked_lm_positions=inputs["positions"]))
  return dict(inputs, sequence_output=outputs["sequence_output"].numpy(),
              pooled_output=outputs["pooled_output"].numpy(),
              mlm_logits=outputs["mlm_logits"].numpy())


def tiny_source(folder, cfg, sp_model, seed):
  """A rembert_tf checkpoint directory (encoder + output side) and its
  reference outputs."""
  pretrainer = rembert_pretrainer.build_pretrainer(cfg)
  conversion_testlib.randomize(pretrainer.variables, seed)
  checkpoint_writing.write_checkpoint_dir(folder, cfg, pretrainer.encoder,
                                          pretrainer)
  tokenizer.copy_sentencepiece(
      str(sp_model), os.path.join(folder, checkpoint_layout.SENTENCEPIECE_FILE))
  return _reference(pretrainer, _inputs(cfg.vocab_size, seed))


def released_source(folder, cfg):
  """A TF1 checkpoint in the released layout, its reference outputs and the
  encoder's parameter count."""
  folder.mkdir(parents=True)
  canonical, prefix = conversion_testlib.write_released_checkpoint(folder, cfg)
  pretrainer = rembert_pretrainer.build_pretrainer(cfg)
  for slot in weight_layout.slots_for_pretrainer(pretrainer):
    slot.assign(canonical[slot.name])
  return (prefix, _reference(pretrainer, _inputs(cfg.vocab_size, 5)),
          pretrainer.encoder.count_params())


def preprocessing_reference(sp_model, saved_model_dir=None):
  """Ids of the preprocessing model: single texts and pairs. With a
  directory, of the exported SavedModel reloaded; else of the Keras model it
  saves (the same graph, without the export's cost)."""
  if saved_model_dir is None:
    model = preprocessor_export.create_preprocessor(sp_model, SEQ_LENGTH)
  else:
    preprocessor_export.export_preprocessor(sp_model, saved_model_dir,
                                            seq_length=SEQ_LENGTH)
    model = tf.saved_model.load(str(saved_model_dir))
  texts = tf.constant(TEXTS)
  single = model(texts)
  tokens = model.tokenize(texts)
  seconds = tf.constant(TEXTS[3:] + TEXTS[:3])
  # The wrapper's __call__ is an instance attribute: callable as the
  # SavedModel's, called explicitly on the in-memory model.
  pairs = model.bert_pack_inputs.__call__([tokens, model.tokenize(seconds)],
                                          seq_length=tf.constant(SEQ_LENGTH))
  return {"pieces": [list(map(int, row)) for row in tokens.to_list()],
          **{f"single_{k}": v.numpy().tolist() for k, v in single.items()},
          **{f"pair_{k}": v.numpy().tolist() for k, v in pairs.items()}}


def without_pooler(hf_dir, out_dir):
  """A Hugging Face directory without the pooler (as RemBertForMaskedLM
  saves it)."""
  from safetensors import numpy as safetensors_numpy  # pylint: disable=g-import-not-at-top
  out_dir.mkdir()
  tensors = safetensors_numpy.load_file(hf_dir / "model.safetensors")
  safetensors_numpy.save_file(
      {k: v for k, v in tensors.items() if ".pooler." not in k},
      out_dir / "model.safetensors", metadata={"format": "pt"})
  shutil.copy(hf_dir / "config.json", out_dir / "config.json")


# --- XTREME inputs, records and gold labels ---------------------------------------


def _records(records_dir, task_type, seq_length, name):
  spec = xtreme_records.feature_spec(task_type, seq_length)
  rows = [tf.io.parse_single_example(r, spec) for r in
          tf.data.TFRecordDataset(str(records_dir / f"{name}.tfrecord"))]
  return {key: np.stack([r[key].numpy() for r in rows]).tolist()
          for key in spec}


def xtreme(download_dir, sp_model, root):
  """The project's PAN-X and XQuAD records (and gold labels) and the raw
  examples the keras-hub tasks read, as JSON."""
  records = root / "records"
  finetuning_data.create_finetuning_data(
      "panx", download_dir, sp_model, records, seq_length=TAGGING_LENGTH,
      splits=("dev",), progress=lambda _: None)
  finetuning_data.create_finetuning_data(
      "xquad", download_dir, sp_model, records, seq_length=SPAN_LENGTH,
      doc_stride=DOC_STRIDE, max_query_length=MAX_QUERY, splits=("test",),
      progress=lambda _: None)
  panx, xquad, xnli = (xtreme_tasks.get(t) for t in ("panx", "xquad", "xnli"))
  label_ids = {label: i for i, label in enumerate(panx.labels)}
  train = xtreme_readers.read_tagged_sentences(
      panx.download.path(download_dir, "train"), panx)
  squad = xtreme_readers.read_squad_examples(
      xquad.download.path(download_dir, "train"), xquad, is_training=True)
  languages = {"panx": ["en", "de", "ar"], "xquad": ["en", "zh", "ar"]}
  data = {
      "labels": list(panx.labels), "tagging_length": TAGGING_LENGTH,
      "span_length": SPAN_LENGTH, "doc_stride": DOC_STRIDE,
      "max_query_length": MAX_QUERY,
      "xnli_train": [[e.text_a, e.text_b, xnli.labels.index(e.label)]
                     for e in xtreme_readers.read_sentence_pairs(
                         xnli.download.path(download_dir, "train"), xnli)],
      "panx_train": [[w, [label_ids[t] for t in tags]] for w, tags in train],
      "panx_dev": {lang: [w for w, _ in xtreme_readers.read_tagged_sentences(
          panx.download.path(download_dir, "dev", lang), panx)]
                   for lang in languages["panx"]},
      "squad_train": [[e.question_text, e.paragraph_text, e.start_position,
                       e.orig_answer_text] for e in squad],
      "xquad_test": {lang: [[e.qas_id, e.question_text, e.paragraph_text]
                            for e in xtreme_readers.read_squad_examples(
                                xquad.download.path(download_dir, "test", lang), xquad,
                                is_training=False)]
                     for lang in languages["xquad"]},
      "records": {
          "panx_train": _records(records / "panx", "tagging", TAGGING_LENGTH,
                                 "train-en"),
          "panx_dev_en": _records(records / "panx", "tagging", TAGGING_LENGTH,
                                  "dev-en"),
          "squad_train": _records(records / "xquad", "span", SPAN_LENGTH,
                                  "train-en"),
          "xquad_test_zh": _records(records / "xquad", "span", SPAN_LENGTH,
                                    "test-zh")}}
  (root / "xtreme.json").write_text(json.dumps(data, ensure_ascii=False))
  return {"panx": records / "panx" / "labels", "xquad": records / "xquad" /
          "labels"}


# --- conversion -----------------------------------------------------------------


# One process for every preset (each process pays for importing TensorFlow
# and Keras): the converter's calls, then `rembert-convert` as its console
# script runs it (its run(), which exits with the command's status).
_CONVERT_DRIVER = """
import json, sys
from rembert_tf.cli import convert_checkpoint as command
from rembert_tf.conversion import converter
for kwargs in json.loads(sys.argv[1]):
  converter.convert_checkpoint(**kwargs)
sys.argv = ["rembert-convert", *json.loads(sys.argv[2])]
command.run()
"""


def convert(sources, presets, logs):
  """The released TF1 checkpoint through the command line, the others
  through the converter, in one process (sources["mlm"]: a transformers
  folder, or None)."""
  runs = [dict(from_format="rembert_tf", to_format="keras_hub",
               input_path=str(sources["tiny"]), output_dir=str(presets / "tiny")),
          dict(from_format="hf", to_format="keras_hub",
               input_path=str(sources["same_width"]),
               output_dir=str(presets / "same_width"),
               sp_model=str(testlib.sentencepiece_model())),
          dict(from_format="hf", to_format="keras_hub",
               input_path=str(sources["no_pooler"]),
               output_dir=str(presets / "no_pooler"),
               allow_missing_pooler=True),
          dict(from_format="rembert_tf", to_format="keras_hub",
               input_path=str(sources["xtreme"]),
               output_dir=str(presets / "xtreme"))]
  if sources["mlm"]:   # transformers' RemBertForMaskedLM, with its output side
    runs.append(dict(from_format="hf", to_format="keras_hub",
                     input_path=str(sources["mlm"]),
                     output_dir=str(presets / "mlm"),
                     sp_model=str(testlib.sentencepiece_model()),
                     allow_missing_pooler=True, with_output_side=True))
  command = ["--from=tf1", "--to=keras_hub",
             f"--checkpoint={sources['released']}",
             f"--sentencepiece_model={testlib.released_layout_sentencepiece()}",
             "--with_output_side", f"--output_dir={presets / 'released'}"]
  finish(start([sys.executable, "-c", _CONVERT_DRIVER, json.dumps(runs),
                json.dumps(command)], logs / "convert.log"))


# --- folders transformers writes, and damaged presets -------------------------


def start_transformers_folders(root: pathlib.Path) -> subprocess.Popen:
  """transformers_fixtures.py (CPU PyTorch): root/hf/NAME and
  root/reference.npz; runs while this process writes the other fixtures."""
  return start([sys.executable, REPO / "tests" / "keras3" /
                "transformers_fixtures.py", root,
                testlib.SENTENCEPIECE_VOCAB_SIZE], root / "transformers.log")


# On sys.path first in the JAX and PyTorch processes of the transformers
# checks: TensorFlow is then as absent as if it were not installed
# (`find_spec` finds nothing).
NO_TENSORFLOW = '''import importlib.machinery
_find_spec = importlib.machinery.PathFinder.find_spec.__func__
def _without_tensorflow(cls, name, path=None, target=None):
  if name.split(".")[0] in ("tensorflow", "tf_keras", "tensorflow_text"):
    return None
  return _find_spec(cls, name, path, target)
importlib.machinery.PathFinder.find_spec = classmethod(_without_tensorflow)
'''


def damaged(preset: pathlib.Path, tmp: pathlib.Path):
  """name -> (folder, the file its line names)."""
  cases = {}
  for name in ("huge", "no_head", "empty", "config", "vocabulary"):
    cases[name] = pathlib.Path(shutil.copytree(preset, tmp / name))
  weights = cases["huge"] / "model.weights.h5"
  data = bytearray(weights.read_bytes())
  middle = len(data) // 2
  data[middle:middle + 4096] = np.full([1024], 1e30, "<f4").tobytes()
  weights.write_bytes(bytes(data))
  (cases["no_head"] / "task.weights.h5").unlink()
  (cases["empty"] / "model.weights.h5").write_bytes(b"")
  config = cases["config"] / "config.json"
  config.write_text(config.read_text()[:100])
  spm = cases["vocabulary"] / "assets" / "tokenizer" / "vocabulary.spm"
  spm.write_bytes(b"")
  return {"huge": (cases["huge"], weights),
          "no_head": (cases["no_head"], cases["no_head"] / "task.weights.h5"),
          "empty": (cases["empty"], cases["empty"] / "model.weights.h5"),
          "config": (cases["config"], config),
          "vocabulary": (cases["vocabulary"], spm)}


# One process (each pays for importing TensorFlow and Keras): the converter
# on every damaged preset but one, then `rembert-convert` as its console
# script runs it (its run(), which exits with the command's status) on that
# one.
CONVERT_EACH = """
import json, sys
from rembert_tf.cli import convert_checkpoint as command
from rembert_tf.common import errors
from rembert_tf.conversion import converter
lines = {}
for name, folder, out in json.loads(sys.argv[1]):
  try:
    converter.convert_checkpoint("keras_hub", "rembert_tf", folder, out)
    lines[name] = None
  except errors.RemBertError as e:
    lines[name] = str(e)
print(json.dumps(lines), flush=True)
sys.argv = ["rembert-convert", *json.loads(sys.argv[2])]
command.run()
"""
