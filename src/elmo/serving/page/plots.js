// SVG drawings: the cosine heatmap and the PCA scatter. Colours are SVG attributes, never inline styles, so the
// page runs under a Content-Security-Policy without 'unsafe-inline'.

const SVG = "http://www.w3.org/2000/svg";
const PALETTE = ["#1f77b4", "#d62728", "#2ca02c", "#ff7f0e", "#9467bd", "#8c564b", "#e377c2", "#17becf",
  "#bcbd22", "#7f7f7f"];
// a sequential scale (light yellow -> green -> dark blue), sampled at 5 stops and interpolated
const STOPS = [[255, 255, 217], [199, 233, 180], [65, 182, 196], [34, 94, 168], [8, 29, 88]];

export function sentenceColour(sentence) {
  return PALETTE[sentence % PALETTE.length];
}

export function element(tag, attributes = {}, parent = null, text = null) {
  const node = document.createElementNS(SVG, tag);
  for (const [name, value] of Object.entries(attributes)) node.setAttribute(name, String(value));
  if (text !== null) node.textContent = text;
  if (parent) parent.appendChild(node);
  return node;
}

function heat(t) {
  const x = Math.min(Math.max(t, 0), 1) * (STOPS.length - 1);
  const i = Math.min(Math.floor(x), STOPS.length - 2);
  const f = x - i;
  const rgb = STOPS[i].map((c, k) => Math.round(c + f * (STOPS[i + 1][k] - c)));
  return `rgb(${rgb.join(",")})`;
}

// The (n, n) heatmap of `matrix` over `occurrences` ({token, sentence}), fitted to `width` pixels where it can be;
// `hover(i, j, event)` when a cell is pointed at or reached with the keyboard (null: none), `pick(i)` on a click or
// Enter. Returns the <svg>.
export function heatmap(container, occurrences, matrix, { hover, pick, selected, width }) {
  const n = Math.max(occurrences.length, 1);
  const legend = 58;
  const longest = Math.min(12, Math.max(...occurrences.map((o) => o.token.length)));
  const fit = (margin) => Math.max(4, Math.min(12, Math.floor((Math.max(width, 300) - margin - legend) / n)));
  let font = 11;
  let cell = fit(longest * font * 0.62 + 8);
  font = Math.min(11, cell - 1);
  const labelled = cell >= 8;
  const margin = labelled ? longest * font * 0.62 + 8 : 4;
  if (!labelled) cell = fit(margin);
  const size = n * cell;
  let low = Infinity;
  for (const row of matrix) for (const value of row) low = Math.min(low, value);
  if (!(low < 1 - 1e-9)) low = 0;
  const colour = (value) => heat((value - low) / (1 - low));
  const svg = element("svg", {
    width: margin + size + legend, height: margin + size + 4, role: "img", tabindex: 0, class: "heatmap",
    "aria-label": `cosine similarity of ${n} word occurrences, from ${low.toFixed(2)} to 1`,
  });
  for (let i = 0; i < n; i++) {
    const o = occurrences[i];
    const label = o.token.length > 12 ? `${o.token.slice(0, 11)}…` : o.token;
    if (labelled) {
      const y = margin + i * cell + cell / 2;
      element("text", { x: margin - 4, y, "text-anchor": "end", "dominant-baseline": "central",
        "font-size": font, fill: sentenceColour(o.sentence), class: i === selected ? "row-label picked" : "row-label" },
      svg, label);
      const x = margin + i * cell + cell / 2;
      element("text", { transform: `translate(${x},${margin - 4}) rotate(-90)`, "dominant-baseline": "central",
        "font-size": font, fill: sentenceColour(o.sentence) }, svg, label);
    }
  }
  const cells = element("g", {}, svg);
  for (let i = 0; i < n; i++) {
    for (let j = 0; j < n; j++) {
      element("rect", { x: margin + j * cell, y: margin + i * cell, width: cell, height: cell,
        fill: colour(matrix[i][j]), "data-i": i, "data-j": j, "data-value": matrix[i][j] }, cells);
    }
  }
  for (let i = 1; i < n; i++) { // a line between sentences
    if (occurrences[i].sentence === occurrences[i - 1].sentence) continue;
    const at = margin + i * cell;
    element("line", { x1: margin, x2: margin + size, y1: at, y2: at, class: "boundary" }, svg);
    element("line", { x1: at, x2: at, y1: margin, y2: margin + size, class: "boundary" }, svg);
  }
  if (selected !== null && selected < n) {
    element("rect", { x: margin, y: margin + selected * cell, width: size, height: cell, class: "row-picked" }, svg);
  }
  const defs = element("defs", {}, svg);
  const gradient = element("linearGradient", { id: "heat-scale", x1: 0, x2: 0, y1: 1, y2: 0 }, defs);
  for (let k = 0; k <= 4; k++) element("stop", { offset: k / 4, "stop-color": heat(k / 4) }, gradient);
  const lx = margin + size + 8;
  element("rect", { x: lx, y: margin, width: 10, height: size, fill: "url(#heat-scale)" }, svg);
  element("text", { x: lx + 13, y: margin + 8, "font-size": 10 }, svg, "1");
  element("text", { x: lx + 13, y: margin + size, "font-size": 10 }, svg, low.toFixed(2));
  const cursor = element("rect", { width: cell, height: cell, class: "cursor", visibility: "hidden" }, svg);
  let at = [selected ?? 0, selected ?? 0];
  const show = (i, j, event) => {
    at = [i, j];
    cursor.setAttribute("x", margin + j * cell);
    cursor.setAttribute("y", margin + i * cell);
    cursor.setAttribute("visibility", "visible");
    hover(i, j, event);
  };
  cells.addEventListener("mouseover", (event) => {
    const { i, j } = event.target.dataset;
    if (i !== undefined) show(Number(i), Number(j), event);
  });
  svg.addEventListener("mouseleave", () => {
    cursor.setAttribute("visibility", "hidden");
    hover(null);
  });
  cells.addEventListener("click", (event) => {
    const { i } = event.target.dataset;
    if (i !== undefined) pick(Number(i));
  });
  svg.addEventListener("focus", () => show(at[0], at[1], null));
  svg.addEventListener("blur", () => {
    cursor.setAttribute("visibility", "hidden");
    hover(null);
  });
  svg.addEventListener("keydown", (event) => {
    const moves = { ArrowUp: [-1, 0], ArrowDown: [1, 0], ArrowLeft: [0, -1], ArrowRight: [0, 1] };
    if (event.key === "Enter" || event.key === " ") {
      event.preventDefault();
      pick(at[0]);
    } else if (moves[event.key]) {
      event.preventDefault();
      const [di, dj] = moves[event.key];
      show(Math.min(Math.max(at[0] + di, 0), n - 1), Math.min(Math.max(at[1] + dj, 0), n - 1), null);
    }
  });
  container.replaceChildren(svg);
  return svg;
}

