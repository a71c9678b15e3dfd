// The page: sentences in, the service's vectors out (POST /v1/embed in its binary form: layer "all", and "average"
// or the model's own mix when chosen), then four views computed here from those vectors: the cosine heatmap, the
// nearest other occurrences per layer (the paper's Table 4), a PCA of one word's occurrences, and the model card
// (GET /v1/model).

import { ApiError, call, forgetKey, keepKey, storedKey } from "./api.js";
import { heatmap, scatter } from "./plots.js";
import { cosines, pca2, ranked, unit } from "./vectors.js";

const MAX_HEATMAP = 150; // occurrences in the heatmap: its cells grow as the square
const MAX_PCA = 200; // occurrences of one word in the projection
const NEIGHBOURS = 8; // per layer
const CONTEXT = 4; // words either side of a neighbour
// what Python's str.split() splits on, so that the page's tokens are those `elmo embed` and the service make
const WHITESPACE = /[\t\n\v\f\r\x1c-\x1f \x85\xa0\u1680\u2000-\u200a\u2028\u2029\u202f\u205f\u3000]+/;

const $ = (id) => document.getElementById(id);
const state = {
  setup: null,
  model: null,
  text: null, // the text the vectors below belong to
  sentences: [], // token lists, as sent
  occurrences: [], // {sentence, position, token}, in reading order
  layers: [], // per layer index: {raw, units}, one vector per occurrence
  views: new Map(), // "average" / "mix" -> {raw, units}
  selected: null, // the occurrence whose neighbours are shown
  view: null,
  renders: 0,
  runs: 0, // a run started later supersedes one still waiting for the service
};

function html(tag, attributes = {}, text = null) {
  const node = document.createElement(tag);
  for (const [name, value] of Object.entries(attributes)) node.setAttribute(name, String(value));
  if (text !== null) node.textContent = text;
  return node;
}

function setState(name, message) {
  $("main").dataset.state = name;
  if (message !== undefined) $("status").textContent = message;
  $("embed").disabled = name === "busy";
}

function showError(error) {
  // the service's own words, with its status; a problem found here (nothing typed, no answer) as it is
  $("error").textContent = error.status ? `The service refused (${error.status}): ${error.message}` : error.message;
  $("error").hidden = false;
  setState("error", "");
}

function clearError() {
  $("error").hidden = true;
  $("error").textContent = "";
}

function askForKey(message) {
  $("key-section").hidden = false;
  $("key-error").textContent = message || "";
  setState("key", "Waiting for the API key.");
  $("key-input").focus();
}

function tokenise(text) {
  return text.split(/\r\n|\r|\n/).map((line) => line.split(WHITESPACE).filter(Boolean)).filter((s) => s.length);
}

function layerName(index) {
  const top = state.model.num_layers - 1;
  if (index === 0) return "token layer (characters only, no context)";
  return index === top ? `LSTM layer ${index} (top)` : `LSTM layer ${index}`;
}

function fillLayers() {
  const select = $("layer");
  const before = select.value;
  select.replaceChildren();
  for (let index = 0; index < state.model.num_layers; index++) {
    select.append(html("option", { value: index }, `${index}: ${layerName(index)}`));
  }
  select.append(html("option", { value: "average" }, "average of all layers"));
  const mix = html("option", { value: "mix" }, "the model's own mix");
  if (!state.model.mix) {
    mix.disabled = true;
    mix.textContent += " (this model has none)";
  }
  select.append(mix);
  select.value = before && [...select.options].some((o) => o.value === before && !o.disabled)
    ? before : String(state.model.num_layers - 1);
}

function describeChoice(choice) {
  if (choice === "average") return "the average of all layers";
  if (choice === "mix") return "the model's own mix";
  return `layer ${choice}, the ${layerName(Number(choice))}`;
}

