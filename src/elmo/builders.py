"""Named model sizes and the one function that assembles a :class:`~elmo.modules.bilm.BiLM` from a config.

The published English models (allennlp.org/elmo) differ only in these numbers; all use the 2048-filter char CNN.
"""

from __future__ import annotations

from elmo.config import BiLMConfig, CharCNNConfig, LSTMConfig
from elmo.modules.bilm import BiLM
from elmo.modules.char_cnn import CharCNNEncoder
from elmo.modules.lstm import LstmCellWithProjection, LstmStack
from elmo.modules.token_embedding import TokenEmbedding

FILTERS_2048 = [(1, 32), (2, 32), (3, 64), (4, 128), (5, 256), (6, 512), (7, 1024)]


def _config(dim: int, projection_dim: int, n_highway: int) -> BiLMConfig:
    return BiLMConfig(
        lstm=LSTMConfig(dim=dim, projection_dim=projection_dim, n_layers=2, cell_clip=3, proj_clip=3),
        char_cnn=CharCNNConfig(filters=list(FILTERS_2048), embedding_dim=16, n_highway=n_highway),
    )


def original_config() -> BiLMConfig:
    """2x4096_512_2048cnn_2xhighway: the paper's model (93.6M parameters)."""
    return _config(4096, 512, 2)


def medium_config() -> BiLMConfig:
    """2x2048_256_2048cnn_1xhighway (28.0M parameters)."""
    return _config(2048, 256, 1)


def small_config() -> BiLMConfig:
    """2x1024_128_2048cnn_1xhighway (13.6M parameters)."""
    return _config(1024, 128, 1)


NAMED_CONFIGS = {"original": original_config, "medium": medium_config, "small": small_config}


def build_bilm(
    config: BiLMConfig,
    token_vocab_size: int | None = None,
    dropout: float = 0.0,
    variational_dropout: bool = False,
    weight_dropout: float = 0.0,
) -> BiLM:
    """Assemble an (untrained) biLM.

    Args:
        config: architecture.
        token_vocab_size: build a token-input biLM (a table of ``token_vocab_size`` token vectors) instead of
            the char CNN; required when ``config.char_cnn`` is None.
        dropout: dropout on every LSTM layer input, active in training mode only (the original trainer's 0.1).
        variational_dropout: one dropout mask per row over all time steps instead of one per position.
        weight_dropout: DropConnect on each LSTM layer's recurrent matrix, training mode only (not in the original).
    """
    lstm = config.lstm
    if token_vocab_size is not None:
        encoder = TokenEmbedding(token_vocab_size, lstm.projection_dim)
    elif config.char_cnn is not None:
        encoder = CharCNNEncoder(config.char_cnn, lstm.projection_dim)
    else:
        raise ValueError("build_bilm: a config without char_cnn needs token_vocab_size")

    def stack() -> LstmStack:
        cells = [
            LstmCellWithProjection(
                input_dim=lstm.projection_dim,
                cell_dim=lstm.dim,
                projection_dim=lstm.projection_dim,
                cell_clip=lstm.cell_clip,
                proj_clip=lstm.proj_clip if lstm.has_projection else None,
                weight_dropout=weight_dropout,
            )
            for _ in range(lstm.n_layers)
        ]
        return LstmStack(cells, residual=lstm.use_skip_connections, dropout=dropout,
                         variational_dropout=variational_dropout)

    return BiLM(encoder, stack(), stack(), config=config)
