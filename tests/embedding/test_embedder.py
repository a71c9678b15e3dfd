"""``elmo embed`` at scale: batching invariance, empty lines, encodings, resume after SIGKILL, torchrun ranks."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import h5py
import numpy as np
import pytest
import torch

from elmo.cli import main as cli_main
from elmo.embedding.batch_plan import token_budget_batches
from elmo.embedding.embedder import Embedder
from elmo.formats.model_files import save_bilm
from elmo.modules.lstm import LstmCellWithProjection
from tests.conftest import random_bilm

REPO = Path(__file__).resolve().parents[2]
WORDS = "the a cat dog sat on mat , . ran quickly über naïve 東京 x y z".split()


def _sentences(n: int, seed: int = 0) -> list[list[str]]:
    rng = np.random.default_rng(seed)
    return [list(rng.choice(WORDS, size=int(rng.integers(1, 12)))) for _ in range(n)]


def _write_text(path: Path, sentences: list[list[str]]) -> Path:
    path.write_text("".join(" ".join(s) + "\n" for s in sentences), encoding="utf-8")
    return path


def _read_all(path: Path) -> dict[str, np.ndarray]:
    with h5py.File(path, "r") as f:
        return {k: (f[k].asstr()[...] if k == "sentence_to_index" else f[k][...]) for k in f}


@pytest.fixture
def model_dir(tmp_path: Path) -> Path:
    return save_bilm(random_bilm(), tmp_path / "model")


def test_inference_lstm_matches_autograd_path():
    cell = LstmCellWithProjection(6, 10, 4, cell_clip=1.0, proj_clip=0.5)
    x = torch.randn(5, 7, 6)
    lengths = torch.tensor([7, 3, 0, 5, 1])
    mask = torch.arange(7).unsqueeze(0) < lengths.unsqueeze(1)
    state = (torch.randn(5, 4), torch.randn(5, 10))
    slow, (h_slow, c_slow) = cell(x, mask, state)  # grad enabled: the plain path
    with torch.no_grad():
        fast, (h_fast, c_fast) = cell(x, mask, state)
    torch.testing.assert_close(fast, slow, atol=1e-6, rtol=0)
    torch.testing.assert_close(h_fast, h_slow, atol=1e-6, rtol=0)
    torch.testing.assert_close(c_fast, c_slow, atol=1e-6, rtol=0)


def test_token_budget_batches_cover_everything_once():
    lengths = [5, 0, 30, 1, 7, 7, 2, 100]
    batches = token_budget_batches(lengths, max_tokens=40, max_sentences=3)
    flat = [i for b in batches for i in b]
    assert sorted(flat) == [0, 2, 3, 4, 5, 6, 7]  # the empty sentence needs no batch
    for batch in batches:
        assert len(batch) <= 3
        assert len(batch) == 1 or len(batch) * (max(lengths[i] for i in batch) + 2) <= 40


def test_sorted_batches_equal_one_sentence_at_a_time():
    sentences = _sentences(40)
    batched = Embedder(random_bilm(), batch_size=16, max_batch_tokens=60, chunk_size=25, vocab_cache=10)
    single = Embedder(random_bilm(), batch_size=1)
    for got, sentence in zip(batched.embed_sentences(sentences), sentences, strict=True):
        want = single.embed_batch([sentence])[0]
        assert got.shape == (3, len(sentence), 16)
        np.testing.assert_allclose(got, want, atol=1e-5, rtol=0)


def test_embed_sentence_and_bf16_close_to_fp32():
    sentence = ["the", "cat", "sat", "on", "the", "mat", "."]
    fp32 = Embedder(random_bilm()).embed_sentence(sentence)
    bf16 = Embedder(random_bilm(), precision="bf16").embed_sentence(sentence)
    assert bf16.dtype == np.float32 and bf16.shape == fp32.shape == (3, 7, 16)
    cosine = (fp32 * bf16).sum(-1) / np.linalg.norm(fp32, axis=-1) / np.linalg.norm(bf16, axis=-1)
    assert cosine.min() > 0.99


def test_empty_lines_keep_keys_aligned(tmp_path, model_dir):
    text = tmp_path / "in.txt"
    text.write_text("the cat\n\n  \nsat .\n", encoding="utf-8")
    out = tmp_path / "out.hdf5"
    assert cli_main(["embed", str(text), str(out), "--all", "--model", str(model_dir)]) == 0
    data = _read_all(out)
    assert [data[str(i)].shape for i in range(4)] == [(3, 2, 16), (3, 0, 16), (3, 0, 16), (3, 2, 16)]


def test_bad_utf8_names_the_line(tmp_path, model_dir, capsys):
    text = tmp_path / "in.txt"
    text.write_bytes(b"fine line\nbad \xff byte\n")
    out = tmp_path / "out.hdf5"
    assert cli_main(["embed", str(text), str(out), "--top", "--model", str(model_dir)]) == 1
    err = capsys.readouterr().err.strip()
    assert err.startswith("elmo: error:") and "in.txt, line 2: not valid UTF-8" in err and "--errors replace" in err
    assert "\n" not in err
    assert not out.exists() and not out.with_name(out.name + ".parts").exists()
    assert not list(tmp_path.glob(".out.hdf5*"))  # no partial output left behind
    argv = ["embed", str(text), str(out), "--top", "--model", str(model_dir), "--errors", "replace"]
    assert cli_main(argv) == 0
    assert _read_all(out)["1"].shape == (3, 16)


def test_output_options(tmp_path, model_dir):
    text = _write_text(tmp_path / "in.txt", _sentences(9))
    full, half = tmp_path / "all.hdf5", tmp_path / "avg.hdf5"
    assert cli_main(["embed", str(text), str(full), "--all", "--model", str(model_dir), "--chunk-size", "4"]) == 0
    argv = ["embed", str(text), str(half), "--average", "--model", str(model_dir), "--dtype", "float16"]
    assert cli_main(argv + ["--forget-sentences"]) == 0
    everything, averaged = _read_all(full), _read_all(half)
    assert "sentence_to_index" not in averaged and "sentence_to_index" in everything
    assert set(averaged) == set(everything) - {"sentence_to_index"}
    for i in range(9):
        assert averaged[str(i)].dtype == np.float16
        np.testing.assert_allclose(averaged[str(i)], everything[str(i)].mean(0), atol=2e-3, rtol=1e-2)


def _embed_command(text: Path, out: Path, model: Path, *extra: str) -> list[str]:
    return ["-m", "elmo", "-q", "embed", str(text), str(out), "--all", "--model", str(model), "--chunk-size", "8",
            *extra]


def _env() -> dict[str, str]:
    env = dict(os.environ, PYTHONPATH=str(REPO / "src"), OMP_NUM_THREADS="1")
    env.pop("WORLD_SIZE", None)
    return env


@pytest.mark.slow
def test_resume_after_sigkill_equals_uninterrupted_run(tmp_path, model_dir):
    text = _write_text(tmp_path / "in.txt", _sentences(400, seed=1))
    reference, out = tmp_path / "reference.hdf5", tmp_path / "out.hdf5"
    subprocess.run([sys.executable, *_embed_command(text, reference, model_dir)], env=_env(), check=True)
    process = subprocess.Popen([sys.executable, *_embed_command(text, out, model_dir)], env=_env())
    parts = out.with_name(out.name + ".parts")
    deadline = time.monotonic() + 60
    while len(list(parts.glob("part-*.hdf5"))) < 3 and time.monotonic() < deadline and process.poll() is None:
        time.sleep(0.01)
    process.send_signal(signal.SIGKILL)
    process.wait()
    if out.exists():
        pytest.skip("the run finished before it could be killed")
    assert parts.is_dir()
    done = len(list(parts.glob("part-*.hdf5")))
    assert done >= 3
    result = subprocess.run(
        [sys.executable, *_embed_command(text, out, model_dir, "--resume")], env=_env(), capture_output=True, text=True
    )
    assert result.returncode == 0, result.stderr
    assert not parts.exists()
    got, want = _read_all(out), _read_all(reference)
    assert got.keys() == want.keys()
    for key in want:
        np.testing.assert_array_equal(got[key], want[key])


def test_resume_refuses_other_settings(tmp_path, model_dir, capsys):
    text = _write_text(tmp_path / "in.txt", _sentences(5))
    out = tmp_path / "out.hdf5"
    parts = out.with_name(out.name + ".parts")
    parts.mkdir()
    (parts / "manifest.json").write_text('{"layers": "top"}')
    assert cli_main(["embed", str(text), str(out), "--all", "--model", str(model_dir), "--resume"]) == 1
    assert "--resume: setting" in capsys.readouterr().err


@pytest.mark.slow
def test_torchrun_two_processes_equal_one(tmp_path, model_dir):
    text = _write_text(tmp_path / "in.txt", _sentences(50, seed=2))
    single, double = tmp_path / "one.hdf5", tmp_path / "two.hdf5"
    subprocess.run([sys.executable, *_embed_command(text, single, model_dir)], env=_env(), check=True)
    torchrun = [sys.executable, "-m", "torch.distributed.run", "--nproc_per_node", "2", "--master_addr", "127.0.0.1",
                "--master_port", str(29500 + os.getpid() % 1000)]
    result = subprocess.run(
        [*torchrun, *_embed_command(text, double, model_dir)], env=_env(), capture_output=True, text=True, timeout=120
    )
    assert result.returncode == 0, result.stderr[-3000:]
    got, want = _read_all(double), _read_all(single)
    assert got.keys() == want.keys()
    for key in want:
        np.testing.assert_array_equal(got[key], want[key])


def test_stateful_chunks_keep_whole_batches(tmp_path, fixture_dir, fixture_sentences, fixture_expected):
    """Stateful parity with the original survives chunking: chunks are rounded up to whole batches."""
    lines = [" ".join(fixture_sentences[k][i]) for i in range(10) for k in range(3)]
    text = tmp_path / "sentences.txt"
    text.write_text("\n".join(lines) + "\n", encoding="utf-8")
    out = tmp_path / "out.hdf5"
    argv = ["embed", str(text), str(out), "--top", "--initial-state", "carry", "--batch-size", "3", "--chunk-size", "4"]
    argv += ["--precision", "fp32"]  # exact, also where auto would pick bf16
    argv += ["--options-file", str(fixture_dir / "options.json"), "--weight-file", str(fixture_dir / "lm_weights.hdf5")]
    assert cli_main(argv) == 0
    with h5py.File(out, "r") as f:
        for i in range(10):
            for k in range(3):
                np.testing.assert_allclose(f[str(3 * i + k)][...], fixture_expected[k][i], atol=1e-6, rtol=0)


def test_cli_bf16_and_vocab_cache_close_to_fp32(tmp_path, model_dir):
    text = _write_text(tmp_path / "in.txt", _sentences(12, seed=3))
    exact, fast = tmp_path / "exact.hdf5", tmp_path / "fast.hdf5"
    base = ["embed", str(text), "--all", "--model", str(model_dir), "--max-batch-tokens", "40"]
    assert cli_main([*base[:2], str(exact), *base[2:]]) == 0
    assert cli_main([*base[:2], str(fast), *base[2:], "--precision", "bf16", "--vocab-cache", "5"]) == 0
    want, got = _read_all(exact), _read_all(fast)
    for key in (str(i) for i in range(12)):
        a, b = want[key].reshape(-1, 16), got[key].reshape(-1, 16)
        cosine = (a * b).sum(-1) / np.linalg.norm(a, axis=-1) / np.linalg.norm(b, axis=-1)
        assert cosine.min() > 0.99


def test_default_precision_is_fp32_and_the_output_says_what_made_it(tmp_path, model_dir):
    """Faithful by default: no flag gives the --precision fp32 vectors on every machine (on a CPU with bf16 units
    ``auto`` would give others), and the file records the precision and device."""
    text = _write_text(tmp_path / "in.txt", _sentences(12, seed=5))
    default, fp32 = tmp_path / "default.hdf5", tmp_path / "fp32.hdf5"
    assert cli_main(["embed", str(text), str(default), "--all", "--model", str(model_dir)]) == 0
    assert cli_main(["embed", str(text), str(fp32), "--all", "--model", str(model_dir), "--precision", "fp32"]) == 0
    want, got = _read_all(fp32), _read_all(default)
    assert want.keys() == got.keys() and all(np.array_equal(want[k], got[k]) for k in want)
    with h5py.File(default, "r") as f:
        provenance = {k: v for k, v in f.attrs.items() if k != "embed_settings"}  # the manifest, for --resume
        assert provenance == {"model": "model", "precision": "fp32", "device": "cpu", "initial_state": "zero"}
    assert Embedder(random_bilm()).precision == "fp32"


def test_a_batch_runs_inside_the_thread_policy_and_restores_the_thread_count(monkeypatch):
    """The embedder enters the CPU thread policy for each batch (the model code only runs inside it)."""
    from elmo.runtime import threads

    embedder = Embedder(random_bilm())
    seen = []
    real = embedder._token_table
    monkeypatch.setattr(embedder, "_token_table", lambda s: seen.append((threads.policy_threads(),
                                                                         torch.get_num_threads())) or real(s))
    before = torch.get_num_threads()
    torch.set_num_threads(2)
    try:
        embedder.embed_batch([["a", "b"]])
        assert seen == [(2, 1)] and torch.get_num_threads() == 2
    finally:
        torch.set_num_threads(before)


def test_embed_options_are_checked_for_the_api_as_for_the_command_line():
    from elmo.embedding.embed_options import EmbedOptions
    from elmo.settings import SettingError

    with pytest.raises(SettingError, match="max_batch_tokens must be >= 1, got 0") as raised:
        Embedder(random_bilm(), max_batch_tokens=0)
    assert raised.value.command_line == "--max-batch-tokens must be >= 1, got 0"
    embedder = Embedder(random_bilm(), EmbedOptions(batch_size=3), precision="bf16")
    assert (embedder.options.batch_size, embedder.options.precision) == (3, "bf16")


def test_a_str_is_refused_where_tokens_belong():
    """A str iterates as characters: ``embed_sentence("The cat sat .")`` used to return 13 token vectors."""
    embedder = Embedder(random_bilm(), precision="fp32")
    with pytest.raises(TypeError, match=r"^Embedder.embed_sentence: got the str 'The cat sat \.' where a list of "
                                        r"tokens is expected; split it first"):
        embedder.embed_sentence("The cat sat .")
    with pytest.raises(TypeError, match=r"^Embedder.embed_sentences, sentence 2: got the str 'a b'"):
        list(embedder.embed_sentences([["x"], [], "a b"]))
    with pytest.raises(TypeError, match=r"^Embedder.embed_sentences: got the str 'The cat' where a list of tokenised"):
        list(embedder.embed_sentences("The cat"))
    with pytest.raises(TypeError, match=r"^Embedder.embed_batch, sentence 0: got the str 'a'"):
        embedder.embed_batch(["a"])
    assert embedder.embed_sentence(("The", "cat")).shape == (3, 2, embedder.output_dim)


def test_the_first_layer_once_per_distinct_word_gives_the_vectors_of_every_position(monkeypatch):
    """The embedder hands the biLM its batch as distinct words, and the first LSTM layer's input half is computed once
    per word (elmo.modules.lstm.WordTable): the shipped demo model's vectors equal those computed at every position
    (0 difference measured on AVX2 and AVX-512 CPUs; the bound allows another BLAS's summation order)."""
    import elmo.modules.lstm as lstm
    from elmo.formats.model_files import load_bilm

    sentences = [s.split() for s in (REPO / "README.md").read_text(encoding="utf-8").splitlines() if s.split()][:120]
    embedder = Embedder(load_bilm("demo"), batch_size=64)
    by_word = list(embedder.embed_sentences(sentences))
    monkeypatch.setattr(lstm, "WORD_GATES_BYTES", 0)
    by_position = list(embedder.embed_sentences(sentences))
    assert max(float(np.abs(a - b).max()) for a, b in zip(by_word, by_position, strict=True)) <= 1e-6
