// Why a policy fired, in the page's language: the template for its kind filled from the
// decision's evidence; the engine's own (English) reason when there is none or a value is
// missing.
import { data } from "./page.js";
import { reasonNumbers } from "./words.js";

export const policyName = (name) => (data.policyNames || {})[name] || name;

export function reasonText(decision) {
  const template = (data.reasonTemplates || {})[decision.kind];
  if (!template) return decision.reason || "";
  const values = { ...(decision.evidence || {}) };
  if (Array.isArray(values.window)) [values.start, values.end] = values.window;
  if (values.object && typeof values.object === "object" && values.key in values.object) {
    values.value = JSON.stringify(values.object[values.key]);
  }
  // A value and the threshold it was compared with are shown with the same digits, as many
  // as it takes for them to read apart.
  const keys = [...template.matchAll(/%\((\w+)\)s/g)].map((match) => match[1]);
  const numbers = reasonNumbers(values, keys, (key) => isProbability(decision.kind, key));
  let missing = false;
  const text = template.replace(/%\((\w+)\)s/g, (_, key) => {
    const value = values[key];
    if (value === undefined || value === null) missing = true;
    return key in numbers ? numbers[key] : String(value);
  });
  return missing ? decision.reason || "" : text;
}

function isProbability(kind, key) {
  return /prob/.test(key) || (key === "threshold" && ["low_confidence", "overconfidence"].includes(kind));
}
