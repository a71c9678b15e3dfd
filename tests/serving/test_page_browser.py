"""The page of ``elmo serve`` in a real headless Chromium (Debian's ``chromium`` + ``chromium-driver``, driven by
selenium; .ci/run installs them) against a real ``elmo serve`` on 127.0.0.1 with the shipped demo biLM and an API key.

What a user relies on: the heatmap shows the API's cosines, the neighbour lists rank as ``elmo embed --all``'s
vectors do, the projection has one point per occurrence, the key is asked for and a wrong one is named, a request over
a limit shows the service's 413 message on a page that still works, every control has a label, and nothing logs a
console error. One server and one browser for the module.

``ELMO_PAGE_SCREENSHOT=docs/images/serve-page.png`` makes the first test write the screenshot docs/serving.md shows.
"""

from __future__ import annotations

import base64
import io
import json
import os
import re
import shutil
import urllib.request

import h5py
import numpy as np
import pytest
from selenium import webdriver
from selenium.common.exceptions import TimeoutException
from selenium.webdriver.chrome.service import Service as DriverService
from selenium.webdriver.common.action_chains import ActionChains
from selenium.webdriver.common.by import By
from selenium.webdriver.common.keys import Keys
from selenium.webdriver.support.ui import Select, WebDriverWait

from elmo.cli import main
from elmo.embedding.demo import CONTEXTS
from tests.serving.conftest import Service

pytestmark = pytest.mark.engine

KEY = "page-key-4567"
MAX_SENTENCE_TOKENS = 64
BANK = [sentence for word, _, sentence in CONTEXTS if word == "bank"]
"""The demo's "bank" sentences (three money, three river)."""
CHROMIUM = shutil.which("chromium") or shutil.which("chromium-browser")
CHROMEDRIVER = shutil.which("chromedriver")


@pytest.fixture(scope="module")
def server():
    running = Service("--api-key", KEY, "--max-sentence-tokens", str(MAX_SENTENCE_TOKENS), api_key=KEY)
    yield running
    assert running.stop() == 0, running.output()


@pytest.fixture(scope="module")
def browser():
    assert CHROMIUM and CHROMEDRIVER, ("the page's tests need headless Chromium: apt-get install chromium "
                                       "chromium-driver (.ci/run does)")
    options = webdriver.ChromeOptions()
    options.binary_location = CHROMIUM
    for argument in ("--headless=new", "--no-sandbox", "--disable-gpu", "--disable-dev-shm-usage",
                     "--window-size=1280,1400", "--no-first-run", "--disable-extensions"):
        options.add_argument(argument)
    options.set_capability("goog:loggingPrefs", {"browser": "ALL"})
    driver = webdriver.Chrome(service=DriverService(CHROMEDRIVER), options=options)
    try:
        yield driver
    finally:
        driver.quit()


@pytest.fixture
def console(browser):
    """The test's console messages: at its end, no error may be logged but the refusals it ``allow``s (Chromium
    logs an API call answered 401 or 413 as a failed load)."""
    browser.get_log("browser")  # drop what earlier tests left
    allowed: set[int] = set()
    yield allowed
    errors = [entry for entry in browser.get_log("browser") if entry["level"] == "SEVERE"
              and not any(f"status of {status} " in entry["message"] for status in allowed)]
    assert errors == []


def load(browser, server, key: str | None = KEY) -> None:
    """The page, fresh, with ``key`` in the tab (None: none) and its first view drawn."""
    if not browser.current_url.startswith(server.url):  # the tab's storage belongs to the page's origin
        browser.get(server.url + "/")
    WebDriverWait(browser, 30).until(lambda d: d.find_element(By.ID, "main").get_attribute("data-state")
                                     in ("ready", "key", "error"))  # no call in flight
    browser.execute_script("sessionStorage.clear()")
    if key is not None:
        browser.execute_script("sessionStorage.setItem('elmo-api-key', arguments[0])", key)
    browser.refresh()
    wait_for_state(browser, "ready" if key is not None else "key")


def wait_for_state(browser, state: str, renders_over: int | None = None, timeout: float = 30) -> None:
    def reached(driver):
        main_element = driver.find_element(By.ID, "main")
        if main_element.get_attribute("data-state") != state:
            return False
        return renders_over is None or int(main_element.get_attribute("data-renders")) > renders_over

    try:
        WebDriverWait(browser, timeout).until(reached)
    except TimeoutException:
        main_element = browser.find_element(By.ID, "main")
        raise AssertionError(f"the page never reached {state!r}: it is {main_element.get_attribute('data-state')!r}"
                             f", status {browser.find_element(By.ID, 'status').text!r}, error "
                             f"{browser.find_element(By.ID, 'error').text!r}") from None


