"""Packaging for rembert_tf: RemBERT (decoupled embeddings) on TensorFlow 2 / Model Garden."""
import os
import runpy

import setuptools

# Pinned to the TF 2.20 line: Model Garden 2.20 is built and tested against
# TF 2.20 and the Keras 2 API (tf-keras); newer TF lines change Keras defaults.
INSTALL_REQUIRES = [
    "tensorflow~=2.20.0",
    "tf-keras~=2.20.0",
    "tf-models-official~=2.20.0",
    "tensorflow-text~=2.20.0",
    "tensorflow-hub~=0.16.1",
    # tensorflow_hub imports pkg_resources, which setuptools 81 removed.
    "setuptools<81",
    "tensorflow-datasets~=4.9",
    # What `tfds build` (the command every TFDS error line suggests) imports
    # beyond tensorflow-datasets' own requirements: its CLI imports
    # mlcroissant, and a builder's preparation importlib_resources (declared
    # by tensorflow-datasets for Python < 3.9 only).
    "mlcroissant>=1.0.9",
    "importlib_resources",
    "sentencepiece~=0.2.0",
    "absl-py>=1.4",
    "pyyaml>=6.0",
    "numpy>=1.26,<3",
    "seqeval~=1.2.2",
    "safetensors~=0.8",
    "matplotlib>=3.8",   # the ablation suite's and layer similarity's PNG figures
    # The trainers' summaries (orbit, Model Garden) write through TensorBoard's
    # summary ops; TensorFlow itself stops requiring it after 2.20.
    "tensorboard~=2.20.0",
]

# The core runs on Python 3.10-3.12; the `keras` extra's packages (keras-hub
# 0.32, Keras 3.15, JAX 0.10) require Python 3.11+, so on 3.10 the extra
# installs nothing and `--to keras_hub` says it needs Python 3.11+.
KERAS_EXTRA_MARKER = '; python_version >= "3.11"'
KERAS_EXTRA = ["keras-hub>=0.32,<0.33", "keras>=3.15,<4", "jax[cpu]>=0.10,<0.11"]

# The model presets and experiment YAMLs are edited in the top-level configs/
# and shipped inside the package as rembert_tf/configs/ (package data, read by
# rembert_tf.modeling.rembert_config.config_root with importlib.resources).
CONFIGS_PACKAGE = "rembert_tf.configs"

# The console scripts and the module of each: one table,
# rembert_tf/common/command_names.py (the commands name themselves from it), read
# here without importing the package.
COMMAND_NAMES = runpy.run_path(os.path.join(
    os.path.dirname(os.path.abspath(__file__)), "rembert_tf", "common",
    "command_names.py"))
CONSOLE_SCRIPTS = [f"{name} = {module}:run"
                   for name, module in COMMAND_NAMES["CONSOLE_SCRIPTS"].items()]

setuptools.setup(
    name="rembert_tf",
    version="0.1.0",
    description="RemBERT (Rethinking Embedding Coupling) for TensorFlow 2 / Keras on Model Garden",
    packages=(setuptools.find_packages(include=["rembert_tf", "rembert_tf.*"])
              + [CONFIGS_PACKAGE]),
    package_dir={CONFIGS_PACKAGE: "configs"},
    package_data={CONFIGS_PACKAGE: ["models/*.yaml", "experiments/*.yaml"]},
    python_requires=">=3.10,<3.13",
    install_requires=INSTALL_REQUIRES,
    extras_require={
        "test": ["pytest>=8.0", "pytest-xdist>=3.5"],
        # Record creation and the SentencePiece sample on Apache Beam
        # (Dataflow, Flink, Spark, Beam's local runner); 2.60+ runs on
        # Python 3.11 beside TF 2.20's protobuf and numpy.
        "beam": ["apache-beam>=2.60,<3"],
        # rembert_tf.keras_hub and `rembert-convert --to keras_hub`: Keras 3
        # (installed beside tf-keras) with keras-hub, and JAX for the JAX
        # backend (CPU wheels; a GPU needs jax[cuda12] instead). Python 3.11+.
        "keras": [package + KERAS_EXTRA_MARKER for package in KERAS_EXTRA],
    },
    entry_points={"console_scripts": CONSOLE_SCRIPTS},
)
