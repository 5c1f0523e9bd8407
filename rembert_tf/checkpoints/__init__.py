"""Checkpoints, in one place, between the model core and its users (it imports
only `rembert_tf.modeling` and `rembert_tf.common`): the directory layout,
`resolve(source)` and writing (`checkpoint_layout`), whether a checkpoint is
whole (`checkpoint_integrity`), restoring into the models
(`checkpoint_restore`, reading in bounded batches: `checkpoint_reading`) and a
copy of a live model_dir's newest checkpoint held while it is read
(`checkpoint_snapshot`), on `tf.train.Checkpoint` and `tf.io.gfile`.
"""