def embed_on_page(browser, sentences: list[str], layer: str) -> None:
    """Type ``sentences`` as a user would, choose ``layer`` and press Embed; returns once the views are drawn."""
    renders = int(browser.find_element(By.ID, "main").get_attribute("data-renders"))
    text = browser.find_element(By.ID, "sentences")
    text.clear()
    text.send_keys("\n".join(sentences))
    Select(browser.find_element(By.ID, "layer")).select_by_value(layer)  # a change runs it already
    browser.find_element(By.ID, "embed").click()
    wait_for_state(browser, "ready", renders)


def api_vectors(server, sentences: list[str], layer: object) -> np.ndarray:
    """(occurrences, 2P): the service's vectors for ``layer``, every sentence's tokens in order."""
    status, _, answer = server.post_json({"sentences": sentences, "layer": layer})
    assert status == 200, answer
    return np.concatenate([np.asarray(e, dtype=np.float64) for e in answer["embeddings"]])


def cosine_matrix(vectors: np.ndarray) -> np.ndarray:
    unit = vectors / np.linalg.norm(vectors, axis=1, keepdims=True)
    return unit @ unit.T


def test_the_page_and_its_files_load_without_the_key_under_a_strict_policy(server):
    status, headers, body = _get(server.url + "/")
    assert status == 200 and headers["content-type"] == "text/html; charset=utf-8"
    policy = headers["content-security-policy"]
    assert "script-src 'self'" in policy and "style-src 'self'" in policy and "unsafe-inline" not in policy
    assert "default-src 'none'" in policy and "connect-src 'self'" in policy
    page = body.decode()
    scripts = re.findall(r"<script[^>]*>(.*?)</script>", page, re.S)
    assert scripts and all(not s.strip() for s in scripts), "no inline script"
    assert not re.search(r"\sstyle=|\son[a-z]+=|<style", page), "no inline style or handler"
    for path in re.findall(r'(?:src|href)="(/page/[^"]+)"', page) + ["/page/api.js", "/page/plots.js",
                                                                      "/page/vectors.js", "/page/setup.json"]:
        status, headers, _ = _get(server.url + path)
        assert status == 200, path
        assert headers["content-security-policy"] == policy and headers["x-content-type-options"] == "nosniff"
    setup = json.loads(_get(server.url + "/page/setup.json")[2])
    assert setup["api_key_required"] is True and setup["examples"]["bank"] == BANK
    for path in ("/v1/model", "/metrics", "/openapi.json"):  # the API, the document and the metrics still need it
        assert _get(server.url + path)[0] == 401


def test_the_key_is_asked_for_and_a_wrong_one_shows_the_service_error(browser, server, console):
    console.add(401)
    load(browser, server, key=None)
    prompt = browser.find_element(By.ID, "key-section")
    assert prompt.is_displayed()
    field = browser.find_element(By.ID, "key-input")
    assert browser.execute_script("return arguments[0].labels.length", field) == 1
    field.send_keys("not-the-key", Keys.ENTER)
    WebDriverWait(browser, 20).until(lambda d: d.find_element(By.ID, "key-error").text)
    assert browser.find_element(By.ID, "key-error").text == "the API key is wrong: send 'Authorization: Bearer KEY'"
    assert browser.execute_script("return sessionStorage.getItem('elmo-api-key')") is None  # a wrong key is dropped
    browser.find_element(By.ID, "key-input").send_keys(KEY, Keys.ENTER)
    wait_for_state(browser, "ready")
    assert not prompt.is_displayed()
    assert browser.execute_script("return sessionStorage.getItem('elmo-api-key')") == KEY  # this tab only
    card = dict(zip([e.text for e in browser.find_elements(By.CSS_SELECTOR, "#card dt")],
                    [e.text for e in browser.find_elements(By.CSS_SELECTOR, "#card dd")]))
    model = json.loads(server.get("/v1/model")[2])
    assert card["Model"] == "demo" and card["Family"] == model["family"] == "bilm-tf"
    assert card["Layers"].startswith("3:") and card["Dimensions"].startswith("256 ")
    assert (card["Precision"], card["Device"]) == (model["precision"], model["device"]) == ("fp32", "cpu")
    assert card["Trained mix"].startswith("none")  # the demo biLM was trained without a mix
    if os.environ.get("ELMO_PAGE_SCREENSHOT"):
        save_screenshot(browser, os.environ["ELMO_PAGE_SCREENSHOT"])


