r"""Memory of the XLA-compiled training step: rembert_tf against Model Garden.

Compiles the training step (forward with `training=True`, a loss, the
gradients of every trainable variable and of the block's input, as the
pre-training task's `tf.function(jit_compile=True)` computes them) of

| kind    | rembert_tf                         | Model Garden                                      |
| ------- | ---------------------------------- | ------------------------------------------------- |
| block   | `RemBertTransformerBlock`          | `layers.TransformerEncoderBlock`, same arguments  |
| encoder | `RemBertEncoder`                   | `networks.BertEncoderV2` with `embedding_width` = E_in (its factorised embedding: word/position/type tables of width E_in, LayerNorm, E_in -> hidden projection, the same blocks, pooler) |

for float32 and mixed_bfloat16, dropout 0 and 0.1 (hidden and attention),
and reads XLA's buffer assignment of each step: `Total bytes used`, the sum
of every buffer the compiled program allocates (its parameters, i.e. the
weights and the batch, its outputs and its temporaries, after XLA's buffer
sharing). The step is compiled, never run
(`experimental_get_compiler_ir(...)(stage="optimized_hlo")` runs the whole
XLA pipeline, buffer assignment included), so the released size compiles on
a small machine. XLA writes the buffer assignment only when
`XLA_FLAGS=--xla_dump_to=DIR --xla_dump_hlo_as_text` is set before
TensorFlow initialises: this script sets it (a temporary DIR) before
importing TensorFlow, so run it as a program, not as an import.

The block's input is [batch, seq, hidden] with a [batch, seq, seq] attention
mask (the mask Model Garden's encoder hands its blocks), 25% padding in
every example; the encoder's is ids, mask and types of [batch, seq]. The
loss is a weighted sum of the block's output / the encoder's sequence
output (pre-training's MLM head reads the sequence output only, so neither
pooler gets a gradient); gradients are dense (the word embedding's
IndexedSlices converted, as the pre-training task does).

Shapes (`--shape`):
- `released`: the released RemBERT's block (hidden 1152, 18 heads, FFN
  4608) at batch 8, seq 512; the encoder rows at the released widths (vocab
  250300, E_in 256) with `--encoder_layers` layers (default 2).
- `ci`: hidden 64, 4 heads, FFN 256 at batch 2, seq 128 (the released
  shape's ratios: attention / activations 8, FFN / hidden 4), vocab 1000,
  E_in 32: what tests/modeling/compiled_memory_test.py checks.

Example:
```bash
TF_CPP_MIN_LOG_LEVEL=2 .venv/bin/python bench/compiled_memory.py --json_out memory.json
.venv/bin/python bench/compiled_memory.py --shape ci --kinds block --precisions float32
```
"""
import json
import os
import re
import shutil
import sys
import tempfile
import time

if "tensorflow" in sys.modules:
  raise RuntimeError("bench/compiled_memory.py sets XLA_FLAGS before "
                     "TensorFlow starts: run it as a program.")
_DUMP_DIR = tempfile.mkdtemp(prefix="xla_buffer_assignment-")
os.environ["XLA_FLAGS"] = " ".join(filter(None, [
    os.environ.get("XLA_FLAGS", ""), f"--xla_dump_to={_DUMP_DIR}",
    "--xla_dump_hlo_as_text",
    # LLVM's optimisation changes the machine code, not the buffers: off, the
    # step compiles sooner with the same buffer assignment.
    "--xla_backend_optimization_level=0",
    "--xla_llvm_disable_expensive_passes=true"]))
os.environ.setdefault("TF_USE_LEGACY_KERAS", "1")
os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")

from absl import flags
import numpy as np
import tensorflow as tf
import tf_keras

REPO = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
if REPO not in sys.path:  # measure the checkout this script lives in
  sys.path.insert(1, REPO)

from official.nlp.modeling import layers  # pylint: disable=g-import-not-at-top,wrong-import-position
from official.nlp.modeling import networks

from rembert_tf.modeling import activations  # pylint: disable=g-import-not-at-top,wrong-import-position
from rembert_tf.modeling import rembert_encoder
from rembert_tf.modeling import transformer_block

