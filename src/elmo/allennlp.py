"""AllenNLP's ELMo API on this package's implementation: an AllenNLP user switches by changing only the import.

    from allennlp.modules.elmo import Elmo, batch_to_ids     ->  from elmo.allennlp import Elmo, batch_to_ids
    from allennlp.commands.elmo import ElmoEmbedder          ->  from elmo.allennlp import ElmoEmbedder

Same names, arguments, defaults and return types (``Elmo`` returns the dict with ``elmo_representations`` and
``mask``; ``ElmoEmbedder`` returns numpy arrays and writes the ``allennlp elmo`` HDF5 layout) and the same numbers
(within 1e-5: ``tests/test_allennlp.py`` runs AllenNLP's code beside this). One difference, by default: AllenNLP
carries LSTM states from call to call, so its vectors for a sentence depend on what it saw before; here every
call starts from zero states, as a fresh AllenNLP object's first call does. ``stateful=True`` reproduces the
carried states exactly.
"""

from __future__ import annotations

import contextlib
import logging
import os
from collections.abc import Iterable, Iterator
from itertools import islice
from typing import IO

import h5py
import numpy as np
import torch
from torch import nn

from elmo.embedding.contract import one_batch_at_a_time
from elmo.embedding.embedder import Embedder
from elmo.embedding.parts import sentence_key_problem, write_sentence_to_index
from elmo.errors import ConfigError, InputFileError
from elmo.formats.model_files import load_bilm
from elmo.formats.published import fetch_model, read_registry
from elmo.modules.bilm import BiLM, BiLMOutput, StatefulBiLM
from elmo.modules.char_cnn import CharCNNEncoder
from elmo.modules.elmo import ElmoHead
from elmo.modules.sequence import add_sentence_boundaries, mask_from_ids, remove_sentence_boundaries
from elmo.precision import Precision
from elmo.runtime.atomic_files import atomic_file, is_write_failure, write_error
from elmo.runtime.threads import small_ops_on_one_thread
from elmo.text.char_encoding import BOS_TOKEN, EOS_TOKEN, as_tokens, shifted_char_ids, token_lists
from elmo.text.char_encoding import batch_to_ids as _batch_to_ids

log = logging.getLogger(__name__)

# AllenNLP's defaults: the original model (downloaded once into the model cache, see ``_local_file``)
_ORIGINAL = (
    "https://s3-us-west-2.amazonaws.com/allennlp/models/elmo/2x4096_512_2048cnn_2xhighway/"
    "elmo_2x4096_512_2048cnn_2xhighway"
)
DEFAULT_OPTIONS_FILE = _ORIGINAL + "_options.json"
DEFAULT_WEIGHT_FILE = _ORIGINAL + "_weights.hdf5"
DEFAULT_BATCH_SIZE = 64

ALLENNLP_OUTPUTS = ("all", "top", "average")
"""``ElmoEmbedder.embed_file``'s ``output_format`` values, as ``allennlp elmo --all|--top|--average``."""


def batch_to_ids(batch: list[list[str]]) -> torch.Tensor:
    """Tokenised sentences -> character ids (B, T, 50), +1 shifted, 0 pads; a str is refused."""
    return _batch_to_ids(batch)


