"""The training runtime both trainers share (tf.distribute, orbit, Model Garden)."""