SHAPES = dict(
    released=dict(batch=8, seq=512, hidden=1152, heads=18, inner=4608,
                  vocab=250300, embedding=256),
    ci=dict(batch=2, seq=128, hidden=64, heads=4, inner=256, vocab=1000,
            embedding=32),
)
KINDS = ("block", "encoder")
IMPLEMENTATIONS = ("rembert_tf", "model_garden")

FLAGS = flags.FLAGS
flags.DEFINE_enum("shape", "released", list(SHAPES), "Sizes (see above).")
flags.DEFINE_list("kinds", list(KINDS), "block, encoder.")
flags.DEFINE_list("precisions", ["float32", "mixed_bfloat16"],
                  "Keras mixed-precision policies.")
flags.DEFINE_list("dropouts", ["0", "0.1"], "Hidden and attention dropout.")
flags.DEFINE_integer("encoder_layers", 2, "Transformer blocks per encoder.")
flags.DEFINE_string("json_out", "", "Also write the rows as JSON here.")


# === the models and their training steps ===
def build_block(implementation, shape, dropout):
  cls = (transformer_block.RemBertTransformerBlock
         if implementation == "rembert_tf" else layers.TransformerEncoderBlock)
  return cls(num_attention_heads=shape["heads"], inner_dim=shape["inner"],
             inner_activation=activations.gelu_exact, norm_first=False,
             norm_epsilon=1e-12, output_dropout=dropout,
             attention_dropout=dropout, name="transformer/layer_0")


def build_encoder(implementation, shape, dropout, num_layers):
  common = dict(vocab_size=shape["vocab"], hidden_size=shape["hidden"],
                num_layers=num_layers, num_attention_heads=shape["heads"],
                inner_dim=shape["inner"], output_dropout=dropout,
                attention_dropout=dropout,
                max_sequence_length=shape["seq"], type_vocab_size=2,
                name="encoder")
  if implementation == "rembert_tf":
    return rembert_encoder.RemBertEncoder(
        input_embedding_size=shape["embedding"], hidden_act="gelu",
        layer_norm_eps=1e-12, **common)
  return networks.BertEncoderV2(
      embedding_width=shape["embedding"],
      inner_activation=activations.gelu_exact, **common)


def block_inputs(shape):
  rng = np.random.default_rng(0)
  batch, seq = shape["batch"], shape["seq"]
  x = tf.constant(rng.normal(size=(batch, seq, shape["hidden"])), tf.float32)
  real = np.arange(seq) < seq - seq // 4           # 25% padding
  mask = np.broadcast_to(real[None, None, :], (batch, seq, seq))
  return [x, tf.constant(mask, tf.float32)]


