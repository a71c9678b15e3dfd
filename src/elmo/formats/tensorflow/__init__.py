"""TensorFlow's files, read without TensorFlow: checkpoints' tensor bundles (``tf_bundle.py``, with ``crc32c.py``),
the ops of a ``saved_model.pb`` (``graph_def.py``), both decoded by the one protobuf wire-format reader
(``protobuf.py``); bilm-tf training directories (``bilm_tf_checkpoint.py``) and TF-Hub modules (``tf_hub.py``) over
them."""