function renderCard() {
  const m = state.model;
  $("model-name").textContent = m.model;
  const mix = m.mix
    ? `${softmax(m.mix.weights).map((w) => w.toFixed(3)).join(", ")} (after the softmax; before: ${
      m.mix.weights.map((w) => w.toFixed(3)).join(", ")}), gamma ${m.mix.gamma.toFixed(3)}, from ${m.mix.source}`
    : "none (the layer menu offers the average)";
  const rows = [
    ["Model", m.model],
    ["Family", m.family ?? "not reported"],
    ["Layers", `${m.num_layers}: the token layer and ${m.num_layers - 1} LSTM layers`],
    ["Dimensions", `${m.output_dim} per layer (forward and backward, ${m.output_dim / 2} each)`],
    ["Precision", m.precision],
    ["Device", m.device],
    ["Initial state", m.initial_state],
    ["Trained mix", mix],
    ["Limits", `${m.limits.max_request_sentences} sentences, ${m.limits.max_sentence_tokens} tokens per sentence, ${
      m.limits.max_request_tokens} tokens per request`],
  ];
  $("card").replaceChildren(...rows.flatMap(([term, value]) => [html("dt", {}, term), html("dd", {}, value)]));
  $("forget-key").hidden = !storedKey();
}

function softmax(weights) {
  const top = Math.max(...weights);
  const e = weights.map((w) => Math.exp(w - top));
  const sum = e.reduce((a, b) => a + b, 0);
  return e.map((x) => x / sum);
}

// The vectors of one layer choice: an index is a slice of the "all" answer; "average" and "mix" are asked of the
// service, so their arithmetic is the service's own.
async function viewOf(choice, sentences) {
  if (/^\d+$/.test(choice)) return state.layers[Number(choice)];
  const { views, occurrences } = state; // this text's: a newer text replaces both while the call is out
  if (!views.has(choice)) {
    const fields = choice === "mix"
      ? { layer: "mix", mix_weights: state.model.mix.weights, mix_gamma: state.model.mix.gamma }
      : { layer: "average" };
    const arrays = await call("/v1/embed", { sentences, ...fields }, true); // (n, 2P) each
    const raw = occurrences.map((o) => row(arrays[o.sentence], o.position));
    views.set(choice, { raw, units: raw.map(unit) });
  }
  return views.get(choice);
}

// Row `index` of a 2-D or 3-D array from the binary answer (a 3-D one's first axis: `layer`).
function row({ shape, data }, index, layer = 0) {
  const width = shape[shape.length - 1];
  const start = (layer * shape[shape.length - 2] + index) * width;
  return data.subarray(start, start + width);
}

function adopt(text, sentences, arrays) {
  sentences.forEach((tokens, s) => {
    if (arrays[s].shape[1] !== tokens.length) {
      throw new ApiError(0, `sentence ${s + 1}: ${arrays[s].shape[1]} vectors for ${tokens.length} tokens`);
    }
  });
  state.text = text;
  state.sentences = sentences;
  state.occurrences = sentences.flatMap((tokens, sentence) =>
    tokens.map((token, position) => ({ sentence, position, token })));
  state.layers = Array.from({ length: state.model.num_layers }, (_, l) => {
    const raw = state.occurrences.map((o) => row(arrays[o.sentence], o.position, l));
    return { raw, units: raw.map(unit) };
  });
  state.views = new Map();
  state.selected = null;
}

async function run() {
  clearError();
  const text = $("sentences").value;
  const sentences = tokenise(text);
  if (!sentences.length) {
    showError(new ApiError(0, "There is nothing to embed: type a sentence."));
    return;
  }
  const choice = $("layer").value;
  const run = ++state.runs;
  setState("busy", `Embedding ${sentences.length} sentences…`);
  try {
    if (text !== state.text) {
      state.text = null;
      const arrays = await call("/v1/embed", { sentences, layer: "all" }, true); // (L + 1, n, 2P) each
      if (run !== state.runs) return;
      adopt(text, sentences, arrays);
    }
    const view = await viewOf(choice, sentences);
    if (run !== state.runs) return;
    state.view = view;
  } catch (error) {
    if (run !== state.runs) return;
    clearResults();
    if (error.status === 401) {
      forgetKey(error.key);
      askForKey(error.message);
      return;
    }
    showError(error);
    return;
  }
  render();
  const count = state.occurrences.length;
  setState("ready", `${state.sentences.length} sentences, ${count} occurrences; ${describeChoice(choice)}.`);
}

function clearResults() {
  for (const id of ["words", "heatmap", "neighbours", "pca", "heatmap-value", "pca-value"]) $(id).replaceChildren();
}

function render() {
  renderPcaChoices();
  if (state.selected === null) { // the first occurrence of the word the projection shows
    const word = $("pca-word").value;
    state.selected = Math.max(0, state.occurrences.findIndex((o) => o.token === word));
  }
  renderWords();
  renderHeatmap();
  renderNeighbours();
  renderPca();
  state.renders += 1;
  $("main").dataset.renders = state.renders;
}

