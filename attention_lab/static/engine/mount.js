/*
 * mount.js: one explorer, mounted from its config, in the hosted book or in a kernel's widget view.
 *
 * The config (attention_lab.explorers.base.Explorer.config) holds the controls, the caption and the
 * messages, the values it starts on and the chapter's own tensors (base64 float32). The explorer module
 * of its name (explorers/NAME.js) computes each picture: compute(values) -> {matrix, tokens, result,
 * fields}, throwing BadInput for values it cannot draw; follow(name, values) gives the values a change
 * moves with it; panel(figure) adds a second picture. The book puts each explorer in its page as
 *   <div class="attention-explorer" data-explorer="NAME"><script type="application/json">CONFIG</script></div>
 * and view.js mounts one into a widget view, with a ``host`` that hears the values and answers what only
 * the kernel computes.
 *
 * After every paint the root's data-paints counts up and it dispatches "explorer:painted" (the keypress
 * bench and the tests wait on it). root.attentionExplorer gives tests the numbers: values(), set(name,
 * value) ("" or the message shown; a refused value leaves the explorer as it was), weights(h), alt(),
 * message(), open(i, j, h) and trace() (h: which picture, the first by default), part(name) (a computed
 * part besides the pictures, chapter 7's probs); refresh() paints again (the kernel's answer arrived).
 */
