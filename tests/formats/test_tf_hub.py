"""TF-Hub ELMo modules, read without TensorFlow, against modules that TensorFlow itself writes in the test.

Each module is a TF1-style SavedModel (the hub format: name-keyed variables, ``tfhub_module.pb``) whose graph is
built the way bilm-tf's ``model.py`` builds it (char CNN, max-pool then activation, highways, projection; per
layer one LSTM step with clip_by_value, the projection and the residual add), from weights that also exist as
HDF5: the AllenNLP fixture of bilm-tf, and a random model of another shape (3 layers, no residual, 1 highway, tanh,
other clips and word length). The vectors of the module must equal those of the HDF5 (within 1e-6 at fp32), and
TensorFlow's own outputs of the graph for ``<S>`` and ``</S>`` must equal ours.
"""

from __future__ import annotations

import hashlib
import io
import json
import logging
import shutil
import tarfile
import tempfile
from pathlib import Path

import h5py
import numpy as np
import pytest
import torch

from elmo import batch_to_ids, load_bilm
from elmo.cli import main as cli_main
from elmo.config import BiLMConfig, CharCNNConfig, LSTMConfig
from elmo.errors import ConfigError, WeightFileError
from elmo.formats.hdf5 import bilm_to_datasets
from elmo.formats.model_files import read_model_config, save_bilm
from elmo.modules.elmo import Elmo
from elmo.text.char_encoding import BOS_TOKEN, EOS_TOKEN, shifted_char_ids
from tests.conftest import random_bilm
from tests.formats.tf_bundle_files import saved_model

ATOL = 1e-6
SENTENCES = [["The", "cat", "sat", "on", "the", "mat", "."], ["Съешь", "ещё", "этих", "булок"], ["a"]]
RANDOM_CONFIG = BiLMConfig(  # the other shape: 3 layers, no residual, 1 highway, tanh, other clips, 30 chars
    lstm=LSTMConfig(dim=24, projection_dim=12, n_layers=3, cell_clip=2.5, proj_clip=4.0, use_skip_connections=False),
    char_cnn=CharCNNConfig(filters=[(1, 8), (2, 8), (3, 16)], embedding_dim=6, n_highway=1, activation="tanh",
                           max_characters_per_token=30),
)
RESIDUAL_CONFIG = BiLMConfig(  # residual, no CNN projection (filters = P), no highway
    lstm=LSTMConfig(dim=20, projection_dim=16, n_layers=2, cell_clip=None, proj_clip=1.5, use_skip_connections=True),
    char_cnn=CharCNNConfig(filters=[(1, 6), (2, 10)], embedding_dim=4, n_highway=0, activation="relu"),
)


