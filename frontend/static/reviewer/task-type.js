// The session's task type and the reviewer's word on it: a choice of the three types and a
// Save button that sends `correct_task`. The answer says what is recorded; the session's
// decoding does not change (it ran with the preset its first label chose).
import { command } from "./commands.js";
import { notify, notifyError } from "./notice.js";
import { $, data, fill, L } from "./page.js";
import { refreshTimeline } from "./timeline.js";

function shown(correction) {
  if (!correction) return "";
  const values = { label: L.taskTypes[correction.corrected] || correction.corrected, reviewer: correction.corrected_by };
  return fill(correction.given === correction.corrected ? L.taskConfirmed : L.taskCorrected, values);
}

function save() {
  const button = $("task-correct-save");
  button.disabled = true;
  command("correct_task", { task_type: $("task-correct").value })
    .then((result) => {
      $("task-correction").textContent = shown(result.task_correction);
      notify(L.taskSaved);
      refreshTimeline(); // the correction is an audit record
    })
    .catch(notifyError)
    .finally(() => (button.disabled = false));
}

export function bindTaskType() {
  if (!$("task-correct-save")) return;
  $("task-correction").textContent = shown(data.taskCorrection);
  $("task-correct-save").addEventListener("click", save);
}
