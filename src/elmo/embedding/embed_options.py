"""The settings of embedding: how the biLM runs (:class:`EmbedOptions`) and what a file job writes
(:class:`OutputOptions`). The Python API and ``elmo embed`` share these defaults and checks."""

from __future__ import annotations

from dataclasses import dataclass

from elmo.config import MIN_WINDOW
from elmo.errors import UsageError
from elmo.precision import Precision
from elmo.settings import at_least, check_settings, setting
from elmo.shared_settings import FORCE, INITIAL_STATE, MAX_BATCH_TOKENS, PRECISION
from elmo.text.sentences import AUTO, ENCODING_ERRORS, INPUT_FORMATS, TOKENS

PIPELINE_CHOICES = ("auto", "on", "off")
"""``--pipeline``: :func:`elmo.embedding.pipeline.pipelined` says what each means on a device."""
STATELESS_BATCH_SIZE = 256
CARRY_BATCH_SIZE = 64
"""AllenNLP's ``ElmoEmbedder`` default: with ``--initial-state carry`` the batch decides which rows carry state."""


@dataclass(frozen=True)
class EmbedOptions:
    """How an embedder runs the biLM and batches sentences (:class:`~elmo.embedding.embedder.Embedder` here, the
    service's model behind :class:`~elmo.serving.remote.RemoteEmbedder`)."""

    batch_size: int | None = setting(
        None, "most sentences per batch (default: 256; with --initial-state carry 64, AllenNLP's: it decides which "
        "rows carry state)", check=at_least(1),
    )
    """None: :attr:`sentences_per_batch` picks by mode. Stateless, big batches keep both cores busy (the recurrent
    GEMM of 64 rows runs well below the machine's peak); with carried states, the batch decides which rows carry
    state, so it stays where the original's was."""
    initial_state: str = INITIAL_STATE.field()
    """``carry`` keeps the file order (batches must follow each other); ``zero`` and ``warm`` sort by length."""
    precision: Precision = PRECISION.field()
    max_batch_tokens: int = MAX_BATCH_TOKENS.field()
    """Stateless runs; sentence boundaries included."""
    chunk_size: int = setting(
        4096, "lines read, sorted and saved together: the unit of --resume, of ranks and of Ray workers",
        check=at_least(1))
    vocab_cache: int = setting(0, "keep the token-layer vectors of up to N words across batches (0: off)",
                               metavar="N", check=at_least(0))
    sequence_window: int = setting(
        256, "a sentence (or protein) longer than N positions, <S> and </S> included, runs N positions at "
        "a time, its LSTM states carried from window to window: the same vectors, in bounded memory, and a stop "
        "(Ctrl-C, SIGTERM) waits for one window, not the whole sequence", metavar="N", check=at_least(MIN_WINDOW))
    """Not part of what an output records: the vectors do not depend on it (``tests/modules/test_long_sequences.py``
    holds them bit-identical in float32). 256 positions: about 0.2 s of the tiny biLM and 3-18 s of the original
    architecture at batch size 1 (a quiet to a loaded 2-core machine) between stop checks, at no measurable cost
    (docs/benchmarks/embedding.md, 2026-12-07)."""

    pipeline: str = setting(
        "auto", "overlap each batch's host work with the model's: two threads prepare the next batches' words and "
        "character ids and copy the last batches' vectors out of host buffers kept for reuse (pinned on CUDA), "
        "while the model runs; the same vectors. auto: on with CUDA, off on the CPU", choices=PIPELINE_CHOICES)
    """Not part of what an output records: the vectors do not depend on it (``tests/embedding/test_pipeline.py``
    holds them bit-identical). Off on the CPU by default: both cores already run the model there, and the two
    copies through a buffer cost more than the overlap gives back (docs/embedding.md, ``--pipeline``)."""

    @property
    def stateful(self) -> bool:
        """Whether LSTM states carry from batch to batch (``initial_state="carry"``): batches in input order."""
        return self.initial_state == "carry"

    @property
    def sentences_per_batch(self) -> int:
        """``batch_size``, or the default of the mode (stateless or carried states)."""
        if self.batch_size is not None:
            return self.batch_size
        return CARRY_BATCH_SIZE if self.stateful else STATELESS_BATCH_SIZE

    def __post_init__(self) -> None:
        check_settings(self)


OUTPUT_FORMATS = {
    "hdf5": "elmo.embedding.parts:Parts",
    "parquet": "elmo.embedding.parquet_output:ParquetShards",
}
"""``--format`` name -> ``module:class`` of its :class:`~elmo.embedding.output_store.OutputStore`: an output format is
one class and one row here. By name, imported when a job writes it (``output_store.output_store``): the choices are
read whenever the CLI's parser is built, and the classes import h5py or pyarrow."""


