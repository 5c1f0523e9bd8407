"""Layer similarity (thin wrapper of `rembert_tf.cli.layer_similarity`; same flags).

  python tools/layer_similarity.py --checkpoint_a PRE --checkpoint_b FT \
    --sentences sentences.txt --output_dir cka
"""
from rembert_tf.cli import layer_similarity

if __name__ == "__main__":
  layer_similarity.run()