class ElmoBiLm(nn.Module):
    """AllenNLP's ``_ElmoBiLm``: the biLM's layers for a batch, sentence boundaries included.

    Args:
        options_file, weight_file: the model's paths, or a published model's URLs (downloaded once into the cache).
        requires_grad: fine-tune the biLM (default: frozen, run without gradients).
        vocab_to_cache: words whose token-layer vectors are computed once; ``forward`` then takes word ids
            (B, T) into this list (id 0 is padding, as AllenNLP's vocabularies have it).
        stateful: carry LSTM states from call to call, row by row, as AllenNLP always does.
    """

    def __init__(
        self,
        options_file: str | os.PathLike,
        weight_file: str | os.PathLike,
        requires_grad: bool = False,
        vocab_to_cache: list[str] | None = None,
        *,
        stateful: bool = False,
    ) -> None:
        super().__init__()
        self._bilm = _load(options_file, weight_file)
        self._bilm.requires_grad_(requires_grad)
        self._requires_grad = requires_grad
        self._stateful = StatefulBiLM(self._bilm) if stateful else None
        self.num_layers = self._bilm.num_layers
        encoder = self._bilm.token_encoder
        boundaries = torch.from_numpy(shifted_char_ids([BOS_TOKEN, EOS_TOKEN], encoder.config.max_characters_per_token))
        self.register_buffer("_boundary_ids", boundaries, persistent=False)  # (2, W)
        vectors = None
        if vocab_to_cache:
            words = [BOS_TOKEN, EOS_TOKEN, *vocab_to_cache]
            with torch.no_grad():
                ids = torch.from_numpy(shifted_char_ids(words, encoder.config.max_characters_per_token))
                vectors = encoder.encode_tokens(ids)  # (2 + V, P): <S>, </S>, the vocabulary
            vectors[2] = 0  # word id 0 pads
        self.register_buffer("_word_vectors", vectors, persistent=False)

    def get_output_dim(self) -> int:
        return self._bilm.output_dim

    def reset_states(self) -> None:
        """Stateful mode: start every row from zero states again."""
        if self._stateful is not None:
            self._stateful.reset()

    def forward(self, inputs: torch.Tensor, word_inputs: torch.Tensor | None = None) -> dict:
        """Character ids (B, T, W) [or cached word ids (B, T)] -> ``activations``: L + 1 tensors (B, T + 2, 2P)
        and ``mask`` (B, T + 2)."""
        run = self._stateful if self._stateful is not None else self._bilm
        grad = self._requires_grad and torch.is_grad_enabled()
        # frozen: the CPU thread policy of inference, as the Embedder runs it
        with torch.set_grad_enabled(grad), contextlib.nullcontext() if grad else small_ops_on_one_thread(inputs.device):
            if self._word_vectors is not None and word_inputs is not None and self._in_cache(word_inputs):
                bos, eos = self._word_vectors[0], self._word_vectors[1]  # (P,) each
                tokens = add_sentence_boundaries(self._word_vectors[2:][word_inputs], bos, eos)  # (B, T+2, P)
                out: BiLMOutput = run.contextualize(tokens, mask_from_ids(tokens))  # AllenNLP's mask: any entry > 0
            else:
                out = run(add_sentence_boundaries(inputs, self._boundary_ids[0], self._boundary_ids[1]))
        return {"activations": out.layers, "mask": out.mask}

    def _in_cache(self, word_inputs: torch.Tensor) -> bool:
        """AllenNLP falls back to the characters when a word id is outside the cache."""
        assert self._word_vectors is not None
        return bool(word_inputs.numel() == 0 or int(word_inputs.max()) < len(self._word_vectors) - 2)


_ElmoBiLm = ElmoBiLm  # AllenNLP's name


class Elmo(nn.Module):
    """AllenNLP's ``Elmo``: ``num_output_representations`` scalar mixes of the biLM layers, each with dropout.

    Arguments as AllenNLP's (``module``: a biLM of your own whose forward returns ``activations`` and ``mask``,
    with ``num_layers`` and ``get_output_dim()``), plus ``stateful``: carry LSTM states from call to call like
    AllenNLP (default: every call starts from zero states). Unlike :class:`elmo.Elmo`, the mixes (and their layer
    norm) run over the sentence boundaries too, as AllenNLP's do.
    """

    def __init__(
        self,
        options_file: str | os.PathLike | None,
        weight_file: str | os.PathLike | None,
        num_output_representations: int,
        requires_grad: bool = False,
        do_layer_norm: bool = False,
        dropout: float = 0.5,
        vocab_to_cache: list[str] | None = None,
        keep_sentence_boundaries: bool = False,
        scalar_mix_parameters: list[float] | None = None,
        module: nn.Module | None = None,
        *,
        stateful: bool = False,
    ) -> None:
        super().__init__()
        if module is not None:
            if options_file is not None or weight_file is not None:
                raise ConfigError("Elmo: don't provide options_file or weight_file with module")
            self._elmo_lstm = module
        else:
            self._elmo_lstm = ElmoBiLm(
                options_file, weight_file, requires_grad, vocab_to_cache, stateful=stateful
            )
        self._has_cached_vocab = vocab_to_cache is not None
        self._keep_sentence_boundaries = keep_sentence_boundaries
        self._head = ElmoHead(
            self._elmo_lstm.num_layers,
            num_output_representations,
            scalar_mix_parameters=scalar_mix_parameters,
            do_layer_norm=do_layer_norm,
            dropout=dropout,
        )

    def get_output_dim(self) -> int:
        return self._elmo_lstm.get_output_dim()

    def reset_states(self) -> None:
        """Stateful mode: start every row from zero states again."""
        self._elmo_lstm.reset_states()

    def forward(self, inputs: torch.Tensor, word_inputs: torch.Tensor | None = None) -> dict:
        """Character ids (..., T, W) [and cached word ids (..., T)] -> ``elmo_representations``: a list of
        ``num_output_representations`` tensors (..., T, 2P), and ``mask`` (..., T)."""
        shape = inputs.shape[:-1]  # (..., T)
        if word_inputs is not None:
            if self._has_cached_vocab:
                shape = word_inputs.shape
                word_inputs = word_inputs.reshape(-1, shape[-1])  # (B, T)
            else:
                log.warning("Word inputs were passed to ELMo but it does not have a cached vocab.")
                word_inputs = None
        if inputs.dim() > 3:
            inputs = inputs.reshape(-1, *inputs.shape[-2:])  # (B, T, W)
        bilm_output = self._elmo_lstm(inputs, word_inputs)
        layers, mask = bilm_output["activations"], bilm_output["mask"]  # each (B, T+2, 2P); (B, T+2)
        representations = self._head.mix(layers, mask)  # over the boundaries too, as AllenNLP's
        if not self._keep_sentence_boundaries:
            representations = [remove_sentence_boundaries(x, mask)[0] for x in representations]  # (B, T, 2P)
            mask = remove_sentence_boundaries(mask.unsqueeze(-1), mask)[1]  # (B, T)
        if len(shape) != 2:
            mask = mask.reshape(*shape[:-1], mask.shape[-1])
            representations = [x.reshape(*mask.shape, x.shape[-1]) for x in representations]
        return {"elmo_representations": representations, "mask": mask}