(function (root) {
  "use strict";
  var L = root.AttentionLab = root.AttentionLab || {};
  var el = L.controls.el, BadInput = L.controls.BadInput;
  L.explorers = L.explorers || {};

  // the words of the explorer's own frame (an explorer's controls, caption and messages are its config's)
  var WORDS = {
    stale: " The picture below is still the last setting that worked; it follows the controls again once this is fixed.",
    pasted: "This box holds one line: the pasted line breaks became spaces (␣ on the axes).",
    pending: "Your Head is running in the kernel; the picture follows when it answers."
  };

  // ---- what the explorer modules share -----------------------------------------------------------

  function Pending() {}  // a picture the kernel has not sent yet

  /** {shape, b64} (attention_lab.explorers.base.floats) -> an engine matrix of float32. */
  function floats(packed) {
    var bytes = atob(packed.b64), buf = new ArrayBuffer(bytes.length), u8 = new Uint8Array(buf);
    for (var i = 0; i < bytes.length; i++) u8[i] = bytes.charCodeAt(i);
    var rows = packed.shape[0], cols = packed.shape.length > 1 ? packed.shape[1] : 1;
    return L.engine.matrix(rows, cols, new Float32Array(buf));
  }

  function unpack(packed) {  // every {shape, b64} of an object
    var out = {};
    Object.keys(packed).forEach(function (key) { if (packed[key] && packed[key].b64) out[key] = floats(packed[key]); });
    return out;
  }

  function topRows(m, rows) {  // the first rows of a matrix (a view, not a copy)
    return L.engine.matrix(rows, m.cols, m.data.subarray(0, rows * m.cols));
  }

  /** q, k, v of a text from each character's and position's projections: x @ W.T = tok @ W.T + pos @ W.T. */
  function projected(p, ids) {
    var out = {};
    ["key", "query", "value"].forEach(function (part) {
      var tok = p["tok_" + part], pos = p["pos_" + part], d = tok.cols, m = new Float32Array(ids.length * d);
      for (var t = 0; t < ids.length; t++) {
        for (var c = 0; c < d; c++) m[t * d + c] = L.engine.at(tok, ids[t], c) + L.engine.at(pos, t, c);
      }
      out[part] = L.engine.matrix(ids.length, d, m);
    });
    return out;
  }

  function bad(cfg, key, fields) {
    return new BadInput(L.format.say(cfg.messages[key], fields));
  }

  /** The ids of a text (counted in code points, as Python counts), or BadInput (base.text_ids). */
  function textIds(text, cfg) {
    var chars = Array.from(text);
    if (!chars.length) throw bad(cfg, "text_empty", {});
    if (chars.length > cfg.block_size) throw bad(cfg, "text_too_long", { n: chars.length, block_size: cfg.block_size });
    var missing = chars.filter(function (ch, n) { return cfg.vocab.indexOf(ch) < 0 && chars.indexOf(ch) === n; });
    if (missing.length) {
      missing.sort(function (a, b) { return a.codePointAt(0) - b.codePointAt(0); });  // Python's sorted()
      throw bad(cfg, "not_in_vocab", { missing: missing.map(L.format.pyRepr).join(", "), marks: cfg.marks,
        size: cfg.vocab.length });
    }
    return L.engine.encode(chars, cfg.vocab);
  }

  /** The caption's words (Python's Explorer.alt) for ``values`` and their computed picture ``r``: the
   * config's template, or the one its toggle picks, filled from the values, constants and r's fields. */
  function caption(cfg, values, r) {
    var c = cfg.caption, template = typeof c === "string" ? c : c.cases[String(values[c.by])];
    var fields = Object.assign({}, values, cfg.constants, r.tokens !== undefined ? { tokens: r.tokens } : {},
      r.fields || {});
    return L.format.say(template, fields);
  }

  /** An explorer's ``follow`` for a menu of lines beside a text box: a chosen line fills the box, and
   * typing in the box picks "(your own text)", the menu's empty choice. */
  function followLine(name, v) {
    if (name === "line" && v.line) return { text: v.line };
    if (name === "text" && v.text !== v.line) return { line: "" };
    return null;
  }

  L.parts = { floats: floats, unpack: unpack, topRows: topRows, projected: projected, textIds: textIds, bad: bad,
    Pending: Pending, caption: caption, followLine: followLine };

  // ---- one explorer -----------------------------------------------------------------------------

  var made = 0;

  function Explorer(rootEl, cfg, host) {
    this.root = rootEl;
    this.cfg = cfg;
    this.host = host || null;
    this.spec = L.explorers[cfg.explorer](cfg, this.host);
    this.id = "explorer-" + ++made;
    this.values = Object.assign({}, cfg.values);
    this.shown = null;
    this.opened = null;
    this.said = "";
    this.notice = "";
    this.layout();
    this.buildControls();
    var self = this;
    this.heatmaps = [];  // one a picture: most explorers have one, chapter 7's one a head
    this.pictures = el("div", { class: "explorer-pictures" });
    this.figure.append(this.pictures);
    this.updatePanel = this.spec.panel ? this.spec.panel(this.figure) : null;
    this.trace = new L.TracePanel(this.tracePanel, function (di, dj) {
      var o = self.opened || { h: 0 }, at = self.heatmaps[o.h].active;
      self.open(at.i + di, at.j + dj, false, o.h);
    });
    contain(rootEl, this.body);
  }

  /** The heatmaps for ``n`` pictures, made once each, the first with the colour bar. */
  Explorer.prototype.heatmapsFor = function (pictures) {
    var self = this;
    while (this.heatmaps.length < pictures.length) {
      var h = this.heatmaps.length, box = el("div", { class: "explorer-picture" });
      if (pictures[h].title !== undefined) box.append(el("p", { class: "explorer-picture-title" }, pictures[h].title));
      this.pictures.append(box);
      this.heatmaps.push(new L.Heatmap(box, this.cfg.picture, this.cfg.colours, this.id + "-" + h, (function (n) {
        return function (i, j, focus, fromFocus) {
          var o = self.opened;
          if (!(fromFocus && o && o.h === n && o.i === i && o.j === j)) self.open(i, j, focus, n);
        };
      })(h), h === 0));
    }
    return this.heatmaps;
  };

  Explorer.prototype.layout = function () {
    this.root.textContent = "";
    this.row = el("div", { class: "explorer-controls" });
    this.messageArea = el("div", { class: "explorer-message", role: "status", "aria-live": "polite" });
    this.messageText = el("span");
    this.staleNote = el("span", { class: "explorer-stale-note" });
    this.messageArea.append(this.messageText, this.staleNote);
    this.messageArea.hidden = true;
    this.figure = el("div", { class: "explorer-figure" });
    this.caption = el("p", { class: "explorer-caption", id: this.id + "-caption" });
    this.tracePanel = el("div", { class: "explorer-trace", "aria-live": "polite", id: this.id + "-trace" });
    this.body = el("div", { class: "explorer-body" });
    this.body.append(this.row, this.messageArea, this.figure, this.caption, this.tracePanel);
    this.root.append(this.body);
  };

  Explorer.prototype.buildControls = function () {
    var self = this;
    this.inputs = {};
    this.controlNamed = {};
    this.cfg.controls.forEach(function (c) {
      self.controlNamed[c.name] = c;
      var built = L.controls.build(c, self.id + "-" + c.name, function (raw, unreadable) { self.change(c.name, raw, unreadable); },
        function (note) { self.notice = WORDS[note]; });
      self.inputs[c.name] = built;
      self.row.append(built.box);
    });
  };

  /** A message: a problem, with a note that the picture is still the last one that worked; or, with
   * ``info``, a remark on the picture just drawn. */
  Explorer.prototype.showMessage = function (text, info) {
    var now = text ? (info ? "i" : "!") + text : "";
    if (now === this.said) return;  // most paints have nothing to say: the page is then left untouched
    this.said = now;
    this.messageText.textContent = text ? (info ? "" : "⚠ ") + text : "";
    this.staleNote.textContent = text && !info ? WORDS.stale : "";
    this.messageArea.hidden = !text;
    this.messageArea.classList.toggle("is-info", !!info);
    this.root.classList.toggle("has-message", !!text && !info);
  };

  /** A control's new value, checked as its box checks it; then the picture is drawn again. */
  Explorer.prototype.change = function (name, raw, unreadable) {
    var value, cfg = this.cfg;
    try {
      if (!this.controlNamed[name]) {
        throw bad(cfg, "no_control", { got: JSON.stringify(name), names: Object.keys(this.controlNamed).join(", ") });
      }
      value = L.controls.accept(this.controlNamed[name], raw, unreadable, cfg.messages);
    } catch (err) {
      if (!(err instanceof BadInput)) throw err;
      this.showMessage(err.message);
      return false;
    }
    this.values[name] = value;
    var echo = this.spec.follow ? this.spec.follow(name, this.values) : null, values = this.values;
    Object.keys(echo || {}).forEach(function (other) { values[other] = echo[other]; });
    var painted = this.paint();
    if (this.host) this.host.send(Object.assign({}, this.values));
    return painted;
  };

  /** The picture(s) for the current values: {pictures: [{matrix, result, title}], tokens, fields}; an
   * explorer module with one picture returns its matrix and result instead of pictures. */
  Explorer.prototype.compute = function () {
    try {
      var r = this.spec.compute(this.values);
      if (!r.pictures) r.pictures = [{ matrix: r.matrix, result: r.result }];
      return r;
    } catch (err) {
      if (!(err instanceof BadInput || err instanceof Pending)) throw err;
      this.notice = "";
      this.showMessage(err instanceof Pending ? WORDS.pending : err.message, err instanceof Pending);
      this.syncInputs();  // the previous picture stays
      return null;
    }
  };

  Explorer.prototype.paint = function () {
    var r = this.compute();
    if (!r) return false;
    this.showMessage(this.notice, true);
    this.notice = "";
    this.shown = r;
    var heatmaps = this.heatmapsFor(r.pictures);
    r.pictures.forEach(function (p, h) { heatmaps[h].paint(p.matrix, r.tokens); });
    if (this.updatePanel) this.updatePanel(this.values, r.fields, r);
    this.caption.textContent = "Showing: " + this.alt();
    this.syncInputs();
    var T = r.pictures[0].matrix.rows, o = this.opened;
    if (o && o.i < T && o.j < T) this.open(o.i, o.j, false, o.h);
    else if (o) this.gone(o, T);
    this.root.dataset.paints = String(Number(this.root.dataset.paints || 0) + 1);
    this.root.dispatchEvent(new CustomEvent("explorer:painted", { bubbles: true }));
    return true;
  };

  Explorer.prototype.alt = function () {
    return caption(this.cfg, this.values, this.shown);
  };

  Explorer.prototype.syncInputs = function () {
    var values = this.values, inputs = this.inputs;
    Object.keys(inputs).forEach(function (name) { inputs[name].set(values[name]); });
  };

  /** Open cell (i, j) of picture ``h`` (the first by default): its ring, and the trace panel with how its
   * number was made. */
  Explorer.prototype.open = function (i, j, focus, h) {
    h = h || 0;
    var picture = this.shown.pictures[h], T = picture.matrix.rows;
    if (i < 0 || j < 0 || i >= T || j >= T) return;
    this.heatmaps.forEach(function (heatmap, n) { if (n !== h) heatmap.unmark(); });
    this.heatmaps[h].mark(i, j, focus);
    var r = picture.result;
    this.opened = { h: h, i: i, j: j, trace: r ? L.engine.trace(r, i, j, 3) : null };
    var shown = { matrix: picture.matrix, result: r, tokens: this.shown.tokens, title: picture.title };
    this.trace.show(shown, this.cfg.picture.kind, i, j, this.opened.trace);
  };

  Explorer.prototype.gone = function (o, T) {
    this.heatmaps[o.h].unmark();
    o.trace = null;
    this.trace.gone(o.i, o.j, T);
  };

  Explorer.prototype.api = function () {
    var self = this;
    return {
      values: function () { return Object.assign({}, self.values); },
      set: function (name, value) { return self.change(name, value) ? "" : self.messageText.textContent; },
      weights: function (h) {
        var m = self.shown.pictures[h || 0].matrix, out = [];
        for (var i = 0; i < m.rows; i++) {
          out.push(Array.prototype.map.call(m.data.subarray(i * m.cols, (i + 1) * m.cols),
            function (x) { return x === -Infinity ? null : x; }));
        }
        return out;
      },
      alt: function () { return self.alt(); },
      message: function () { return self.messageText.textContent; },
      open: function (i, j, h) { self.open(i, j, true, h); return self.opened.trace; },
      trace: function () { return self.opened && self.opened.trace; },
      part: function (name) {  // a computed part besides the pictures (chapter 7: probs, top), as plain arrays
        var v = self.shown[name];
        return v && typeof v !== "string" && typeof v.length === "number" ? Array.prototype.slice.call(v) : v;
      },
      refresh: function () { return self.paint(); }
    };
  };

  /**
   * The explorer never shrinks while it is used, and its box is of fixed size: the root keeps the tallest
   * height its body has had at this width and contains its own layout (explorers.css, .is-contained). A
   * press then lays out the explorer alone: neither a new caption nor a new number makes the browser
   * place the whole chapter again. A new width starts afresh; a taller body raises the height.
   */
  function contain(rootEl, body) {
    if (!window.ResizeObserver) return;
    var tallest = 0, wide = -1;
    new ResizeObserver(function () {
      var width = rootEl.clientWidth, height = body.getBoundingClientRect().height;
      if (width !== wide || height > tallest) {
        wide = width;
        tallest = height;
        rootEl.style.height = tallest + "px";
        rootEl.classList.add("is-contained");
      }
    }).observe(body);
  }

  /** Mount one root: its config from ``cfg`` or its own <script class="explorer-config">. */
  function mount(rootEl, cfg, host) {
    cfg = cfg || JSON.parse(rootEl.querySelector("script.explorer-config").textContent);
    var explorer = new Explorer(rootEl, cfg, host);
    rootEl.attentionExplorer = explorer.api();
    explorer.paint();
    return rootEl.attentionExplorer;
  }

  /**
   * On a chapter page the blocks around an explorer are long (thousands of elements): marked here,
   * explorers.css lets the browser skip those off screen (content-visibility: auto), except the block
   * holding an explorer, which is always drawn.
   */
  function markPage(rootEl) {
    var article = rootEl.closest(".bd-article"), hostEl = rootEl;
    if (!article) return;
    while (hostEl.parentElement && hostEl.parentElement.tagName !== "SECTION" && hostEl.parentElement !== article) {
      hostEl = hostEl.parentElement;
    }
    hostEl.classList.add("explorer-host");
    article.classList.add("explorer-page");
  }

  function mountAll() {
    Array.prototype.forEach.call(document.querySelectorAll(".attention-explorer[data-explorer]"), function (rootEl) {
      if (!rootEl.attentionExplorer && rootEl.querySelector("script.explorer-config")) {
        markPage(rootEl);
        mount(rootEl);
      }
    });
  }

  L.mount = mount;
  L.mountAll = mountAll;
})(typeof globalThis !== "undefined" ? globalThis : this);