def _write_module(directory: Path, datasets: dict[str, np.ndarray], options: dict, mix: str | None, shards: int = 1,
                  marker: bool = True, bad: dict[str, np.ndarray] | None = None) -> dict[str, np.ndarray]:
    """A hub module of these HDF5-layout weights, written by TensorFlow; returns TF's outputs for <S> and </S>
    (``token``, ``forward_{l}`` of <S>, ``backward_{l}`` of </S>) and the mix it stored."""
    import tensorflow as tf

    v1 = tf.compat.v1
    cnn, lstm = options["char_cnn"], options["lstm"]
    max_chars, n_layers = cnn["max_characters_per_token"], lstm["n_layers"]
    activation = {"relu": tf.nn.relu, "tanh": tf.nn.tanh}[cnn["activation"]]
    projection, dim = lstm["projection_dim"], lstm["dim"]
    bad = bad or {}
    count = [0]

    def var(name: str, value: np.ndarray):  # round-robin over the shards' devices
        with tf.device(f"/cpu:{count[0] % shards}"):
            count[0] += 1
            full = v1.get_variable_scope().name + "/" + name if v1.get_variable_scope().name else name
            variable = v1.get_variable(name, initializer=np.asarray(bad.get(full, value), dtype=np.float32))
            return tf.constant(value, tf.float32) if full in bad else variable  # the ops keep the right shape

    v1.disable_control_flow_v2()  # the graphs of the published modules (TF 1.x): Enter/Merge/Exit loops
    graph = tf.Graph()
    rng = np.random.default_rng(1)
    stored: dict[str, np.ndarray] = {}
    with graph.as_default():
        ids = v1.placeholder(tf.int32, [None, max_chars], name="ids")  # (tokens, chars)
        with v1.variable_scope("bilm"):
            embed = datasets["char_embed"]
            char_embed = var("char_embed", np.concatenate([np.zeros((1, embed.shape[1])), embed]))  # the pad row
            chars = tf.nn.embedding_lookup(char_embed, ids)[None]  # (1, tokens, chars, E)
            with v1.variable_scope("CNN"):
                pooled = []
                for i, (width, _) in enumerate(cnn["filters"]):
                    w, b = var(f"W_cnn_{i}", datasets[f"CNN/W_cnn_{i}"]), var(f"b_cnn_{i}", datasets[f"CNN/b_cnn_{i}"])
                    conv = tf.nn.conv2d(chars, w, strides=[1, 1, 1, 1], padding="VALID") + b
                    conv = tf.nn.max_pool(conv, [1, 1, max_chars - width + 1, 1], [1, 1, 1, 1], "VALID")
                    pooled.append(tf.squeeze(activation(conv), axis=[0, 2]))
            x = tf.concat(pooled, 1)  # (tokens, F)
            for k in range(cnn.get("n_highway", 0)):
                with v1.variable_scope(f"CNN_high_{k}"):
                    wc = var("W_carry", datasets[f"CNN_high_{k}/W_carry"])
                    bc = var("b_carry", datasets[f"CNN_high_{k}/b_carry"])
                    wt = var("W_transform", datasets[f"CNN_high_{k}/W_transform"])
                    bt = var("b_transform", datasets[f"CNN_high_{k}/b_transform"])
                    carry = tf.sigmoid(tf.matmul(x, wc) + bc)
                    x = carry * tf.nn.relu(tf.matmul(x, wt) + bt) + (1.0 - carry) * x
            if "CNN_proj/W_proj" in datasets:
                with v1.variable_scope("CNN_proj"):
                    w, b = var("W_proj", datasets["CNN_proj/W_proj"]), var("b_proj", datasets["CNN_proj/b_proj"])
                    x = tf.matmul(x, w) + b
            outputs = {"token": x}
            for d in (0, 1):  # one LSTM step from the zero state per layer, in a TF1 while loop as dynamic_rnn's
                layer_input = x
                for layer in range(n_layers):
                    cell = f"RNN_{d}/RNN/MultiRNNCell/Cell{layer}"
                    with v1.variable_scope(cell + "/rnn/lstm_cell"):
                        kernel = var("kernel", datasets[f"{cell}/LSTMCell/W_0"])
                        bias = var("bias", datasets[f"{cell}/LSTMCell/B"])
                        if projection < dim:
                            with v1.variable_scope("projection"):
                                projection_kernel = var("kernel", datasets[f"{cell}/LSTMCell/W_P_0"])

                    def body(time, _, layer_input=layer_input, layer=layer, kernel=kernel, bias=bias):
                        with v1.name_scope("lstm_cell"):  # LSTMCell's ops
                            zeros = tf.zeros_like(layer_input[:, :1]) * tf.zeros([1, projection])
                            gates = tf.matmul(tf.concat([layer_input, zeros], 1), kernel) + bias
                            i, j, f, o = tf.split(gates, 4, axis=1)
                            c = tf.sigmoid(f + 1.0) * 0.0 + tf.sigmoid(i) * tf.tanh(j)
                            if lstm.get("cell_clip") is not None:
                                c = tf.clip_by_value(c, -lstm["cell_clip"], lstm["cell_clip"])
                            m = tf.sigmoid(o) * tf.tanh(c)
                            if projection < dim:
                                with v1.name_scope("projection"):
                                    m = tf.matmul(m, projection_kernel)
                                if lstm.get("proj_clip") is not None:
                                    m = tf.clip_by_value(m, -lstm["proj_clip"], lstm["proj_clip"])
                        if lstm["use_skip_connections"] and layer > 0:
                            m = layer_input + m  # ResidualWrapper, outside lstm_cell
                        return time + 1, m  # the loop's int32 step counter: an Add that is not the residual

                    with v1.name_scope(f"bilm/{cell}/rnn/"):
                        start = (tf.constant(0), tf.zeros_like(layer_input))
                        _, m = v1.while_loop(lambda time, _: time < 1, body, start, name="while")
                    outputs[f"{('forward', 'backward')[d]}_{layer}"] = m
                    layer_input = m
                    var("Variable" if d == layer == 0 else f"Variable_{2 * (d * n_layers + layer)}",
                        np.zeros((4, dim)))  # the stateful graph's state buffers (not weights)
        if mix is not None:
            weights = rng.normal(size=n_layers + 1).astype(np.float32)
            gamma = np.float32(rng.uniform(0.5, 2.0))
            names = {"google": ("aggregation/weights", "aggregation/scaling", ()),
                     "deeppavlov": ("aggregation/elmo_output_ELMo_W", "aggregation/elmo_output_ELMo_gamma", (1,))}
            w_name, g_name, g_shape = names[mix]
            var(w_name, weights)
            var(g_name, np.full(g_shape, gamma))
            stored = {"weights": weights, "gamma": np.float32(gamma)}
        config = v1.ConfigProto(device_count={"CPU": shards})
        with v1.Session(graph=graph, config=config) as session:
            session.run(v1.global_variables_initializer())
            width = max_chars
            boundary_ids = shifted_char_ids([BOS_TOKEN, EOS_TOKEN], width).astype(np.int32)
            results = session.run(outputs, {ids: boundary_ids})
            builder = v1.saved_model.Builder(str(directory))
            builder.add_meta_graph_and_variables(session, ["serve"])
            builder.save()
    v1.enable_control_flow_v2()
    if marker:
        (directory / "tfhub_module.pb").write_bytes(b"\x08\x01")  # ModuleDef{format: 1}
    return {**results, **stored}