@dataclass(frozen=True)
class OutputOptions:
    """What :class:`~elmo.embedding.file_job.EmbedFileJob` writes (layouts: see ``elmo.embedding.file_job``)."""

    output_format: str = setting(
        "hdf5", "hdf5: one HDF5 file; parquet: OUTPUT is a directory of Parquet shards, one per --chunk-size lines, "
        "plus _manifest.json (needs the parquet extra: pip install \"elmo-bilm[parquet]\")",
        choices=tuple(OUTPUT_FORMATS), flag="--format",
    )
    """Parquet: the layout of ``elmo.embedding.parquet_output``, for engines that read Parquet (Spark, DuckDB)."""
    use_sentence_keys: bool = setting(False, "key datasets by sentence, not line index")
    forget_sentences: bool = setting(False, "do not write the sentence_to_index dataset")
    force: bool = FORCE.field()
    """Replace an existing output file (never the input itself); ``--format parquet``: write into a non-empty
    directory (an earlier run's shards are replaced). Without it an existing output is refused, unless ``resume``
    continues the run that writes it."""
    matrix: bool = setting(False, "with --pool: one (n_lines, dim) dataset 'embeddings' (row i = line i; its keys "
                           "in 'keys') instead of one dataset per line: the fast layout to load whole")
    errors: str = setting(
        "strict", "a line that is not UTF-8: strict = stop with its line number, replace = use U+FFFD",
        choices=ENCODING_ERRORS,
    )

    input_format: str = setting(
        AUTO, "auto: from the file name (.fa/.fasta/.faa: fasta, .conllu: conllu, .jsonl/.ndjson: jsonl, .gz after "
        "them too; .parquet: parquet; else text); text: one whitespace-tokenised sentence per line; conllu: the "
        "FORM column of each CoNLL-U sentence's words (multiword tokens and empty nodes skipped; keys: sentence "
        "numbers 0, 1, ...); fasta: one token per residue of each record (keys: the record ids); jsonl, parquet: "
        "one sentence per record, from --text-field (keys: --id-field, else record numbers 0, 1, ...)",
        choices=INPUT_FORMATS + (AUTO,),
    )
    text_field: str = setting(
        "text", "of JSONL or Parquet input: the field (column) holding each record's sentence, whitespace-tokenised "
        "text or a list of tokens")
    id_field: str | None = setting(
        None, "of JSONL or Parquet input: the field (column) whose value, as text, keys each record's vectors (the "
        "HDF5 dataset names; in Parquet output a column of that name in place of 'key'); ids must be unique "
        "(default: none, records are keyed 0, 1, ...)")

    tokens: str = setting(
        "words", "tokens of a text line: words (split on whitespace) or chars (one per character that is not "
        "whitespace: protein or DNA sequences, one per line); FASTA is always one token per residue",
        choices=TOKENS,
    )
    """What a character-level model (SeqVec-style, one residue per token) reads from plain text."""

    def __post_init__(self) -> None:
        check_settings(self)


ENGINES = ("local", "ray")


@dataclass(frozen=True)
class EngineOptions:
    """Where ``elmo embed`` runs the model: here, or on Ray actors (``elmo.embedding.engines``, docs/scale-out.md). Not
    part of what an output records: the same settings give the same files on either engine, and a run started on
    one resumes on the other."""

    engine: str = setting(
        "local", "local: this process embeds the chunks one after another; ray: a pool of Ray actors (--workers), "
        "each with its own model, embeds them and writes their files (pip install \"elmo-bilm[ray]\")",
        choices=ENGINES,
    )
    address: str | None = setting(
        None, "--engine ray: the Ray cluster to join (auto: the one `ray start` runs on this machine; HOST:PORT: "
        "its head node's GCS address); default: a Ray instance on this machine, on loopback, for this run only",
        metavar="auto|HOST:PORT",
    )
    workers: int | None = setting(
        None, "--engine ray: actors, each with its own copy of the model and an equal share of the cluster's CPUs "
        "(default: one per CPU, one per GPU with --device cuda)", check=at_least(1), metavar="N",
    )

    def __post_init__(self) -> None:
        check_settings(self)
        if self.engine == "local" and (self.address is not None or self.workers is not None):
            raise UsageError(f"{'--address' if self.address is not None else '--workers'} is a setting of "
                             "--engine ray; add --engine ray, or drop it")
