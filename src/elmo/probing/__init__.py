"""Probes of what each biLM layer knows (paper section 5.3): classifiers and nearest neighbours on frozen vectors.

``activations``: the per-layer token vectors, computed once; ``linear``: the softmax probe (one layer, or a learned
scalar mix of all); ``pos``: part-of-speech tagging from CoNLL-U; ``senseval`` + ``wsd``: word senses of the
Senseval lexical sample; ``neighbours``: the contextual nearest neighbours of one word's uses (the paper's Table 4).
"""
