// The arithmetic of the page, in float64 over the float32 vectors the API returned: unit vectors, cosines, the
// ranking of nearest occurrences, and a two-component PCA (eigenvectors of the centred Gram matrix, by Jacobi).

export function dot(a, b) {
  let sum = 0;
  for (let i = 0; i < a.length; i++) sum += a[i] * b[i];
  return sum;
}

// The vector scaled to length 1 (a zero vector stays zero: its cosine with anything is 0).
export function unit(vector) {
  const norm = Math.sqrt(dot(vector, vector));
  return Float64Array.from(vector, (x) => (norm > 0 ? x / norm : 0));
}

// (n, n) cosines between unit vectors.
export function cosines(units) {
  return units.map((a) => Float64Array.from(units, (b) => dot(a, b)));
}

// Every other candidate (indices into units) by cosine to units[index], largest first; equal cosines keep the
// candidates' order.
export function ranked(units, index, candidates) {
  const query = units[index];
  return candidates
    .filter((k) => k !== index)
    .map((k) => ({ k, value: dot(query, units[k]) }))
    .sort((a, b) => b.value - a.value || a.k - b.k);
}

// The first two principal components of the rows: each row's coordinates and the share of the variance each
// component explains. Rows are centred; the components come from the (n, n) Gram matrix, so the cost does not
// depend on the vectors' dimension.
export function pca2(rows) {
  const n = rows.length;
  const mean = new Float64Array(rows[0].length);
  for (const row of rows) for (let i = 0; i < mean.length; i++) mean[i] += row[i] / n;
  const centred = rows.map((row) => Float64Array.from(row, (x, i) => x - mean[i]));
  const gram = centred.map((a) => Float64Array.from(centred, (b) => dot(a, b)));
  const spread = gram.reduce((sum, row, i) => sum + row[i], 0);
  // rounding leaves a trace of variance between equal vectors: below this share of their size it is none
  const total = spread > 1e-12 * rows.reduce((sum, row) => sum + dot(row, row), 0) ? spread : 0;
  const { values, vectors } = symmetricEigen(gram);
  const order = values.map((v, i) => i).sort((a, b) => values[b] - values[a]);
  const components = [0, 1].map((c) => {
    const i = order[c];
    if (i === undefined || total === 0) return { coordinates: new Float64Array(n), share: 0 };
    const value = Math.max(values[i], 0);
    const column = Float64Array.from(vectors, (row) => row[i]);
    const largest = column.reduce((best, x) => (Math.abs(x) > Math.abs(best) ? x : best), 0);
    const sign = largest < 0 ? -1 : 1; // a component's sign is arbitrary: fix it so the result is reproducible
    return {
      coordinates: column.map((x) => sign * x * Math.sqrt(value)),
      share: total > 0 ? value / total : 0,
    };
  });
  return {
    points: rows.map((row, k) => [components[0].coordinates[k], components[1].coordinates[k]]),
    shares: components.map((c) => c.share),
  };
}

// Eigenvalues and eigenvectors (as the columns of `vectors`) of a symmetric matrix, by cyclic Jacobi rotations;
// `matrix` is overwritten.
function symmetricEigen(matrix) {
  const n = matrix.length;
  const a = matrix;
  const vectors = Array.from({ length: n }, (_, i) => Float64Array.from({ length: n }, (_, j) => (i === j ? 1 : 0)));
  const scale = a.reduce((sum, row) => sum + dot(row, row), 0);
  for (let sweep = 0; sweep < 60; sweep++) {
    let off = 0;
    for (let p = 0; p < n; p++) for (let q = p + 1; q < n; q++) off += a[p][q] * a[p][q];
    if (off <= 1e-30 * scale || off === 0) break;
    for (let p = 0; p < n; p++) {
      for (let q = p + 1; q < n; q++) {
        if (a[p][q] === 0) continue;
        const theta = (a[q][q] - a[p][p]) / (2 * a[p][q]);
        const t = (theta >= 0 ? 1 : -1) / (Math.abs(theta) + Math.sqrt(theta * theta + 1));
        const c = 1 / Math.sqrt(t * t + 1);
        const s = t * c;
        for (let k = 0; k < n; k++) {
          const kp = a[k][p];
          const kq = a[k][q];
          a[k][p] = c * kp - s * kq;
          a[k][q] = s * kp + c * kq;
        }
        for (let k = 0; k < n; k++) {
          const pk = a[p][k];
          const qk = a[q][k];
          a[p][k] = c * pk - s * qk;
          a[q][k] = s * pk + c * qk;
        }
        for (let k = 0; k < n; k++) {
          const kp = vectors[k][p];
          const kq = vectors[k][q];
          vectors[k][p] = c * kp - s * kq;
          vectors[k][q] = s * kp + c * kq;
        }
      }
    }
  }
  return { values: a.map((row, i) => row[i]), vectors };
}