def _hdf5_datasets(path: Path) -> dict[str, np.ndarray]:
    with h5py.File(path, "r") as f:
        names: list[str] = []
        f.visititems(lambda name, obj: names.append(name) if isinstance(obj, h5py.Dataset) else None)
        return {name: f[name][...] for name in names}


@pytest.fixture(scope="module")
def modules(tmp_path_factory, fixture_dir):
    """name -> (module folder, the same weights as a model loaded from HDF5, TF's outputs)."""
    root = tmp_path_factory.mktemp("hub")
    options = json.loads((fixture_dir / "options.json").read_text())
    fixture_bilm = load_bilm(options_file=fixture_dir / "options.json", weight_file=fixture_dir / "lm_weights.hdf5")
    fixture_weights = _hdf5_datasets(fixture_dir / "lm_weights.hdf5")
    built = {}
    built["google"] = (root / "google", fixture_bilm,
                       _write_module(root / "google", fixture_weights, options, "google", shards=3))
    for name, config, mix in (("deeppavlov", RANDOM_CONFIG, "deeppavlov"), ("residual", RESIDUAL_CONFIG, None)):
        reference = random_bilm(config, seed=3)
        save_bilm(reference, root / f"{name}-hdf5")  # what the vectors are compared with: its HDF5
        reference = load_bilm(root / f"{name}-hdf5")
        outputs = _write_module(root / name, bilm_to_datasets(reference), config.to_options(), mix, marker=False)
        built[name] = (root / name, reference, outputs)
    cnn_bias = fixture_weights["CNN/b_cnn_1"]
    _write_module(root / "bad", fixture_weights, options, None, bad={"bilm/CNN/b_cnn_1": np.append(cnn_bias, 0.0)})
    return built


def _ids(bilm, sentences=SENTENCES, boundaries: bool = True) -> torch.Tensor:
    return batch_to_ids(sentences, bilm.config.char_cnn.max_characters_per_token, add_sentence_boundaries=boundaries)


