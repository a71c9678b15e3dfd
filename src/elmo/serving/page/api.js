// Calls to the service's JSON API, with the API key the user gave (kept in this tab only: sessionStorage).

const KEY = "elmo-api-key";
const NPY = "application/x-npy";
const RETRIES = 3;

export class ApiError extends Error {
  constructor(status, message, key = null) {
    super(message);
    this.status = status;
    this.key = key; // the API key the refused call carried
  }
}

export function storedKey() {
  return sessionStorage.getItem(KEY);
}

export function keepKey(key) {
  sessionStorage.setItem(KEY, key);
}

// Forget the key, or only `refused`: a 401 for a key the user has since replaced says nothing of the new one.
export function forgetKey(refused) {
  if (refused === undefined || storedKey() === refused) sessionStorage.removeItem(KEY);
}

// GET path, or POST body as JSON; the parsed answer, or ApiError with the service's own message. A 503 (the queue
// is full) is retried after its Retry-After, a few times. `binary`: ask for the binary answer of POST /v1/embed
// (a fifth of the JSON's bytes, nothing to parse) and return its arrays.
export async function call(path, body, binary = false) {
  const headers = { Accept: binary ? NPY : "application/json" };
  const key = storedKey();
  if (key) headers.Authorization = `Bearer ${key}`;
  const init = { method: "GET", headers, cache: "no-store" };
  if (body !== undefined) {
    init.method = "POST";
    headers["Content-Type"] = "application/json";
    init.body = JSON.stringify(body);
  }
  for (let attempt = 0; ; attempt++) {
    let response;
    try {
      response = await fetch(path, init);
    } catch (e) {
      throw new ApiError(0, `The service did not answer (${e.message}).`);
    }
    if (response.status === 503 && attempt < RETRIES) {
      const seconds = Number(response.headers.get("Retry-After")) || 1;
      await new Promise((resolve) => setTimeout(resolve, 1000 * seconds));
      continue;
    }
    if (response.ok && binary) return readNpy(await response.arrayBuffer());
    const text = await response.text();
    let data = null;
    try {
      data = JSON.parse(text);
    } catch {
      data = null;
    }
    if (!response.ok) {
      const message = data && typeof data.error === "string" ? data.error : `${response.status} ${response.statusText}`;
      throw new ApiError(response.status, message, key);
    }
    return data;
  }
}

// The binary answer: .npy files (format 1.0, little-endian float32, C order) one after another, one per sentence
// -> [{shape, data}], data a Float32Array (a copy, so that it is aligned whatever the header's length).
export function readNpy(buffer) {
  const bytes = new Uint8Array(buffer);
  const view = new DataView(buffer);
  const arrays = [];
  let at = 0;
  while (at < bytes.length) {
    const length = view.getUint16(at + 8, true);
    const header = String.fromCharCode(...bytes.subarray(at + 10, at + 10 + length));
    const shape = /'shape':\s*\(([^)]*)\)/.exec(header);
    if (String.fromCharCode(...bytes.subarray(at + 1, at + 6)) !== "NUMPY" || !header.includes("'<f4'")
        || !shape || header.includes("True")) {
      throw new ApiError(0, `The binary answer holds an array this page cannot read (at byte ${at}).`);
    }
    const dims = shape[1].split(",").map((d) => d.trim()).filter(Boolean).map(Number);
    const start = at + 10 + length;
    const end = start + 4 * dims.reduce((a, b) => a * b, 1);
    arrays.push({ shape: dims, data: new Float32Array(buffer.slice(start, end)) });
    at = end;
  }
  return arrays;
}
