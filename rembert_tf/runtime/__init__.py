"""The training runtime both trainers share, on tf.distribute, orbit and Model Garden."""
