"""The settings of embedding: how the biLM runs (:class:`EmbedOptions`) and what a file job writes
(:class:`OutputOptions`). The Python API and ``elmo embed`` share these defaults and checks."""

from __future__ import annotations

from dataclasses import dataclass

from elmo.embedding.text_input import ENCODING_ERRORS, INPUT_FORMATS
from elmo.modules.initial_state import INITIAL_STATES
from elmo.precision import Precision, parse_precision
from elmo.settings import SettingError, check_at_least, check_choice, flag_of, setting

OUTPUT_LAYERS = ("all", "top", "average")
OUTPUT_DTYPES = ("float32", "float16")
STATELESS_BATCH_SIZE = 256
STATEFUL_BATCH_SIZE = 64
"""AllenNLP's ``ElmoEmbedder`` default: with ``--stateful`` the batch decides which rows carry state."""


@dataclass(frozen=True)
class EmbedOptions:
    """How :class:`~elmo.embedding.embedder.Embedder` runs the biLM."""

    batch_size: int | None = setting(
        None, "most sentences per batch (default: 256; with --stateful 64, AllenNLP's: it decides which rows carry "
        "state)"
    )
    """None: :attr:`sentences_per_batch` picks by mode. Stateless, big batches keep both cores busy (the recurrent
    GEMM of 64 rows runs well below the machine's peak); stateful, the batch decides which rows carry state, so it
    stays where the original's was."""
    stateful: bool = setting(
        False, "carry LSTM states across batches row by row like the original (batches in file order)"
    )
    """Default off: every sentence starts from zero states, so its vectors do not depend on the other sentences,
    and batches can be sorted by length. The same as ``initial_state="carry"``."""
    initial_state: str = setting(
        "zero", "where each sentence's LSTM state starts: zero; carry = --stateful; warm = one fixed state, read from "
        "the model's warm_state.safetensors (`elmo warm-state`) or computed from a shipped neutral text",
        choices=INITIAL_STATES,
    )
    """``elmo.modules.initial_state``. ``warm`` is deterministic and batches like ``zero``; ``carry`` sets
    ``stateful`` (and ``stateful=True`` sets ``carry``)."""
    precision: Precision = setting(
        Precision.AUTO, "fp32 (exact) or bf16 weights (fast only on AVX512-BF16/AMX CPUs and GPUs; cosine > 0.999); "
        "auto: bf16 where the device has bf16 units, else fp32"
    )
    max_tokens_per_batch: int = setting(
        8192, "stateless runs: most padded tokens per batch, sentences sorted by length"
    )
    """Sentence boundaries included."""
    chunk_size: int = setting(4096, "lines read, sorted and saved together: the unit of --resume and of ranks")
    vocab_cache: int = setting(0, "keep the token-layer vectors of up to N words across batches (0: off)", metavar="N")

    @property
    def sentences_per_batch(self) -> int:
        """``batch_size``, or the default of the mode (stateless or stateful)."""
        if self.batch_size is not None:
            return self.batch_size
        return STATEFUL_BATCH_SIZE if self.stateful else STATELESS_BATCH_SIZE

    def __post_init__(self) -> None:
        check_at_least(self, 1, "max_tokens_per_batch", "chunk_size")
        if self.batch_size is not None:
            check_at_least(self, 1, "batch_size")
        check_at_least(self, 0, "vocab_cache")
        object.__setattr__(self, "precision", parse_precision(self.precision))
        check_choice(self, "initial_state", INITIAL_STATES)
        if self.stateful and self.initial_state == "warm":
            problem = "warm cannot be combined with --stateful (which is --initial-state carry)"
            raise SettingError("initial_state", problem, flag_of(EmbedOptions, "initial_state"))
        if self.stateful or self.initial_state == "carry":
            object.__setattr__(self, "stateful", True)
            object.__setattr__(self, "initial_state", "carry")


@dataclass(frozen=True)
class OutputOptions:
    """What :meth:`~elmo.embedding.embedder.Embedder.embed_file` writes (layouts: see ``elmo.embedding.embedder``)."""

    output_layers: str = "all"
    """"all" (L + 1, n, 2P), "top" (n, 2P) or "average" (n, 2P)."""
    use_sentence_keys: bool = setting(False, "key datasets by sentence, not line index")
    forget_sentences: bool = setting(False, "do not write the sentence_to_index dataset")
    overwrite: bool = setting(False, "replace an existing output file that is not HDF5 (never the input itself)")
    """An existing HDF5 output is always replaced: a rerun is not a mistake, replacing a text file may be."""
    output_dtype: str = setting("float32", "dtype of the stored vectors (float16 halves the file)",
                                choices=OUTPUT_DTYPES)
    """Computation is unaffected."""
    errors: str = setting(
        "strict", "a line that is not UTF-8: strict = stop with its line number, replace = use U+FFFD",
        choices=ENCODING_ERRORS,
    )

    input_format: str = setting(
        "text", "text: one whitespace-tokenised sentence per line; conllu: the FORM column of each CoNLL-U sentence's "
        "words (multiword tokens and empty nodes skipped; keys: sentence numbers 0, 1, ...)", choices=INPUT_FORMATS,
    )

    def __post_init__(self) -> None:
        check_choice(self, "output_layers", OUTPUT_LAYERS)
        check_choice(self, "input_format", INPUT_FORMATS)
        check_choice(self, "output_dtype", OUTPUT_DTYPES)
        check_choice(self, "errors", ENCODING_ERRORS)
