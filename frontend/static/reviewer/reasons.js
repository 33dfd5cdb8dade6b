// Why a policy fired, in the page's language: the template for its kind filled from the
// decision's evidence; the engine's own (English) reason when there is none or a value is
// missing.
import { data } from "./page.js";
import { percent } from "./words.js";

export const policyName = (name) => (data.policyNames || {})[name] || name;

export function reasonText(decision) {
  const template = (data.reasonTemplates || {})[decision.kind];
  if (!template) return decision.reason || "";
  const values = { ...(decision.evidence || {}) };
  if (Array.isArray(values.window)) [values.start, values.end] = values.window;
  if (values.object && typeof values.object === "object" && values.key in values.object) {
    values.value = JSON.stringify(values.object[values.key]);
  }
  let missing = false;
  const text = template.replace(/%\((\w+)\)s/g, (_, key) => {
    const value = values[key];
    if (value === undefined || value === null) missing = true;
    if (typeof value === "number" && isProbability(decision.kind, key)) return percent(value);
    return typeof value === "number" && !Number.isInteger(value) ? value.toFixed(2) : String(value);
  });
  return missing ? decision.reason || "" : text;
}

function isProbability(kind, key) {
  return /prob/.test(key) || (key === "threshold" && ["low_confidence", "overconfidence"].includes(kind));
}