function renderWords() {
  let k = 0; // occurrences are in reading order
  const lines = state.sentences.map((tokens, s) => {
    const line = html("p", { class: "sentence" });
    const badge = html("span", { class: `badge s${s % 10}`, "aria-label": `sentence ${s + 1}` }, String(s + 1));
    line.append(badge, " ");
    tokens.forEach((token) => {
      const button = html("button", { type: "button", class: "word", "data-k": k,
        "aria-pressed": k === state.selected }, token);
      const occurrence = k++;
      button.addEventListener("click", () => pick(occurrence));
      line.append(button, " ");
    });
    return line;
  });
  $("words").replaceChildren(...lines);
}

function pick(k) {
  state.selected = k;
  for (const button of $("words").querySelectorAll("button.word")) {
    button.setAttribute("aria-pressed", String(Number(button.dataset.k) === k));
  }
  const focused = document.activeElement && document.activeElement.closest("#heatmap");
  renderHeatmap();
  if (focused) $("heatmap").querySelector("svg").focus(); // Enter on the map: stay on it
  renderNeighbours();
}

function label(k) {
  const o = state.occurrences[k];
  return `${o.token} (sentence ${o.sentence + 1})`;
}

function renderHeatmap() {
  const shown = state.occurrences.slice(0, MAX_HEATMAP);
  const matrix = cosines(state.view.units.slice(0, MAX_HEATMAP));
  const tooltip = $("tooltip");
  const selected = state.selected !== null && state.selected < shown.length ? state.selected : null;
  heatmap($("heatmap"), shown, matrix, {
    selected,
    width: $("heatmap").clientWidth,
    hover: (i, j, event) => {
      if (i === null) {
        tooltip.hidden = true;
        return;
      }
      const text = `${label(i)} × ${label(j)}: ${matrix[i][j].toFixed(4)}`;
      $("heatmap-value").textContent = text;
      tooltip.textContent = text;
      tooltip.hidden = !event;
      if (event) {
        tooltip.style.left = `${event.pageX + 12}px`;
        tooltip.style.top = `${event.pageY + 12}px`;
      }
    },
    pick,
  });
  if (state.occurrences.length > MAX_HEATMAP) {
    $("heatmap").append(html("p", { class: "hint" },
      `The map shows the first ${MAX_HEATMAP} of ${state.occurrences.length} occurrences.`));
  }
  if (!performance.getEntriesByName("elmo:first-heatmap").length) performance.mark("elmo:first-heatmap");
}

function context(k) {
  const o = state.occurrences[k];
  const tokens = state.sentences[o.sentence];
  const from = Math.max(0, o.position - CONTEXT);
  const to = Math.min(tokens.length, o.position + CONTEXT + 1);
  const span = html("span", { class: "context" });
  if (from > 0) span.append("… ");
  span.append(tokens.slice(from, o.position).join(" "), " ", html("mark", {}, o.token), " ",
    tokens.slice(o.position + 1, to).join(" "));
  if (to < tokens.length) span.append(" …");
  return span;
}

function renderNeighbours() {
  const k = state.selected;
  const target = $("neighbours");
  if (k === null || k >= state.occurrences.length) {
    target.replaceChildren();
    return;
  }
  const query = state.occurrences[k];
  const sameWord = $("same-word").checked;
  const candidates = state.occurrences.map((o, i) => i).filter((i) => !sameWord
    || state.occurrences[i].token === query.token);
  const heading = html("p", { class: "query" });
  heading.append("Nearest to ", html("strong", {}, query.token), ` in sentence ${query.sentence + 1}: `,
    context(k));
  const columns = state.layers.map((layer, l) => {
    const column = html("section", { class: "column", "data-layer": l, "aria-label": `layer ${l}` });
    column.append(html("h3", {}, `${l}: ${layerName(l)}`));
    const list = html("ol", {});
    for (const { k: other, value } of ranked(layer.units, k, candidates).slice(0, NEIGHBOURS)) {
      const o = state.occurrences[other];
      const item = html("li", { "data-k": other, "data-sentence": o.sentence, "data-position": o.position,
        "data-value": value });
      item.append(html("span", { class: `value s${o.sentence % 10}`, title: `sentence ${o.sentence + 1}` },
        value.toFixed(4)), " ", context(other));
      list.append(item);
    }
    if (!list.children.length) list.append(html("li", { class: "hint" }, "no other occurrence"));
    column.append(list);
    return column;
  });
  const grid = html("div", { class: "columns" });
  grid.append(...columns);
  target.replaceChildren(heading, grid);
}

