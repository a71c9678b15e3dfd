"""Pretraining and fine-tuning the biLM: corpus reading, row packing for truncated BPTT, the trainer, its config
and presets, the optimizer, held-out perplexity."""
