// ESLint for the session page's modules, the other pages' scripts and the Node unit tests
// (`make lint-js`). Recommended rules only: the code's shape is the review's business.
import js from "@eslint/js";
import globals from "globals";

export default [
  js.configs.recommended,
  {
    files: ["frontend/static/**/*.js"],
    languageOptions: { sourceType: "module", globals: { ...globals.browser } },
  },
  {
    // Classic scripts of the other pages (no imports).
    files: ["frontend/static/reviewer/roi.js", "frontend/static/reviewer/autosubmit.js"],
    languageOptions: { sourceType: "script", globals: { ...globals.browser, Plotly: "readonly" } },
  },
  {
    files: ["frontend/tests/**/*.mjs"],
    languageOptions: { sourceType: "module", globals: { ...globals.node } },
  },
];
