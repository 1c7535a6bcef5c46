/*
 * view.js: an explorer in a kernel's widget view (anywidget): JupyterLab, Notebook 7, VS Code, Binder, Colab.
 *
 * The view mounts the same explorer the hosted book shows, from the model's config, so a press repaints
 * in the browser. Then it tells the kernel the new values (the model's "values"), which computes
 * ex.matrix and the caption for them; values set from code in the kernel travel the other way. An
 * explorer only the kernel can compute (a learner's Head) reads the kernel's answers from "computed".
 * Values go to the kernel at most once a frame, after the frame that shows the new picture, so neither the
 * message nor the kernel's answer delays the picture, and a dragged slider does not queue a message a step.
 */
function same(a, b) {
  return JSON.stringify(a) === JSON.stringify(b);
}

function render({ model, el }) {
  const L = globalThis.AttentionLab;
  const root = document.createElement("div");
  root.className = "attention-explorer";
  el.append(root);
  // keys pressed in the view are the view's: JupyterLab's shortcuts (arrows move between cells in command
  // mode) would take them from its sliders and text boxes
  el.dataset.lmSuppressShortcuts = "true";
  el.addEventListener("keydown", (ev) => ev.stopPropagation());
  let latest = null;
  const send = () => {
    const values = latest;
    latest = null;
    if (!same(values, model.get("values"))) {
      model.set("values", values);
      model.save_changes();
    }
  };
  const host = {
    send(values) {  // after the frame that shows the new picture (a task after the frame's own work)
      if (latest === null) requestAnimationFrame(() => setTimeout(send, 0));
      latest = values;
    },
    computed(values) {  // the kernel's answer for these values, once it has sent it
      const got = model.get("computed");
      return got && same(got.values, values) ? got : null;
    }
  };
  const config = { ...model.get("config"), values: model.get("values") };
  const api = L.mount(root, config, host);
  root.dataset.explorer = config.explorer;
  const follow = () => {  // values set in the kernel (ex.set): draw them
    const values = model.get("values"), shown = api.values();
    Object.keys(values).forEach((name) => { if (!same(values[name], shown[name])) api.set(name, values[name]); });
  };
  const answered = () => api.refresh();
  model.on("change:values", follow);
  model.on("change:computed", answered);
  return () => {
    model.off("change:values", follow);
    model.off("change:computed", answered);
  };
}

export default { render };
