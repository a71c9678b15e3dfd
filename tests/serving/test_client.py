"""``elmo.client.ElmoClient`` against the real service, and ``elmo embed --server`` against ``elmo embed``."""

from __future__ import annotations

import h5py
import numpy as np
import pytest

from elmo.cli import main
from elmo.client import ElmoClient, ServiceError, decode_npy
from elmo.errors import ElmoError
from elmo.serving.app import encode_npy
from tests.serving.conftest import API_KEY, SENTENCES, assert_close, expected


def test_npy_format_round_trips():
    arrays = [np.arange(24, dtype=np.float32).reshape(2, 3, 4), np.zeros((0, 4), np.float16), np.ones((1, 4))]
    for got, want in zip(decode_npy(encode_npy(arrays)), arrays, strict=True):
        assert got.dtype == want.dtype and np.array_equal(got, want)


@pytest.mark.slow
@pytest.mark.parametrize("output", ["all", "top"])
def test_client_embeds_token_lists_and_strings(service, reference, output):
    client = ElmoClient(service.url, api_key=API_KEY, max_sentences=3)  # several requests, results in order
    sentences = [*SENTENCES, " ".join(SENTENCES[0])]
    assert_close(client.embed(sentences, output=output), expected(reference, sentences, output))


def test_client_takes_a_layer_index_and_pooling(service, reference):
    client = ElmoClient(service.url, api_key=API_KEY)
    got = client.embed(SENTENCES, layer=1, pool="mean")  # `layer` replaces `output`: the request sends one of them
    want = [layers[1].mean(axis=0) if layers.shape[1] else np.zeros(layers.shape[-1], np.float32)  # empty: zeros
            for layers in expected(reference, SENTENCES)]
    assert_close(got, want)


def test_client_reads_the_api_key_from_the_environment(service, reference, monkeypatch):
    monkeypatch.setenv("ELMO_API_KEY", API_KEY)
    client = ElmoClient(service.url + "/")
    assert client.ready()
    assert client.model()["output_dim"] == 256
    got = client.embed([["bank"]], output="average", dtype="float16")
    assert got[0].dtype == np.float16 and got[0].shape == (1, 256)


def test_client_errors_carry_the_service_message(service, monkeypatch):
    monkeypatch.delenv("ELMO_API_KEY", raising=False)
    with pytest.raises(ServiceError, match="401 the API key is missing") as e:
        ElmoClient(service.url).embed([["a"]])
    assert e.value.status == 401
    with pytest.raises(ServiceError, match=r"400 sentences\[0\]\[1\] is an empty token"):
        ElmoClient(service.url, api_key=API_KEY).embed([["a", ""]])
    with pytest.raises(TypeError, match="pass \\[text\\]"):
        ElmoClient(service.url).embed("a sentence")
    with pytest.raises(ElmoError, match="cannot reach the service"):
        ElmoClient("http://127.0.0.1:9").embed([["a"]])
    assert not ElmoClient("http://127.0.0.1:9").ready()


@pytest.mark.slow
@pytest.mark.parametrize("layers", ["--all", "--top"])
def test_elmo_embed_server_writes_what_elmo_embed_writes(service, tmp_path, monkeypatch, layers):
    text = tmp_path / "sentences.txt"
    text.write_text("\n".join(" ".join(s) for s in SENTENCES) + "\n", encoding="utf-8")
    monkeypatch.setenv("ELMO_API_KEY", API_KEY)
    assert main(["-q", "embed", str(text), str(tmp_path / "remote.hdf5"), layers, "--server", service.url,
                 "--batch-size", "3", "--no-progress"]) == 0
    assert main(["-q", "embed", str(text), str(tmp_path / "local.hdf5"), layers, "--precision", "fp32",
                 "--no-progress"]) == 0
    with h5py.File(tmp_path / "remote.hdf5") as remote, h5py.File(tmp_path / "local.hdf5") as local:
        assert sorted(remote) == sorted(local) == sorted([*map(str, range(len(SENTENCES))), "sentence_to_index"])
        assert remote["sentence_to_index"][0] == local["sentence_to_index"][0]
        assert_close([remote[str(i)][()] for i in range(len(SENTENCES))],
                     [local[str(i)][()] for i in range(len(SENTENCES))])


def test_elmo_embed_server_refuses_a_local_model_or_stateful(service, tmp_path, capsys, monkeypatch):
    monkeypatch.setenv("ELMO_API_KEY", API_KEY)
    text = tmp_path / "sentences.txt"
    text.write_text("a b\n")
    assert main(["embed", str(text), str(tmp_path / "o.hdf5"), "--top", "--server", service.url,
                 "--model", "small"]) == 1
    assert "--server embeds with the service's model and device: drop --model" in capsys.readouterr().err
    assert main(["embed", str(text), str(tmp_path / "o.hdf5"), "--top", "--server", service.url,
                 "--initial-state", "carry"]) == 1
    assert "a service chooses its own initial state (elmo serve --initial-state)" in capsys.readouterr().err


def test_serve_without_the_serve_extra_says_what_to_install(monkeypatch, capsys):
    import sys

    monkeypatch.setitem(sys.modules, "uvicorn", None)  # as if not installed
    assert main(["serve"]) == 1
    assert capsys.readouterr().err.strip() == 'elmo: error: elmo serve needs uvicorn: pip install "elmo-bilm[serve]"'
