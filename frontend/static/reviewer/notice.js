// The notice under the page's head: what just happened, or what went wrong (for 8 s).
import { $ } from "./page.js";

let noticeTimer = null;

export function notify(text, bad) {
  const notice = $("notice");
  notice.textContent = text;
  notice.classList.toggle("bad", !!bad);
  notice.hidden = false;
  clearTimeout(noticeTimer);
  noticeTimer = setTimeout(() => (notice.hidden = true), 8000);
}

export const notifyError = (error) => notify(error.message, true);

// What the reviewer had selected (or a word's menu) no longer stands where it stood: the text
// changed under it, and nothing is done with it. Its words are rendered into the page (#notice).
export function textChanged() {
  const error = new Error($("notice").dataset.textChanged);
  error.textChanged = true;
  return error;
}

export const notifyTextChanged = () => notify(textChanged().message, true);