@pytest.mark.parametrize("layer", ["1", "average"])
def test_the_heatmap_shows_the_api_cosines(browser, server, console, layer):
    load(browser, server)
    embed_on_page(browser, BANK, layer)
    cells = browser.execute_script(
        "return [...document.querySelectorAll('#heatmap rect[data-i]')].map(r => "
        "[+r.dataset.i, +r.dataset.j, +r.dataset.value])")
    want = cosine_matrix(api_vectors(server, BANK, int(layer) if layer.isdigit() else layer))
    n = len(want)
    assert n == sum(len(s.split()) for s in BANK) and len(cells) == n * n
    got = np.zeros((n, n))
    for i, j, value in cells:
        got[i, j] = value
    assert np.abs(got - want).max() <= 1e-4
    words = " ".join(BANK).split()
    labels = [t.text for t in browser.find_elements(By.CSS_SELECTOR, "#heatmap text.row-label")]
    assert labels == words  # every occurrence labelled, in reading order
    money, river = (words.index("bank", sum(len(s.split()) for s in BANK[:s])) for s in (0, 3))
    cell = browser.find_element(By.CSS_SELECTOR, f"#heatmap rect[data-i='{money}'][data-j='{river}']")
    ActionChains(browser).move_to_element(cell).perform()
    tooltip = browser.find_element(By.ID, "tooltip")
    WebDriverWait(browser, 5).until(lambda d: tooltip.is_displayed())
    assert tooltip.text == f"bank (sentence 1) × bank (sentence 4): {want[money, river]:.4f}"


def test_the_neighbours_rank_as_elmo_embed_vectors_do(browser, server, console, tmp_path):
    text = tmp_path / "bank.txt"
    text.write_text("\n".join(BANK) + "\n", encoding="utf-8")
    assert main(["-q", "embed", str(text), str(tmp_path / "bank.hdf5"), "--all", "--no-progress"]) == 0
    with h5py.File(tmp_path / "bank.hdf5") as f:
        layers = np.concatenate([f[str(i)][()] for i in range(len(BANK))], axis=1).astype(np.float64)  # (L+1, N, 2P)
    occurrences = [(s, p) for s, sentence in enumerate(BANK) for p in range(len(sentence.split()))]
    load(browser, server)
    embed_on_page(browser, BANK, "2")
    river = occurrences.index((3, BANK[3].split().index("bank")))  # "They sat on the bank of the river"
    browser.find_element(By.CSS_SELECTOR, f"#words button[data-k='{river}']").click()
    WebDriverWait(browser, 10).until(lambda d: "in sentence 4" in d.find_element(By.CSS_SELECTOR, ".query").text)
    for layer in range(3):
        shown = browser.execute_script(
            "return [...document.querySelectorAll(`#neighbours .column[data-layer='${arguments[0]}'] li[data-k]`)]"
            ".map(li => [+li.dataset.sentence, +li.dataset.position, +li.dataset.value])", layer)
        similarity = cosine_matrix(layers[layer])[river]
        ranked = [k for k in np.argsort(-similarity, kind="stable") if k != river]
        assert len(shown) == 8
        got = [occurrences.index((s, p)) for s, p, _ in shown]
        values = [similarity[k] for k in got]
        # the page's order is elmo embed's order: up to swaps of cosines equal within float rounding
        assert all(a >= b - 1e-5 for a, b in zip(values, values[1:])), (layer, values)
        assert values[-1] >= similarity[ranked[len(got)]] - 1e-5
        assert abs(values[0] - similarity[ranked[0]]) <= 1e-5
        assert all(abs(v - similarity[k]) <= 1e-4 for (_, _, v), k in zip(shown, got))
    browser.find_element(By.ID, "same-word").click()  # only the other "bank"s: the paper's Table 4
    same = browser.execute_script("return [...document.querySelectorAll(\"#neighbours .column[data-layer='2'] "
                                  "li[data-k]\")].map(li => li.textContent)")
    assert len(same) == 5 and all("bank" in item for item in same)