// A scatter of `points` ([x, y]), coloured by `sentences[k]`; `describe(k)` is each point's accessible name.
export function scatter(container, points, sentences, describe, hover) {
  const width = 420;
  const height = 300;
  const pad = 24;
  const xs = points.map((p) => p[0]);
  const ys = points.map((p) => p[1]);
  const span = (values) => {
    const lo = Math.min(...values);
    const hi = Math.max(...values);
    return hi - lo > 1e-12 ? [lo, hi] : [lo - 1, hi + 1];
  };
  const [x0, x1] = span(xs);
  const [y0, y1] = span(ys);
  const sx = (x) => pad + ((x - x0) / (x1 - x0)) * (width - 2 * pad);
  const sy = (y) => height - pad - ((y - y0) / (y1 - y0)) * (height - 2 * pad);
  const svg = element("svg", { width, height, class: "scatter", role: "group",
    "aria-label": "the occurrences projected on two principal components" });
  element("line", { x1: pad, x2: width - pad, y1: height - pad, y2: height - pad, class: "axis" }, svg);
  element("line", { x1: pad, x2: pad, y1: pad, y2: height - pad, class: "axis" }, svg);
  element("text", { x: width - pad, y: height - 6, "text-anchor": "end", "font-size": 11 }, svg, "PC 1");
  element("text", { x: 4, y: pad - 8, "font-size": 11 }, svg, "PC 2");
  points.forEach(([x, y], k) => {
    const point = element("circle", {
      cx: sx(x), cy: sy(y), r: 7, fill: sentenceColour(sentences[k]), tabindex: 0, role: "img",
      "aria-label": describe(k), "data-k": k, "data-sentence": sentences[k], "data-pc1": x, "data-pc2": y,
    }, svg);
    point.addEventListener("mouseover", (event) => hover(k, event));
    point.addEventListener("focus", () => hover(k, null));
    point.addEventListener("mouseleave", () => hover(null));
    point.addEventListener("blur", () => hover(null));
    element("text", { x: sx(x) + 9, y: sy(y) + 4, "font-size": 11 }, svg, String(sentences[k] + 1));
  });
  container.replaceChildren(svg);
  return svg;
}
