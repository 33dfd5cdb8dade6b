// What every module of the session page shares: the data the server rendered into the page
// (reviewer/web/views.py, `page-data`), its labels, and small helpers to build elements.
export const data = JSON.parse(document.getElementById("page-data").textContent);
export const L = data.labels;
export const $ = (id) => document.getElementById(id);

// Work that can wait until the frame now being prepared is on screen: at a pause the panel is
// painted first, the plots and the attention bars a frame later.
export const afterPaint = (work) => requestAnimationFrame(() => setTimeout(work, 0));

// A label's `%(name)s` places filled from `values`.
export const fill = (template, values) => template.replace(/%\((\w+)\)s/g, (_, key) => String(values[key] ?? ""));

// An entropy in its unit (nats), as the reasons and the audit graphs give it.
export const nats = (value) => fill(L.nats, { value: value.toFixed(2) });

export function line(text, className) {
  const element = document.createElement("div");
  element.textContent = text;
  if (className) element.className = className;
  return element;
}

export function chip(text) {
  const element = document.createElement("code");
  element.className = "chip";
  element.translate = false; // the model's own text
  element.textContent = text;
  return element;
}

// The server says what the backend offers (inference/backend.py features).
export const hasFeature = (name) => (data.features || []).includes(name);