def test_the_projection_shows_one_point_per_occurrence(browser, server, console):
    load(browser, server)
    embed_on_page(browser, BANK, "2")
    Select(browser.find_element(By.ID, "pca-word")).select_by_value("bank")
    points = browser.execute_script("return [...document.querySelectorAll('#pca circle')].map(c => "
                                    "[+c.dataset.sentence, +c.dataset.pc1, +c.dataset.pc2])")
    assert [s for s, _, _ in points] == list(range(len(BANK)))  # one point per occurrence, one per sentence here
    vectors = api_vectors(server, BANK, 2)
    words = " ".join(BANK).split()
    chosen = vectors[[k for k, w in enumerate(words) if w == "bank"]]
    centred = chosen - chosen.mean(axis=0)
    u, s, _ = np.linalg.svd(centred, full_matrices=False)
    want = u[:, :2] * s[:2]  # the PCA coordinates, up to each component's sign
    got = np.array([[x, y] for _, x, y in points])
    assert np.abs(np.abs(got) - np.abs(want)).max() <= 1e-4 * s[0]
    renders = int(browser.find_element(By.ID, "main").get_attribute("data-renders"))
    Select(browser.find_element(By.ID, "layer")).select_by_value("0")
    wait_for_state(browser, "ready", renders)
    WebDriverWait(browser, 10).until(lambda d: "the same vector" in d.find_element(By.ID, "pca").text)


def test_an_over_long_sentence_shows_the_413_message_and_the_page_keeps_working(browser, server, console):
    console.add(413)
    load(browser, server)
    long = " ".join(["word"] * (MAX_SENTENCE_TOKENS + 1))
    text = browser.find_element(By.ID, "sentences")
    text.clear()
    text.send_keys(long)
    browser.find_element(By.ID, "embed").click()
    wait_for_state(browser, "error")
    error = browser.find_element(By.ID, "error")
    assert error.is_displayed()
    assert error.text == (f"The service refused (413): sentences[0] has {MAX_SENTENCE_TOKENS + 1} tokens, over the "
                          f"limit of {MAX_SENTENCE_TOKENS} per sentence")
    assert browser.find_element(By.ID, "sentences").is_displayed()  # not a blank page: fix the text and go on
    embed_on_page(browser, BANK[:2], "2")
    assert not error.is_displayed()


def test_every_control_is_labelled_and_the_map_works_from_the_keyboard(browser, server, console):
    load(browser, server)
    unlabelled = browser.execute_script(
        "return [...document.querySelectorAll('input, select, textarea')].filter(e => !e.labels.length)"
        ".map(e => e.id)")
    assert unlabelled == []
    heatmap = browser.find_element(By.CSS_SELECTOR, "#heatmap svg")
    assert heatmap.get_attribute("tabindex") == "0" and heatmap.get_attribute("aria-label")
    browser.execute_script("arguments[0].focus()", heatmap)  # as Tab reaches it
    ActionChains(browser).send_keys(Keys.ARROW_DOWN, Keys.ARROW_RIGHT).perform()
    readout = browser.find_element(By.ID, "heatmap-value").text
    assert re.fullmatch(r".+ \(sentence \d\) × .+ \(sentence \d\): -?\d\.\d{4}", readout), readout
    first = browser.find_element(By.CSS_SELECTOR, ".query").text
    ActionChains(browser).send_keys(Keys.ENTER).perform()  # picks the row's word for the neighbour lists
    WebDriverWait(browser, 10).until(lambda d: d.find_element(By.CSS_SELECTOR, ".query").text != first)
    assert browser.switch_to.active_element.tag_name == "svg"  # the map keeps the focus


def test_the_page_requests_count_in_metrics(browser, server, console):
    def counts() -> dict[str, float]:
        text = server.get("/metrics")[2].decode()
        return {m[0]: float(m[1]) for m in re.findall(r'elmo_requests_total\{path="([^"]+)",code="200"\} (\S+)',
                                                        text)}

    before = counts()
    load(browser, server)
    after = counts()
    for path in ("/", "/page/explore.js", "/page/setup.json", "/v1/model", "/v1/embed"):
        assert after.get(path, 0) - before.get(path, 0) >= 1, path


def save_screenshot(browser, path: str) -> None:
    """The whole page as a PNG of 256 colours (docs/serving.md shows it: small, and the colours stay exact)."""
    from PIL import Image

    shot = browser.execute_cdp_cmd("Page.captureScreenshot", {"format": "png", "captureBeyondViewport": True})
    image = Image.open(io.BytesIO(base64.b64decode(shot["data"]))).convert("RGB")
    image.quantize(256, method=Image.Quantize.FASTOCTREE, dither=Image.Dither.NONE).save(path, optimize=True)


def _get(url: str) -> tuple[int, dict, bytes]:
    try:
        with urllib.request.urlopen(url, timeout=30) as response:
            return response.status, {k.lower(): v for k, v in response.headers.items()}, response.read()
    except urllib.error.HTTPError as e:
        return e.code, {k.lower(): v for k, v in e.headers.items()}, e.read()
