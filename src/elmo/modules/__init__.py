"""Neural network modules of the biLM and the ELMo layer. No file I/O lives here.

Shape glossary used in docstrings and comments:
    B batch, T time (tokens), W characters per token, E char-embedding dim, F total CNN filters,
    C LSTM memory cells, P projection (output) dim per direction, L LSTM layers, D = 2P ELMo layer width.
"""

from elmo.modules.bilm import BiLM, BiLMOutput, StatefulBiLM
from elmo.modules.char_cnn import CharCNNEncoder
from elmo.modules.elmo import Elmo
from elmo.modules.highway import Highway
from elmo.modules.lstm import LstmCellWithProjection, LstmStack
from elmo.modules.scalar_mix import ScalarMix
from elmo.modules.token_embedding import TokenEmbedding

__all__ = [
    "BiLM",
    "BiLMOutput",
    "CharCNNEncoder",
    "Elmo",
    "Highway",
    "LstmCellWithProjection",
    "LstmStack",
    "ScalarMix",
    "StatefulBiLM",
    "TokenEmbedding",
]
