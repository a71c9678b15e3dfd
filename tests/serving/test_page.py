"""The page's files and the model card behind it, without a browser (tests/serving/test_page_browser.py drives one):
every file of the package's page/ is served with its type, the set-up holds the demo's examples, and the card says
the model's family and the mix it was trained with."""

from __future__ import annotations

import json
import re
from dataclasses import replace

from jsonschema import Draft202012Validator

from elmo.config import ManyLangsTokenConfig
from elmo.embedding.demo import CONTEXTS
from elmo.modules.scalar_mix import TrainedMix
from elmo.serving.app import model_facts, model_family
from elmo.serving.openapi import openapi_document
from elmo.serving.page import CONTENT_SECURITY_POLICY, PAGE_DIR, SETUP, page_files
from elmo.serving.serve_options import ServeOptions


def test_every_file_of_the_page_is_served_with_its_type():
    files = page_files(api_key_required=False)
    shipped = sorted(path.name for path in PAGE_DIR.iterdir())
    assert sorted(url.rsplit("/", 1)[-1] or "index.html" for url in files if url != SETUP) == shipped
    assert files["/"].media_type == "text/html; charset=utf-8"
    assert files["/page/explore.js"].media_type == "text/javascript; charset=utf-8"
    page = files["/"].body.decode()
    for url in re.findall(r'(?:src|href)="(/[^"]*)"', page):
        assert url in files, f"index.html refers to {url}, which is not served"
    for name, file in files.items():  # every module the page imports is served too
        for imported in re.findall(r'from "\./([^"]+)"', file.body.decode()):
            assert f"/page/{imported}" in files, (name, imported)
    assert "'unsafe-inline'" not in CONTENT_SECURITY_POLICY and "script-src 'self'" in CONTENT_SECURITY_POLICY


def test_the_set_up_says_whether_a_key_is_needed_and_holds_the_demo_examples():
    for required in (True, False):
        setup = json.loads(page_files(required)[SETUP].body)
        assert setup["api_key_required"] is required
    assert sum(len(sentences) for sentences in setup["examples"].values()) == len(CONTEXTS)
    assert list(setup["examples"]) == list(dict.fromkeys(word for word, _, _ in CONTEXTS))


def test_the_card_says_the_family_and_the_trained_mix(reference):
    assert model_facts(reference) == {"family": "bilm-tf", "mix": None}
    bilm = reference.model
    try:
        bilm.default_mix = TrainedMix((0.5, -1.0, 2.0), 1.5, "aggregation/weights, aggregation/scaling")
        facts = model_facts(reference)
    finally:
        bilm.default_mix = None
    assert facts["mix"] == {"weights": [0.5, -1.0, 2.0], "gamma": 1.5,
                            "source": "aggregation/weights, aggregation/scaling"}
    document = openapi_document(ServeOptions(), 3, api_key_required=False, page=True)
    card = {"model": "demo", **facts, "num_layers": 3, "output_dim": 256, "precision": "fp32", "device": "cpu",
            "initial_state": "zero", "limits": {name: getattr(ServeOptions(), name) for name in
                                                document["components"]["schemas"]["ModelAnswer"]["properties"][
                                                    "limits"]["properties"]}}
    root = {"$ref": "#/components/schemas/ModelAnswer", "components": document["components"]}
    assert list(Draft202012Validator(root).iter_errors(card)) == []
    assert model_family(replace(bilm.config, char_cnn=None)) == "bilm-tf (word input)"
    manylangs = replace(bilm.config, char_cnn=None, manylangs=ManyLangsTokenConfig(
        filters=[(1, 32)], n_characters=100, n_words=100))
    assert model_family(manylangs) == "manylangs"