def _layers(bilm, sentences=SENTENCES) -> list[np.ndarray]:
    with torch.no_grad():
        return [x.numpy() for x in bilm(_ids(bilm, sentences)).layers]


@pytest.mark.slow
@pytest.mark.parametrize("name", ["google", "deeppavlov", "residual"])
def test_module_vectors_equal_hdf5_vectors_and_tensorflow(modules, name):
    directory, reference, tf_outputs = modules[name]
    bilm = load_bilm(directory)
    assert bilm.config.to_options() == reference.config.to_options()  # clips, residual, activation from the graph
    for ours, theirs in zip(_layers(bilm), _layers(reference)):
        np.testing.assert_allclose(ours, theirs, atol=ATOL, rtol=0)
    # TensorFlow's own graph: the token layer of <S> and </S>, then each layer's first step from zero states (another
    # implementation, other summation orders: float32 rounding, hence a relative tolerance)
    width = bilm.config.char_cnn.max_characters_per_token
    boundaries = torch.from_numpy(shifted_char_ids([BOS_TOKEN, EOS_TOKEN], width).astype(np.int64))[None]
    with torch.no_grad():
        out = bilm(boundaries).layers  # (1, 2, 2P): <S> </S>
    half = bilm.config.lstm.projection_dim
    close = {"atol": 1e-5, "rtol": 1e-5}
    np.testing.assert_allclose(out[0][0, :, :half].numpy(), tf_outputs["token"], **close)
    for layer in range(bilm.config.lstm.n_layers):
        np.testing.assert_allclose(out[layer + 1][0, 0, :half].numpy(), tf_outputs[f"forward_{layer}"][0], **close)
        np.testing.assert_allclose(out[layer + 1][0, 1, half:].numpy(), tf_outputs[f"backward_{layer}"][1], **close)


def test_shards_and_state_buffers(modules):
    directory = modules["google"][0]
    assert len(list((directory / "variables").glob("variables.data-*-of-00003"))) == 3
    assert read_model_config(directory).to_options() == modules["google"][1].config.to_options()


@pytest.mark.parametrize("name", ["google", "deeppavlov"])
def test_the_modules_trained_mix_is_elmos_default(modules, name):
    directory, _, tf_outputs = modules[name]
    bilm = load_bilm(directory)
    mix = bilm.default_mix
    np.testing.assert_array_equal(np.array(mix.weights, dtype=np.float32), tf_outputs["weights"])
    assert mix.gamma == pytest.approx(float(tf_outputs["gamma"]))
    elmo = Elmo(bilm, dropout=0.0).eval()
    with torch.no_grad():
        got = elmo(_ids(bilm, boundaries=False)).representations[0]
    layers = [x[:, 1:-1] for x in _layers(bilm, SENTENCES)]  # without <S>/</S>
    weights = np.exp(tf_outputs["weights"]) / np.exp(tf_outputs["weights"]).sum()
    expected = tf_outputs["gamma"] * sum(w * x for w, x in zip(weights, layers))
    mask = _ids(bilm, boundaries=False).gt(0).any(-1).numpy()
    np.testing.assert_allclose(got.numpy()[mask], expected[mask], atol=1e-5, rtol=0)
    assert load_bilm(modules["residual"][0]).default_mix is None  # no mix in the module: Elmo's usual start
    assert Elmo(load_bilm(modules["residual"][0])).scalar_mixes[0].gamma.item() == 1.0


def _tar(module: Path, path: Path, folder: str = "elmo_module") -> Path:
    with tarfile.open(path, "w:gz") as tar:
        tar.add(module, arcname=folder)
    return path