class ElmoEmbedder:
    """AllenNLP's ``ElmoEmbedder`` (``allennlp.commands.elmo``): every biLM layer of tokenised sentences, as numpy
    arrays (L + 1, n_tokens, 2P), layer 0 the token layer duplicated for both directions.

    ``cuda_device``: -1 for the CPU, else the GPU's index. ``stateful``: carry LSTM states from batch to batch like
    AllenNLP (default: every sentence starts from zero states, and batches are sorted by length for speed).
    Computation is float32, as AllenNLP's.
    """

    def __init__(
        self,
        options_file: str | os.PathLike = DEFAULT_OPTIONS_FILE,
        weight_file: str | os.PathLike = DEFAULT_WEIGHT_FILE,
        cuda_device: int = -1,
        *,
        stateful: bool = False,
    ) -> None:
        device = "cpu" if cuda_device < 0 else f"cuda:{cuda_device}"
        self._embedder = Embedder(
            _load(options_file, weight_file), device=device, precision=Precision.FP32,
            initial_state="carry" if stateful else "zero",
        )
        self.cuda_device = cuda_device

    def reset_states(self) -> None:
        """Stateful mode: start every row from zero states again."""
        self._embedder.reset_states()

    def batch_to_embeddings(self, batch: list[list[str]]) -> tuple[torch.Tensor, torch.Tensor]:
        """B sentences -> activations (B, L + 1, T, 2P), zero beyond each sentence, and mask (B, T)."""
        sentences = list(token_lists(batch, "ElmoEmbedder.batch_to_embeddings"))
        lengths = torch.tensor([len(s) for s in sentences])
        embedder = self._embedder
        activations = torch.zeros(len(sentences), embedder.num_layers, int(lengths.max()), embedder.output_dim)
        for b, layers in enumerate(embedder.embed_batch(sentences)):
            activations[b, :, : layers.shape[1]] = torch.from_numpy(layers)
        mask = torch.arange(activations.shape[2]).unsqueeze(0) < lengths.unsqueeze(1)
        return activations.to(embedder.device), mask.to(embedder.device)

    def embed_sentence(self, sentence: list[str]) -> np.ndarray:
        """One tokenised sentence -> (L + 1, n_tokens, 2P)."""
        return self.embed_batch([as_tokens(sentence, "ElmoEmbedder.embed_sentence")])[0]

    def embed_batch(self, batch: list[list[str]]) -> list[np.ndarray]:
        """B tokenised sentences, run as one batch -> B arrays (L + 1, n_tokens, 2P)."""
        sentences = list(token_lists(batch, "ElmoEmbedder.embed_batch"))
        if sentences == [[]]:  # AllenNLP does not run the model here (so a stateful run keeps its states)
            return [np.zeros((self._embedder.num_layers, 0, self._embedder.output_dim), dtype=np.float32)]
        return self._embedder.embed_batch(sentences)

    embed_batches = one_batch_at_a_time  # a stateful run's batches follow each other

    def embed_sentences(
        self, sentences: Iterable[list[str]], batch_size: int = DEFAULT_BATCH_SIZE
    ) -> Iterator[np.ndarray]:
        """Lazily embed many tokenised sentences, in input order (a generator)."""
        iterator = token_lists(sentences, "ElmoEmbedder.embed_sentences")
        if not self._embedder.options.stateful:
            yield from self._embedder.embed_sentences(iterator, batch_size)  # sorted by length within chunks
            return
        while batch := list(islice(iterator, batch_size)):  # consecutive batches: row i continues row i
            yield from self.embed_batch(batch)

    def embed_file(
        self,
        input_file: IO,
        output_file_path: str | os.PathLike,
        output_format: str = "all",
        batch_size: int = DEFAULT_BATCH_SIZE,
        forget_sentences: bool = False,
        use_sentence_keys: bool = False,
    ) -> None:
        """Embed each line of the open text file ``input_file`` (whitespace-tokenised) into the HDF5 file
        ``output_file_path`` (written atomically); closes ``input_file`` as AllenNLP does.

        Datasets as ``allennlp elmo`` writes them: one per line, named by its index ("0", "1", ...) or, with
        ``use_sentence_keys``, by the line itself; ``output_format`` "all" (L + 1, n, 2P), "top" or "average"
        (n, 2P); and unless ``forget_sentences`` or ``use_sentence_keys``, ``sentence_to_index``. Empty lines and,
        with ``use_sentence_keys``, lines that cannot name a dataset (a repeat, a '/', ...) are refused first.
        """
        if output_format not in ALLENNLP_OUTPUTS:
            raise ValueError(f"output_format must be one of {', '.join(ALLENNLP_OUTPUTS)}, got {output_format!r}")
        name = getattr(input_file, "name", "input_file")
        sentences = [line.strip() for line in input_file]
        blank = [i for i, sentence in enumerate(sentences) if not sentence]
        if blank:
            raise InputFileError(f"{name}, line {blank[0] + 1}: empty line ({len(blank)} in all); remove them")
        keys = sentences if use_sentence_keys else [str(i) for i in range(len(sentences))]
        if use_sentence_keys:
            _check_sentence_keys(keys, name)
        embeddings = self.embed_sentences([sentence.split() for sentence in sentences], batch_size)

        try:  # h5py through a file that keeps a failed write (a full disk) for us to raise, not HDF5's C code
            with atomic_file(output_file_path) as file, h5py.File(file, "w") as out:
                out.attrs.update(self._embedder.provenance())  # what made the vectors, as `elmo embed` records it
                for key, layers in zip(keys, embeddings):  # layers (L + 1, n, 2P)
                    if output_format != "all":  # -> (n, 2P)
                        layers = layers[-1] if output_format == "top" else np.average(layers, axis=0)
                    out.create_dataset(key, data=layers.astype(np.float32))
                    file.raise_kept()
                if not forget_sentences and not use_sentence_keys:
                    write_sentence_to_index(out, dict(zip(sentences, keys)))
        except Exception as e:
            if not is_write_failure(e):
                raise
            raise write_error(output_file_path, e, "nothing was written there") from e
        input_file.close()


