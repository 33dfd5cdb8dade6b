// A <select data-autosubmit> sends its form as soon as it changes (the page has no inline handler:
// the Content-Security-Policy refuses them).
document.querySelectorAll("select[data-autosubmit]").forEach((select) => {
  select.addEventListener("change", () => select.form.submit());
});