def test_a_tar_gz_of_the_module_loads_and_converts(modules, tmp_path):
    directory, reference, _ = modules["deeppavlov"]
    archive = _tar(directory, tmp_path / "module.tar.gz")
    bilm = load_bilm(archive)
    for ours, theirs in zip(_layers(bilm), _layers(reference)):
        np.testing.assert_allclose(ours, theirs, atol=ATOL, rtol=0)
    top_level = tmp_path / "top.tgz"
    with tarfile.open(top_level, "w:gz") as tar:
        for path in sorted(directory.rglob("*")):
            tar.add(path, arcname=str(path.relative_to(directory)), recursive=False)
    assert read_model_config(top_level).to_options() == reference.config.to_options()
    assert cli_main(["convert", "--model", str(archive), str(tmp_path / "converted")]) == 0
    for ours, theirs in zip(_layers(load_bilm(tmp_path / "converted")), _layers(reference)):
        np.testing.assert_allclose(ours, theirs, atol=ATOL, rtol=0)


@pytest.mark.parametrize("member", ["../evil.txt", "/tmp/evil.txt", "elmo_module/../../evil.txt", "link"])
def test_a_tar_member_outside_its_folder_is_one_line_and_nothing_is_written(modules, tmp_path, monkeypatch, member):
    directory = modules["residual"][0]
    archive = _tar(directory, tmp_path / "evil.tar.gz")
    with tarfile.open(archive, "r:gz") as tar:
        members = [(m, tar.extractfile(m).read() if m.isfile() else None) for m in tar.getmembers()]
    with tarfile.open(archive, "w:gz") as tar:
        for m, data in members:
            tar.addfile(m, io.BytesIO(data) if data is not None else None)
        info = tarfile.TarInfo(member)
        if member == "link":
            info.type, info.linkname = tarfile.SYMTYPE, "/etc/passwd"
            tar.addfile(info)
        else:
            info.size = 4
            tar.addfile(info, io.BytesIO(b"evil"))
    temp = tmp_path / "temp"
    temp.mkdir()
    monkeypatch.setattr(tempfile, "tempdir", str(temp))
    with pytest.raises(WeightFileError) as error:
        load_bilm(archive)
    assert "\n" not in str(error.value) and str(archive) in str(error.value) and member in str(error.value)
    assert not list(temp.iterdir())  # the extraction folder is gone
    assert not (tmp_path / "evil.txt").exists() and not Path("/tmp/evil.txt").exists()


def test_an_inconsistent_tensor_is_one_line_naming_it(modules):
    with pytest.raises(WeightFileError) as error:
        load_bilm(modules["google"][0].parent / "bad")
    message = str(error.value)
    assert "\n" not in message and "'bilm/CNN/b_cnn_1' has shape (9,), expected (8,)" in message


def test_options_json_beside_the_module_wins_and_is_checked(modules, tmp_path, fixture_dir):
    directory = shutil.copytree(modules["google"][0], tmp_path / "with-options")
    options = json.loads((fixture_dir / "options.json").read_text())
    options["lstm"]["cell_clip"] = 1.0
    (directory / "options.json").write_text(json.dumps(options))
    assert load_bilm(directory).config.lstm.cell_clip == 1.0
    options["lstm"]["dim"] = 32
    (directory / "options.json").write_text(json.dumps(options))
    with pytest.raises(ConfigError, match=r"lstm.dim is 32, but the module's variables give 64"):
        load_bilm(directory)


def test_without_a_graph_the_published_defaults_are_used_with_a_warning(modules, tmp_path, caplog):
    directory = shutil.copytree(modules["deeppavlov"][0], tmp_path / "no-graph")
    (directory / "saved_model.pb").unlink()
    (directory / "tfhub_module.pb").write_bytes(b"\x08\x01")
    with caplog.at_level(logging.WARNING):
        bilm = load_bilm(directory)
    assert bilm.config.char_cnn.activation == "relu" and bilm.config.lstm.cell_clip == 3.0
    assert "activation, cell_clip, proj_clip, use_skip_connections, max_characters_per_token" in caplog.text
    assert "activation=relu" in caplog.text


