"""Every model format on disk: the original options.json + weights.hdf5, the native safetensors format, zip
archives of the published families (read in place), the published-model registry and the shipped demo,
training-run checkpoints and language-model exports."""
