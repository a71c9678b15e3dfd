"""Every model format on disk: the original options.json + weights.hdf5, the native safetensors format, zip
archives of the published families (read in place), TensorFlow's checkpoints and TF-Hub modules (``tensorflow/``),
the published-model registry and the shipped demo, training-run checkpoints and language-model exports."""