def test_the_log_line_says_each_setting_and_where_it_came_from(modules, tmp_path, caplog, fixture_dir):
    with caplog.at_level(logging.INFO):
        load_bilm(modules["deeppavlov"][0])
    assert ("activation tanh (graph), cell_clip 2.5 (graph), proj_clip 4 (graph), residual off (graph), "
            "max_characters_per_token 30 (graph)") in caplog.text
    directory = shutil.copytree(modules["google"][0], tmp_path / "with-options")
    shutil.copy(fixture_dir / "options.json", directory / "options.json")
    caplog.clear()
    with caplog.at_level(logging.INFO):
        load_bilm(directory)
    assert "cell_clip 3 (options.json), proj_clip 3 (options.json), residual off (options.json)" in caplog.text


def test_variables_without_the_lstm_computation_are_not_evidence_of_no_clip(modules, tmp_path, caplog):
    """A graph whose LSTM cells are only variable nodes (``.../lstm_cell/kernel`` and its read) shows no clip because
    it shows no cell at all: the published values hold, with the warning naming them, not "no clip, no residual"
    (this module's own are 2.5, 4 and no residual)."""
    directory = shutil.copytree(modules["deeppavlov"][0], tmp_path / "variables-only")
    cells = [f"bilm/RNN_{d}/RNN/MultiRNNCell/Cell{layer}/rnn/lstm_cell/" for d in (0, 1) for layer in range(3)]
    nodes = [(cell + leaf, "VariableV2", []) for cell in cells for leaf in ("kernel", "bias", "projection/kernel")]
    nodes += [(name + "/read", "Identity", [name]) for name, _, _ in list(nodes)]
    (directory / "saved_model.pb").write_bytes(saved_model(nodes))
    with caplog.at_level(logging.INFO):
        bilm = load_bilm(directory)
    lstm = bilm.config.lstm
    assert (lstm.cell_clip, lstm.proj_clip, lstm.use_skip_connections) == (3.0, 3.0, True)
    assert "graph does not show activation, cell_clip, proj_clip, use_skip_connections, max_characters_per_token" \
        in caplog.text
    assert "cell_clip 3 (default), proj_clip 3 (default), residual on (default)" in caplog.text


def test_published_hub_modules_download_verify_and_load(modules, tmp_path, monkeypatch, capsys):
    from elmo.formats.model_ref import ModelRef
    from elmo.formats.published import read_registry

    archive = _tar(modules["residual"][0], tmp_path / "served.tar.gz")
    registry = {"tiny-hub": {"family": "tf-hub", "language": "English", "description": "test", "source": "test",
                             "files": {"module.tar.gz": {"url": archive.as_uri(), "sha256": None}}}}
    (tmp_path / "registry.json").write_text(json.dumps(registry))
    monkeypatch.setenv("ELMO_MODEL_REGISTRY", str(tmp_path / "registry.json"))
    monkeypatch.setenv("ELMO_HOME", str(tmp_path / "home"))
    path = ModelRef.parse("tiny-hub").path()
    assert path == tmp_path / "home" / "models" / "tiny-hub" / "module.tar.gz"
    recorded = json.loads((path.parent / "checksums.json").read_text())
    assert recorded == {"module.tar.gz": hashlib.sha256(archive.read_bytes()).hexdigest()}
    assert load_bilm(path).config.lstm.use_skip_connections is True
    path.write_bytes(path.read_bytes() + b"\0")  # changed on disk: refused from now on
    with pytest.raises(Exception, match="differs from the expected"):
        ModelRef.parse("tiny-hub").path()
    monkeypatch.delenv("ELMO_MODEL_REGISTRY")
    shipped = {name: entry for name, entry in read_registry().items() if entry["family"] == "tf-hub"}
    assert {"google-elmo-2", "google-elmo-3", "deeppavlov-ru-wiki", "deeppavlov-ru-news",
            "deeppavlov-ru-twitter"} <= set(shipped)
    assert all(set(entry["files"]) == {"module.tar.gz"} for entry in shipped.values())
    assert cli_main(["models", "--family", "tf-hub", "--json"]) == 0
    rows = json.loads(capsys.readouterr().out)
    assert {row["urls"][0] for row in rows} >= {"https://storage.googleapis.com/tfhub-modules/google/elmo/2.tar.gz",
                                                "http://files.deeppavlov.ai/deeppavlov_data/elmo_ru-wiki_600k_steps.tar.gz"}