def _check_sentence_keys(keys: list[str], name: str) -> None:
    """Before any work: every sentence must be a distinct HDF5 name (AllenNLP fails half-way on a repeat)."""
    seen: dict[str, int] = {}  # sentence -> its line number
    for i, key in enumerate(keys):
        problem = sentence_key_problem(key, seen, forget_sentences=True)  # no sentence_to_index is written
        if problem:
            raise InputFileError(
                f"{name}, line {i + 1}: cannot use the sentence as a key: {problem}; drop use_sentence_keys"
            )
        seen[key] = i + 1


def _load(options_file: str | os.PathLike, weight_file: str | os.PathLike) -> BiLM:
    bilm = load_bilm(options_file=_local_file(options_file), weight_file=_local_file(weight_file))
    if not isinstance(bilm.token_encoder, CharCNNEncoder):
        raise ConfigError(f"{options_file}: AllenNLP's ELMo API needs a character-input biLM (options with char_cnn)")
    return bilm


def _local_file(path_or_url: str | os.PathLike) -> str | os.PathLike:
    """A path as it is; a published model's URL (any of AllenNLP's hosts) -> its file in the model cache."""
    text = os.fspath(path_or_url)
    if not text.startswith(("http://", "https://", "s3://")):
        return path_or_url
    file_name = text.rsplit("/", 1)[-1]
    for model, entry in read_registry().items():
        for local_name, source in entry["files"].items():
            if source["url"].rsplit("/", 1)[-1] == file_name:
                return fetch_model(model) / local_name
    raise ConfigError(f"{text}: not a file of a published model; download it and pass its path")