function renderPcaChoices() {
  const select = $("pca-word");
  const before = select.value;
  const counts = new Map();
  for (const o of state.occurrences) counts.set(o.token, (counts.get(o.token) || 0) + 1);
  const types = [...counts.entries()].sort((a, b) => b[1] - a[1] || a[0].localeCompare(b[0]));
  select.replaceChildren(...types.map(([token, count]) => html("option", { value: token },
    `${token} (${count} ${count === 1 ? "occurrence" : "occurrences"})`)));
  const examples = Object.keys(state.setup.examples); // an example's word, else the commonest word
  const wordy = types.find(([token, count]) => count > 1 && examples.includes(token))
    || types.find(([token]) => /\p{L}/u.test(token)) || types[0];
  select.value = counts.has(before) ? before : wordy[0];
}

function renderPca() {
  const word = $("pca-word").value;
  const ks = state.occurrences.map((o, k) => k).filter((k) => state.occurrences[k].token === word)
    .slice(0, MAX_PCA);
  const target = $("pca");
  if (!ks.length) {
    target.replaceChildren();
    return;
  }
  const { points, shares } = pca2(ks.map((k) => state.view.raw[k]));
  const sentences = ks.map((k) => state.occurrences[k].sentence);
  const describe = (i) => `sentence ${sentences[i] + 1}: ${state.sentences[sentences[i]].join(" ")}`;
  scatter(target, points, sentences, describe, (i) => {
    $("pca-value").textContent = i === null ? "" : describe(i);
  });
  const note = shares[0] > 0
    ? `PC 1 holds ${(100 * shares[0]).toFixed(0)}% of the variance of these ${ks.length} vectors, PC 2 ${
      (100 * shares[1]).toFixed(0)}%.`
    : `All ${ks.length} occurrences have the same vector here: this layer sees no context.`;
  const legend = html("ul", { class: "legend" });
  for (const s of [...new Set(sentences)]) {
    const item = html("li", {});
    item.append(html("span", { class: `swatch s${s % 10}` }), ` ${s + 1}: ${state.sentences[s].join(" ")}`);
    legend.append(item);
  }
  target.append(html("p", { class: "hint" }, note), legend);
}

async function connect() {
  setState("busy", "Reading the model card…");
  try {
    state.model = await call("/v1/model");
  } catch (error) {
    if (error.status === 401) {
      forgetKey(error.key);
      askForKey(error.message);
    } else {
      showError(error);
    }
    return;
  }
  $("key-section").hidden = true;
  $("key-error").textContent = "";
  renderCard();
  fillLayers();
  await run();
}

function renderExamples() {
  const examples = Object.entries(state.setup.examples);
  $("examples").replaceChildren(...examples.map(([word, sentences]) => {
    const button = html("button", { type: "button", class: "example" }, word);
    button.addEventListener("click", () => {
      $("sentences").value = sentences.join("\n");
      if (state.model) run();
    });
    return button;
  }));
  if (!$("sentences").value.trim() && examples.length) $("sentences").value = examples[0][1].join("\n");
}

function bind() {
  $("key-form").addEventListener("submit", (event) => {
    event.preventDefault();
    keepKey($("key-input").value.trim());
    $("key-input").value = "";
    connect();
  });
  $("text-form").addEventListener("submit", (event) => {
    event.preventDefault();
    if (state.model) run();
  });
  $("layer").addEventListener("change", () => {
    if (state.model) run();
  });
  $("pca-word").addEventListener("change", () => {
    if (state.view) renderPca();
  });
  $("same-word").addEventListener("change", () => {
    if (state.view) renderNeighbours();
  });
  $("forget-key").addEventListener("click", () => {
    forgetKey();
    $("forget-key").hidden = true;
    if (state.setup.api_key_required) askForKey("");
  });
}

async function boot() {
  bind();
  try {
    const response = await fetch("/page/setup.json", { cache: "no-store" });
    state.setup = await response.json();
  } catch (error) {
    showError(new ApiError(0, `The page's set-up did not load (${error.message}).`));
    return;
  }
  renderExamples();
  if (state.setup.api_key_required && !storedKey()) {
    askForKey("");
    return;
  }
  await connect();
}

boot();
