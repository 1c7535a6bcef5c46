// pydata-sphinx-theme reads the colour mode from localStorage and logs a console error on a reader's
// first visit, when none is stored yet; start from "auto" (follow the system setting) instead.
if (!document.documentElement.dataset.mode) {
  document.documentElement.dataset.mode = "auto";
}
