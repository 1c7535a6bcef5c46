// The chapters' questions in the hosted page: the reader predicts, then checks, with no kernel.
//
// Each <div class="attention-question"> holds its question as JSON (book/_ext/page_questions.py writes
// it from the chapter's output metadata; attention_lab/questions.py computed it from the chapter's own
// tensors): the kind ("number", "choice" or "cells" of a grid to mark), the right answer and the answer each listed mistake gives,
// each with its message, and for numbers the tolerance. This module builds a small form, matches what
// the reader enters against those answers exactly as questions.check() does in a kernel, and shows the
// message in a live region, so a screen reader announces it. Nothing is sent anywhere.
(function () {
  "use strict";

  // "0.25", "1/4", "3e-4", "0,25", "−2" -> {value}; anything else -> {error}
  function parseNumber(text) {
    const s = String(text).trim().replace(/\u2212/g, "-").replace(/\s+/g, "");
    if (s === "") return { error: "Type a number first, such as 0.25 or 1/4." };
    const plain = /^[-+]?(\d+([.,]\d*)?|[.,]\d+)(e[-+]?\d+)?$/i;
    const parts = s.split("/");
    if (parts.length <= 2 && parts.every((p) => plain.test(p))) {
      const [a, b] = parts.map((p) => Number(p.replace(",", ".")));
      const value = parts.length === 2 ? a / b : a;
      if (Number.isFinite(value)) return { value };
    }
    return { error: `“${String(text).trim()}” is not a number: type one such as 0.25, 1/4 or 3e-4.` };
  }

  function within(x, value, tol) {
    return Math.abs(x - value) <= Math.max(tol.abs || 0, (tol.rel || 0) * Math.abs(value));
  }

  // the reader's entry -> {verdict: "right" | "mistake" | "none" | "bad", say}
  function judge(config, entry) {
    if (config.kind === "cells") {
      if (!entry.length) return { verdict: "bad", say: "Mark at least one cell first." };
      const key = JSON.stringify(entry.map((c) => c.map(Number)).sort((a, b) => a[0] - b[0] || a[1] - b[1]));
      const found = config.answers.find((a) => JSON.stringify(a.cells) === key);
      if (!found) return { verdict: "none", say: config.none };
      return { verdict: found.right ? "right" : "mistake", say: found.say };
    }
    if (config.kind === "choice") {
      const found = config.answers.find((a) => a.choice === entry);
      if (!found) return { verdict: "bad", say: "Choose one of the answers first." };
      return { verdict: found.right ? "right" : "mistake", say: found.say };
    }
    const read = parseNumber(entry);
    if (read.error) return { verdict: "bad", say: read.error };
    const near = config.answers.filter((a) => within(read.value, a.value, config.tolerance));
    if (!near.length) return { verdict: "none", say: config.none };
    near.sort((a, b) => Math.abs(read.value - a.value) - Math.abs(read.value - b.value));
    return { verdict: near[0].right ? "right" : "mistake", say: near[0].say };
  }

  function toleranceText(tol) {
    const parts = [];
    if (tol.abs) parts.push(`${tol.abs}`);
    if (tol.rel) parts.push(`${+(tol.rel * 100).toFixed(2)}%`);
    return parts.length === 2 ? `within ${parts[0]} or ${parts[1]}, whichever is larger,` : `within ${parts[0]}`;
  }

  function el(tag, attrs, text) {
    const node = document.createElement(tag);
    for (const [k, v] of Object.entries(attrs || {})) node.setAttribute(k, v);
    if (text !== undefined) node.textContent = text;
    return node;
  }

  function build(root) {
    const config = JSON.parse(root.querySelector("script.question-config").textContent);
    const id = "question-" + config.question;
    const form = el("form", { class: "question-form", novalidate: "" });
    const title = `Question ${config.number}: predict, then check`;
    let read;
    if (config.kind === "number") {
      form.append(el("p", { class: "question-title" }, title));
      const label = el("label", { for: id + "-input" }, `Your prediction of ${config.prompt}:`);
      const row = el("div", { class: "question-row" });
      const input = el("input", { id: id + "-input", type: "text", inputmode: "decimal", autocomplete: "off",
                                  spellcheck: "false", "aria-describedby": id + "-note" });
      row.append(input, el("button", { type: "submit", class: "question-check" }, "Check"));
      form.append(label, row);
      read = () => input.value;
    } else if (config.kind === "cells") {
      const set = el("fieldset", { "aria-describedby": id + "-note" });
      const legend = el("legend", {}, `${title}. `);
      legend.append(el("span", { class: "question-prompt" },
                       `Mark ${config.prompt}: rows are queries, columns are keys; press a cell to mark it.`));
      const grid = el("div", { class: "question-grid", style: `--size: ${config.size}` });
      grid.append(el("span", { class: "question-grid-label", "aria-hidden": "true" }));
      for (let j = 0; j < config.size; j++) {
        grid.append(el("span", { class: "question-grid-label", "aria-hidden": "true" }, `k${j}`));
      }
      for (let i = 0; i < config.size; i++) {
        grid.append(el("span", { class: "question-grid-label", "aria-hidden": "true" }, `q${i}`));
        for (let j = 0; j < config.size; j++) {
          const cell = el("button", { type: "button", class: "question-cell", "aria-pressed": "false",
                                      "aria-label": `query ${i}, key ${j}`, "data-i": i, "data-j": j });
          cell.addEventListener("click", () => {
            const on = cell.getAttribute("aria-pressed") !== "true";
            cell.setAttribute("aria-pressed", String(on));
            cell.textContent = on ? "✓" : "";
          });
          grid.append(cell);
        }
      }
      set.append(legend, grid);
      form.append(set, el("button", { type: "submit", class: "question-check" }, "Check"));
      read = () => Array.from(form.querySelectorAll(".question-cell[aria-pressed='true']"),
                              (b) => [Number(b.dataset.i), Number(b.dataset.j)]);
    } else {
      const set = el("fieldset", { "aria-describedby": id + "-note" });
      const legend = el("legend", {}, `${title}. `);
      legend.append(el("span", { class: "question-prompt" }, config.prompt));
      set.append(legend);
      for (const o of config.options) {
        const option = el("label", { class: "question-option" });
        const radio = el("input", { type: "radio", name: id, value: o.key });
        option.append(radio, el("span", {}, `(${o.key}) ${o.label}`));
        set.append(option);
      }
      form.append(set, el("button", { type: "submit", class: "question-check" }, "Check"));
      read = () => { const on = form.querySelector("input:checked"); return on ? on.value : null; };
    }
    const feedback = el("p", { class: "question-feedback", role: "status", "aria-live": "polite" });
    const how = config.kind === "number"
      ? `A number ${toleranceText(config.tolerance)} of a stored answer counts as it${config.hint ? "; " + config.hint : ""}. `
      : "";
    const note = el("p", { class: "question-note", id: id + "-note" },
                    how + "Your answer is checked in this page and sent nowhere; the page's source holds the answers.");
    form.append(feedback, note);
    form.addEventListener("submit", (event) => {
      event.preventDefault();
      const { verdict, say } = judge(config, read());
      feedback.textContent = say;
      root.dataset.verdict = verdict;
    });
    root.append(form);
    root.attentionQuestion = { config, judge: (entry) => judge(config, entry) };
  }

  window.attentionQuestions = { parseNumber, judge, within };
  const start = () => document.querySelectorAll(".attention-question").forEach(build);
  if (document.readyState === "loading") document.addEventListener("DOMContentLoaded", start);
  else start();
})();
