"""Every model format on disk: the original options.json + weights.hdf5, the native safetensors format, the
published-model registry and the shipped demo, training-run checkpoints and language-model exports."""
