/*
 * controls.js: an explorer's controls, built from the specs its config carries
 * (attention_lab.explorers.controls.Control.spec) and checked as Control.accept checks them, with the
 * config's words (its "messages"). Kinds: "range" (a slider and a number box that applies on Enter),
 * "toggle" (buttons, aria-pressed), "select" (a menu), "text" and "seed" (a text box).
 */
(function (root) {
  "use strict";
  var L = root.AttentionLab = root.AttentionLab || {};

  var MAX_SEED = BigInt("9223372036854775807");

  /** A value the reader chose that cannot be drawn: ``message`` says what is wrong and how to fix it. */
  function BadInput(message) {
    this.message = message;
  }

  function el(tag, attrs, text) {
    var node = document.createElement(tag);
    Object.keys(attrs || {}).forEach(function (a) { node.setAttribute(a, attrs[a]); });
    if (text !== undefined) node.textContent = text;
    return node;
  }

  function shown(raw) {  // controls.shown: JSON of the value, or of its text
    return JSON.stringify(typeof raw === "string" || typeof raw === "boolean" || raw === null ? raw : String(raw));
  }

  /** The value control ``c`` takes for ``raw`` (typed, or given to set()), or BadInput in the config's words.
   * ``unreadable``: the browser could not read a number box's text as a number. */
  function accept(c, raw, unreadable, words) {
    var say = L.format.say;
    if (c.kind === "range") {
      var n = typeof raw === "number" ? raw : typeof raw === "string" && /^\s*-?\d+\s*$/.test(raw) ? Number(raw) : NaN;
      if (!unreadable && Number.isInteger(n) && n >= c.min && n <= c.max) return n;
      var got = unreadable ? words.unreadable : typeof raw === "string" && !raw.trim() ? words.nothing : shown(raw);
      throw new BadInput(say(words.range, { label: c.label, lo: c.min, hi: c.max, got: got }));
    }
    if (c.kind === "seed") {
      var text = typeof raw === "string" || typeof raw === "number" ? String(raw).trim() : "";
      if (/^[0-9]+$/.test(text)) {
        if (BigInt(text) <= MAX_SEED) return String(BigInt(text));
        throw new BadInput(say(words.seed_too_large, { hi: String(MAX_SEED), got: shown(raw) }));
      }
      throw new BadInput(say(words.seed, { hi: String(MAX_SEED), got: shown(raw) }));
    }
    if (c.kind === "text") {
      if (typeof raw === "string") return raw;
      throw new BadInput(say(words.text, { label: c.label, got: shown(raw) }));
    }
    var values = c.options.map(function (opt) { return opt[1]; });  // a toggle or a menu: one of its options
    if (values.indexOf(raw) >= 0) return raw;
    throw new BadInput(say(words.choice, { label: c.label, got: shown(raw),
      names: values.map(function (v) { return JSON.stringify(v); }).join(", ") }));
  }

  // each builder: (control spec, its element id, change(value, unreadable), note(text)) -> {box, set(value)}
  var BUILD = {
    range: function (c, cid, change) {
      var box = el("div", { class: "explorer-control explorer-range" });
      var track = el("input", { type: "range", id: cid, min: c.min, max: c.max, step: 1 });
      var number = el("input", { type: "number", min: c.min, max: c.max, step: 1, inputmode: "numeric",
        "aria-label": c.label + ", typed", class: "explorer-number" });
      track.addEventListener("input", function () { change(Number(track.value)); });
      // the browser gives "" for what it cannot read as a number (such as "--5"): badInput tells
      var typed = function () { change(number.value, number.validity.badInput); };
      number.addEventListener("change", typed);
      number.addEventListener("keydown", function (ev) { if (ev.key === "Enter") { ev.preventDefault(); typed(); } });
      box.append(el("label", { for: cid }, c.label), track, number);
      return { box: box, set: function (v) {
        track.value = v;
        track.setAttribute("aria-valuetext", String(v));
        if (document.activeElement !== number || Number(number.value) !== v) number.value = v;
      } };
    },
    toggle: function (c, cid, change) {
      var box = el("div", { class: "explorer-control explorer-toggle" });
      var group = el("div", { role: "group", "aria-labelledby": cid + "-label", class: "explorer-toggle" });
      box.append(el("span", { id: cid + "-label", class: "explorer-label" }, c.label), group);
      var buttons = c.options.map(function (opt) {
        var b = el("button", { type: "button", "aria-pressed": "false" }, opt[0]);
        b.addEventListener("click", function () { change(opt[1]); });
        group.append(b);
        return b;
      });
      return { box: box, set: function (v) {
        buttons.forEach(function (b, n) { b.setAttribute("aria-pressed", String(c.options[n][1] === v)); });
      } };
    },
    select: function (c, cid, change) {
      var box = el("div", { class: "explorer-control explorer-select" });
      var select = el("select", { id: cid });
      c.options.forEach(function (opt, n) { select.append(el("option", { value: String(n) }, opt[0])); });
      select.addEventListener("change", function () { change(c.options[Number(select.value)][1]); });
      box.append(el("label", { for: cid }, c.label), select);
      return { box: box, set: function (v) {
        var n = c.options.findIndex(function (opt) { return opt[1] === v; });
        select.value = String(n < 0 ? c.options.length - 1 : n);
      } };
    },
    text: function (c, cid, change, note) {
      var box = el("div", { class: "explorer-control explorer-" + c.kind });
      var input = el("input", { type: "text", id: cid, spellcheck: "false", autocomplete: "off",
        placeholder: c.placeholder || "" });
      if (c.kind === "seed") input.setAttribute("inputmode", "numeric");
      var apply = function () { change(input.value); };
      // a seed applies when it is complete (change, Enter); a text at every character typed
      input.addEventListener(c.kind === "seed" ? "change" : "input", apply);
      input.addEventListener("paste", function (ev) {
        var pasted = ev.clipboardData ? ev.clipboardData.getData("text") : "";
        if (c.kind === "text" && /[\r\n]/.test(pasted)) note("pasted");
      });
      input.addEventListener("keydown", function (ev) { if (ev.key === "Enter") { ev.preventDefault(); apply(); } });
      box.append(el("label", { for: cid }, c.label), input);
      return { box: box, set: function (v) { if (input.value !== String(v)) input.value = String(v); } };
    }
  };
  BUILD.seed = BUILD.text;

  /** A control's element and its set(value), for the spec ``c``. */
  function build(c, cid, change, note) {
    return BUILD[c.kind](c, cid, change, note);
  }

  L.controls = { accept: accept, build: build, BadInput: BadInput, el: el };
})(typeof globalThis !== "undefined" ? globalThis : this);