def encoder_inputs(shape):
  rng = np.random.default_rng(0)
  batch, seq = shape["batch"], shape["seq"]
  mask = np.broadcast_to(np.arange(seq) < seq - seq // 4, (batch, seq))
  ids = rng.integers(1, shape["vocab"], (batch, seq)) * mask
  types = (np.arange(seq) >= seq // 2) * mask
  return dict(input_word_ids=tf.constant(ids, tf.int32),
              input_mask=tf.constant(mask, tf.int32),
              input_type_ids=tf.constant(types, tf.int32))


def training_step(model, kind, hidden, name):
  """The compiled forward + backward of `model` (named `name` for the dump)."""
  weights = tf.sin(tf.range(hidden, dtype=tf.float32))

  def step(inputs):
    with tf.GradientTape() as tape:
      sources = list(model.trainable_variables)
      if kind == "block":
        tape.watch(inputs[0])
        sources.insert(0, inputs[0])
        outputs = model(inputs, training=True)
      else:
        outputs = model(inputs, training=True)["sequence_output"]
      loss = tf.reduce_sum(tf.cast(outputs, tf.float32) * weights)
    grads = tape.gradient(loss, sources)
    return loss, [tf.convert_to_tensor(g) for g in grads if g is not None]

  step.__name__ = name
  return tf.function(step, jit_compile=True)


# === XLA's buffer assignment ===
_TOTAL = re.compile(r"^Total bytes used: (\d+)", re.M)
_ALLOCATION = re.compile(r"^allocation \d+: size (\d+), (.*)$", re.M)


def buffer_assignment(function_name):
  """(total bytes, parameter bytes) of the compiled `function_name`."""
  pattern = re.compile(rf"\.a_inference_{re.escape(function_name)}_\d+__.*"
                       r"buffer-assignment\.txt$")
  found = [f for f in os.listdir(_DUMP_DIR) if pattern.search(f)]
  if len(found) != 1:
    raise RuntimeError(f"{_DUMP_DIR}: expected one buffer assignment of "
                       f"{function_name}, found {found}")
  with open(os.path.join(_DUMP_DIR, found[0])) as f:
    text = f.read()
  total = int(_TOTAL.search(text).group(1))
  parameters = sum(int(size) for size, what in _ALLOCATION.findall(text)
                   if what.startswith("parameter"))
  return total, parameters


def measure(kind, implementation, precision, dropout, shape, index):
  """Compiles one training step -> (total bytes, parameter bytes, seconds)."""
  tf_keras.mixed_precision.set_global_policy(precision)
  try:
    if kind == "block":
      model, inputs = build_block(implementation, shape, dropout), block_inputs(shape)
    else:
      model = build_encoder(implementation, shape, dropout, FLAGS.encoder_layers)
      inputs = encoder_inputs(shape)
    model(inputs)  # builds the variables
    name = f"compiled_memory_case_{index}"
    start = time.time()
    training_step(model, kind, shape["hidden"], name).experimental_get_compiler_ir(
        inputs)(stage="optimized_hlo")
    seconds = time.time() - start
  finally:
    tf_keras.mixed_precision.set_global_policy("float32")
  return buffer_assignment(name) + (seconds,)


def main(argv):
  del argv
  shape = SHAPES[FLAGS.shape]
  rows, index = [], 0
  try:
    for kind in FLAGS.kinds:
      for precision in FLAGS.precisions:
        for dropout in (float(d) for d in FLAGS.dropouts):
          row = dict(kind=kind, precision=precision, dropout=dropout)
          for implementation in IMPLEMENTATIONS:
            index += 1
            total, parameters, seconds = measure(kind, implementation,
                                                 precision, dropout, shape,
                                                 index)
            row[implementation] = dict(total_bytes=total,
                                       parameter_bytes=parameters,
                                       compile_seconds=round(seconds, 1))
          row["ratio"] = (row["rembert_tf"]["total_bytes"]
                          / row["model_garden"]["total_bytes"])
          rows.append(row)
          print(f"{kind} {precision} dropout {dropout}: rembert_tf "
                f"{row['rembert_tf']['total_bytes'] / 2**20:.1f} MiB, Model "
                f"Garden {row['model_garden']['total_bytes'] / 2**20:.1f} MiB "
                f"({row['ratio']:.2f}x)", flush=True)
  finally:
    shutil.rmtree(_DUMP_DIR, ignore_errors=True)
  print_table(shape, rows)
  if FLAGS.json_out:
    with open(FLAGS.json_out, "w") as f:
      json.dump(dict(shape=dict(shape, name=FLAGS.shape,
                                encoder_layers=FLAGS.encoder_layers),
                     device="CPU (XLA)", rows=rows), f, indent=2)


def print_table(shape, rows):
  print(f"\nshape {FLAGS.shape}: {shape}, encoder layers "
        f"{FLAGS.encoder_layers}; XLA buffer assignment, total bytes\n")
  print("| step | precision | dropout | rembert_tf | Model Garden | ratio | "
        "rembert_tf without parameters | Model Garden without parameters |")
  print("| --- | --- | ---: | ---: | ---: | ---: | ---: | ---: |")
  for row in rows:
    ours, theirs = row["rembert_tf"], row["model_garden"]
    rest = lambda r: (r["total_bytes"] - r["parameter_bytes"]) / 2**20
    print(f"| {row['kind']} | {row['precision']} | {row['dropout']:g} | "
          f"{ours['total_bytes'] / 2**20:.1f} MiB | "
          f"{theirs['total_bytes'] / 2**20:.1f} MiB | {row['ratio']:.2f}x | "
          f"{rest(ours):.1f} MiB | {rest(theirs):.1f} MiB |")


if __name__ == "__main__":
  import bench_command  # pylint: disable=g-import-not-at-top
  bench_command.run(main)
