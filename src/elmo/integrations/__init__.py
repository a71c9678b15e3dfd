"""ELMo inside other tools, one module per tool (docs/integrations.md): Flair's ``TokenEmbeddings``, spaCy's pipeline
component, Ray Data's predictor and Spark's UDF. Each takes its model from ``formats.ModelRef``, its layer and pooling
choices from ``embedding.selection.VectorSelection``, its settings from the shared declarations and its thread count
from ``runtime/``; each imports its tool only through ``runtime/extras.py``."""
