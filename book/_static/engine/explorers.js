/*
 * explorers.js: the chapters' explorers, live in the hosted book, computed with attention.js.
 *
 * book/_ext/page_explorers.py puts each explorer in its page as
 *   <div class="attention-explorer" data-explorer="NAME"><script type="application/json">CONFIG</script></div>
 * where CONFIG is what attention_lab.explorers recorded when the chapter ran (Explorer.page_config):
 * the values it starts on, the chapter's own tensors (base64 float32), and the colour maps of the
 * Python pictures. Each explorer below mirrors its Python class: the same controls and ranges, the
 * same compute (the picture's matrix), the same alt() words and the same messages for bad input.
 *
 * Every cell of a heatmap opens: click, tap or focus it (arrow keys move) and the trace panel says
 * how that number was made (attention.js's trace). After every paint the root's data-paints
 * counts up and it dispatches "explorer:painted" (course/bench/keypress.py and the tests wait on it).
 * root.attentionExplorer gives tests the numbers: values(), set(name, value), weights(), alt(),
 * message(), open(i, j) and the trace shown. set() checks a value as the control's box does (accept)
 * and returns "" or the message shown; a refused value leaves the explorer as it was.
 * window.AttentionExplorers.mount(root) mounts one root (JupyterLab's page view,
 * attention_lab/explorers/view.py).
 */
(function () {
  "use strict";
  var E = window.AttentionEngine;
  var C = 384;  // the lesson's d_model
  var ANNOTATE_MAX_T = 8;  // as attention_lab.plots: numbers in the cells up to this T

  // ---- reading the config ------------------------------------------------------------------

  /** {shape, b64} (attention_lab.explorers.floats) -> an engine matrix of float32. */
  function floats(packed) {
    var bytes = atob(packed.b64), buf = new ArrayBuffer(bytes.length), u8 = new Uint8Array(buf);
    for (var i = 0; i < bytes.length; i++) u8[i] = bytes.charCodeAt(i);
    var rows = packed.shape[0], cols = packed.shape.length > 1 ? packed.shape[1] : 1;
    return E.matrix(rows, cols, new Float32Array(buf));
  }

  /** The first `rows` rows of a matrix (a view, not a copy). */
  function topRows(m, rows) {
    return E.matrix(rows, m.cols, m.data.subarray(0, rows * m.cols));
  }

  function hexToRgb(hex) {
    var n = parseInt(hex.slice(1), 16);
    return [(n >> 16) & 255, (n >> 8) & 255, n & 255];
  }

  // ---- Python's words: f-string formats, repr, plural ------------------------------------------

  function fixed(x, digits) {  // f"{x:.2f}"
    return Number(x).toFixed(digits);
  }

  function general(x) {  // f"{x:g}" for the numbers an explorer is given (8.0 -> "8")
    return String(Number(Number(x).toPrecision(6)));
  }

  function significant(x, digits) {  // f"{x:.4g}" for 0.03 <= x <= 1, where no digit is a tie
    return String(Number(Number(x).toPrecision(digits)));
  }

  function plural(n, word) {
    return n + " " + word + (n === 1 ? "" : "s");
  }

  /** Python's repr() of a str: single quotes unless it holds ' and no ", and what Python does not count
   * as printable (controls, format characters, spaces other than " ", unassigned) escaped as it does. */
  var UNPRINTABLE = /[\p{Cc}\p{Cf}\p{Cs}\p{Co}\p{Cn}\p{Zl}\p{Zp}\p{Zs}]/u;
  var ESCAPES = { "\\": "\\\\", "\n": "\\n", "\t": "\\t", "\r": "\\r" };
  function pyRepr(s) {
    var quote = s.indexOf("'") >= 0 && s.indexOf('"') < 0 ? '"' : "'";
    var out = "";
    for (var ch of s) {
      if (ESCAPES[ch]) out += ESCAPES[ch];
      else if (ch === quote) out += "\\" + ch;
      else if (ch === " " || !UNPRINTABLE.test(ch)) out += ch;
      else out += pyEscape(ch.codePointAt(0));
    }
    return quote + out + quote;
  }

  function pyEscape(code) {  // \xhh, \uhhhh or \Uhhhhhhhh, as repr() writes a character it does not print
    var hex = code.toString(16);
    return code < 0x100 ? "\\x" + hex.padStart(2, "0") : code < 0x10000 ? "\\u" + hex.padStart(4, "0")
      : "\\U" + hex.padStart(8, "0");
  }

  function sorted(chars) {  // Python's sorted() of one-character strings: by code point
    return chars.slice().sort(function (a, b) { return a.codePointAt(0) - b.codePointAt(0); });
  }

  // a character as the axes show it (attention_lab.plots.token_label)
  var VISIBLE = { " ": "␣", "\n": "⏎", "\t": "⇥", "\r": "␍" };
  function tokenLabel(ch) {
    return VISIBLE[ch] || ch;
  }

  // ---- bad input: the Python explorer's messages --------------------------------------------

  function BadInput(message) {
    this.message = message;
  }

  /** attention_lab.explorers._text_ids: the ids of a text, or BadInput saying what is wrong. Python
   * counts code points, so the text is split into them first (an emoji is one character, not two). */
  function textIds(text, blockSize, vocab) {
    var chars = Array.from(text);
    if (!chars.length) {
      throw new BadInput("the text is empty: type at least one character (for example 'First Citizen:').");
    }
    if (chars.length > blockSize) {
      throw new BadInput("the text has " + chars.length + " characters, above block_size=" + blockSize +
        ", the longest sequence this head attends over: shorten it to at most " + blockSize + ".");
    }
    var missing = [];
    for (var t = 0; t < chars.length; t++) {
      if (vocab.indexOf(chars[t]) < 0 && missing.indexOf(chars[t]) < 0) missing.push(chars[t]);
    }
    if (missing.length) {  // attention_lab.text.encode's words
      var marks = vocab.split("").filter(function (ch) { return !/[A-Za-z0-9\s]/.test(ch); }).join("");
      throw new BadInput((missing.length === 1 ? "this character is" : "these characters are") +
        " not in the tiny-Shakespeare vocabulary: " + sorted(missing).map(pyRepr).join(", ") +
        "; use only the letters a-z and A-Z (no accents), the digit 3, space, newline and " + marks +
        " (all " + vocab.length + " characters are listed by attention_lab.text.vocab()).");
    }
    return E.encode(chars, vocab);
  }

  // ---- the six explorers, as attention_lab.explorers has them ------------------------------
  // each: controls(config) -> the control specs; compute(values) -> {matrix, tokens, result};
  // alt(values, r) -> the words of the Python explorer's alt()

  function slider(name, label, lo, hi) {
    return { name: name, kind: "range", label: label, min: lo, max: hi };
  }

  function toggle(name, label, options) {
    return { name: name, kind: "toggle", label: label, options: options };
  }

  var MAX_SEED = BigInt("9223372036854775807");

  /** The value a control takes for ``raw`` (typed, or given to set()), or BadInput with the words its
   * box shows. ``unreadable``: the browser could not read a number box's text as a number. */
  function accept(c, raw, unreadable) {
    var text = String(raw).trim();
    if (c.kind === "range") {
      var n = Number(text), typed = typeof raw === "string" || typeof raw === "number";
      if (typed && !unreadable && text !== "" && Number.isInteger(n) && n >= c.min && n <= c.max) return n;
      throw new BadInput(c.label + " must be a whole number from " + c.min + " to " + c.max + "; got " +
        (unreadable ? "something that is not a number" : text === "" ? "nothing" : JSON.stringify(String(raw))) +
        ". Type one in that range, or move the slider.");
    }
    if (c.kind === "seed") {
      var digits = /^[0-9]+$/.test(text);
      if (digits && BigInt(text) <= MAX_SEED) return String(BigInt(text));
      throw new BadInput("seed must be a whole number from 0 to " + MAX_SEED + "; got " + JSON.stringify(String(raw)) +
        (digits ? ". Type a smaller seed." : ". Type a seed of 0 or more."));
    }
    if (c.kind === "text") {
      if (typeof raw === "string") return raw;
      throw new BadInput(c.label + " must be a string of characters; got " + JSON.stringify(raw) + ".");
    }
    var names = c.options.map(function (opt) { return opt[1]; });  // a toggle or a menu: one of its options
    if (names.indexOf(raw) >= 0) return raw;
    throw new BadInput(c.label + " must be one of " + names.map(function (x) { return JSON.stringify(x); }).join(", ") +
      "; got " + JSON.stringify(raw) + ".");
  }

  var EXPLORERS = {};

  // chapter 1: T -> the normalized tril matrix, row t holding 1/(t+1)
  EXPLORERS.average = function (cfg) {
    return {
      kind: "weights",
      controls: [slider("T", "T (sequence length)", 1, cfg.max_T)],
      compute: function (v) {
        var T = v.T, w = new Float32Array(T * T);
        for (var i = 0; i < T; i++) {
          for (var j = 0; j <= i; j++) w[i * T + j] = 1 / (i + 1);  // ones on and below the diagonal, / row sum
        }
        return { matrix: E.matrix(T, T, w), result: null };
      },
      alt: function (v) {
        return "normalized tril matrix for T=" + v.T + ": row t holds 1/(t+1) on and left of the diagonal";
      }
    };
  };

  // chapter 2: d_k, T -> the raw scores q @ k.T of the chapter's sequence (first d_k columns)
  EXPLORERS.scores = function (cfg) {
    var q = floats(cfg.q_all), k = floats(cfg.k_all);
    return {
      kind: "scores", limit: cfg.limit,
      controls: [slider("head_size", "d_k (head_size)", 1, q.cols), slider("T", "T (sequence length)", 1, q.rows)],
      compute: function (v) {
        var r = E.attention(topRows(q, v.T), topRows(k, v.T), null, { headSize: v.head_size, mask: false });
        return { matrix: r.raw, scaled: r.scores, result: r };
      },
      alt: function (v, r) {
        var s = range(r.matrix), z = range(r.scaled);
        return "raw scores q·k for d_k=" + v.head_size + ", T=" + v.T + ": from " + fixed(s[0], 1) + " to " +
          fixed(s[1], 1) + " (divided by √d_k: " + fixed(z[0], 1) + " to " + fixed(z[1], 1) +
          "); colours clipped at ±" + general(cfg.limit);
      }
    };
  };

  // chapter 3: d_k, scaling -> softmax weights of unit-variance q and k; Var(q·k) against d_k
  EXPLORERS.scaling = function (cfg) {
    var q = floats(cfg.q), k = floats(cfg.k), variance = floats(cfg.variance).data;
    return {
      kind: "weights", variance: { d: cfg.d_values, of: function (d) { return variance[d - 1]; } },
      controls: [slider("head_size", "d_k (head_size)", 1, q.cols),
        toggle("scale", "scaling", [["raw q·k", false], ["q·k / √d_k", true]])],
      compute: function (v) {
        var r = E.attention(q, k, null, { headSize: v.head_size, scale: v.scale, mask: false });
        var w = r.weights, T = w.rows, maxSum = 0, entropySum = 0;
        for (var i = 0; i < T; i++) {
          var top = -Infinity, h = 0;
          for (var j = 0; j < T; j++) {
            var p = E.at(w, i, j);
            top = Math.max(top, p);
            if (p > 0) h -= p * Math.log2(p);
          }
          maxSum += top;
          entropySum += h;
        }
        return { matrix: w, result: r, meanMax: maxSum / T, meanEntropy: entropySum / T,
          variance: variance[v.head_size - 1] / (v.scale ? v.head_size : 1) };
      },
      alt: function (v, r) {
        // the scale multiplies every score before the softmax, as an inverse temperature does (1 unscaled)
        var scaling = v.scale ? "scaled by 1/√d_k = " + significant(1 / Math.sqrt(v.head_size), 4) +
          ", which acts as an inverse temperature" : "not scaled (an inverse temperature of 1)";
        return "softmax weights for d_k=" + v.head_size + ", " + scaling +
          ": mean largest weight " + fixed(r.meanMax, 2) + ", mean entropy " + fixed(r.meanEntropy, 2) +
          " bits (uniform: " + fixed(Math.log2(r.matrix.rows), 2) + "); " +
          (v.scale ? "Var(q·k / √d_k)" : "Var(q·k)") + " = " + fixed(r.variance, 1);  // of the softmax's logits
      }
    };
  };

  // chapter 4: T, mask -> softmax(q k^T / √d_k), the future masked or not
  EXPLORERS.masking = function (cfg) {
    var q = floats(cfg.q), k = floats(cfg.k);
    return {
      kind: "weights",
      controls: [slider("T", "T (sequence length)", 1, q.rows),
        toggle("mask", "mask", [["no mask", false], ["causal mask", true]])],
      compute: function (v) {
        var r = E.attention(topRows(q, v.T), topRows(k, v.T), null, { mask: v.mask });
        return { matrix: r.weights, result: r };
      },
      alt: function (v) {
        return "attention weights for T=" + v.T + ", " + (v.mask ? "future masked" : "no mask");
      }
    };
  };

  /** q, k, v of a text from each character's and position's projections: x @ W.T = tok @ W.T + pos @ W.T. */
  function projected(p, ids) {
    var out = {};
    ["key", "query", "value"].forEach(function (part) {
      var tok = p["tok_" + part], pos = p["pos_" + part], d = tok.cols, m = new Float32Array(ids.length * d);
      for (var t = 0; t < ids.length; t++) {
        for (var c = 0; c < d; c++) m[t * d + c] = E.at(tok, ids[t], c) + E.at(pos, t, c);
      }
      out[part] = E.matrix(ids.length, d, m);
    });
    return out;
  }

  function unpackProjections(packed) {
    var p = {};
    Object.keys(packed).forEach(function (key) { if (packed[key].b64) p[key] = floats(packed[key]); });
    return p;
  }

  // chapter 5: d_k, T, seed, text -> the weights of one causal head built from the seed
  EXPLORERS.head = function (cfg) {
    var start = cfg.start ? unpackProjections(cfg.start) : null;
    var tables = {};  // the tables of the last seed met (attention.js's headAt keeps its heads' products)
    function tablesOf(seed) {
      if (!tables[seed]) tables = { [seed]: E.buildTables(BigInt(seed), cfg.block_size, C, cfg.vocab.length) };
      return tables[seed];
    }
    return {
      kind: "weights",
      controls: [slider("head_size", "d_k (head_size)", 1, cfg.max_head_size),
        slider("T", "T (characters used)", 1, cfg.block_size),
        { name: "seed", kind: "seed", label: "seed" },
        { name: "text", kind: "text", label: "text", placeholder: "type characters of Shakespeare" }],
      follow: function (name, v) {  // T follows a text it can draw, so typing extends the picture
        if (name !== "text") return null;
        try { textIds(v.text, cfg.block_size, cfg.vocab); } catch (err) { return null; }
        return { T: v.text.length };
      },
      compute: function (v) {
        var ids = textIds(v.text, cfg.block_size, cfg.vocab);
        if (v.T > ids.length) {
          throw new BadInput("T=" + v.T + " but the text has only " + plural(ids.length, "character") +
            ": type more text or lower T.");
        }
        ids = ids.slice(0, v.T);
        var r;
        if (start && v.head_size === cfg.start.head_size && String(v.seed) === cfg.start.seed) {
          var p = projected(start, ids);  // the chapter's own modules
          r = E.attention(p.query, p.key, p.value, {});
        } else {
          r = E.headAt(tablesOf(v.seed), ids, v.head_size);
        }
        return { matrix: r.weights, tokens: v.text.slice(0, v.T), result: r };
      },
      alt: function (v, r) {
        return "attention weights of " + cfg.who + ", d_k=" + v.head_size + ", seed=" + v.seed + ", over the " +
          plural(r.tokens.length, "character") + " " + pyRepr(r.tokens);
      }
    };
  };

  // chapter 6: a line or typed text, trained/untrained -> the weights of chapter 6's head
  EXPLORERS.trained = function (cfg) {
    var models = { true: unpackProjections(cfg.models.trained), false: unpackProjections(cfg.models.untrained) };
    return {
      kind: "weights",
      controls: [{ name: "line", kind: "select", label: "line",
        options: cfg.lines.map(function (s) { return [s, s]; }).concat([["(your own text)", ""]]) },
        { name: "text", kind: "text", label: "text", placeholder: "up to " + cfg.block_size + " characters" },
        toggle("trained", "head", [["trained", true], ["untrained", false]])],
      follow: function (name, v) {  // a chosen line fills the text box; typing there picks "(your own text)"
        if (name === "line" && v.line) return { text: v.line };
        if (name === "text" && v.text !== v.line) return { line: "" };
        return null;
      },
      compute: function (v) {
        var chars = v.line || v.text, ids = textIds(chars, cfg.block_size, cfg.vocab);
        var p = projected(models[v.trained], ids);
        var r = E.attention(p.query, p.key, p.value, {});
        var w = r.weights, T = ids.length, diag = 0, back = 0;
        for (var i = 0; i < T; i++) {
          diag += E.at(w, i, i);
          for (var j = 0; j < i; j++) back += E.at(w, i, j) * (i - j);
        }
        return { matrix: w, tokens: chars, result: r, own: diag / T, back: back / T };
      },
      alt: function (v, r) {
        return "attention weights of the " + (v.trained ? "trained" : "untrained") + " head over the " +
          plural(r.tokens.length, "character") + " " + pyRepr(r.tokens) + ": on average a row puts " +
          fixed(r.own, 2) + " of its weight on its own character and looks " + fixed(r.back, 2) + " characters back";
      }
    };
  };

  function range(m) {
    var lo = Infinity, hi = -Infinity;
    for (var n = 0; n < m.data.length; n++) {
      lo = Math.min(lo, m.data[n]);
      hi = Math.max(hi, m.data[n]);
    }
    return [lo, hi];
  }

  // ---- building the page's explorer -------------------------------------------------------

  var made = 0;

  function el(tag, attrs, text) {
    var node = document.createElement(tag);
    Object.keys(attrs || {}).forEach(function (a) { node.setAttribute(a, attrs[a]); });
    if (text !== undefined) node.textContent = text;
    return node;
  }

  function mount(root) {
    var cfg = JSON.parse(root.querySelector("script.explorer-config").textContent);
    var spec = EXPLORERS[cfg.explorer](cfg), id = "explorer-" + ++made;
    var maps = { weights: cfg.colours.viridis.map(hexToRgb), scores: cfg.colours.RdBu_r.map(hexToRgb) };
    var masked = hexToRgb(cfg.colours.masked);
    var values = Object.assign({}, cfg.values), shown = null, active = { i: 0, j: 0 }, opened = null;
    var inputs = {}, marker = null, toXY = null;  // toXY: chapter 3's variance panel, d_k and Var -> x, y

    root.textContent = "";
    var row = el("div", { class: "explorer-controls" });
    var messageArea = el("div", { class: "explorer-message", role: "status", "aria-live": "polite" });
    var messageText = el("span"), staleNote = el("span", { class: "explorer-stale-note" });
    messageArea.append(messageText, staleNote);
    messageArea.hidden = true;
    var figure = el("div", { class: "explorer-figure" });
    var caption = el("p", { class: "explorer-caption", id: id + "-caption" });
    var tracePanel = el("div", { class: "explorer-trace", "aria-live": "polite", id: id + "-trace" });
    var body = el("div", { class: "explorer-body" });
    body.append(row, messageArea, figure, caption, tracePanel);
    root.append(body);

    // -- controls: each sets one value, then the picture is drawn again
    // a problem, with a note that the picture is still the last one that worked; or, with ``info``,
    // a remark on a picture just drawn (a paste whose line breaks became spaces)
    var said = "";
    function showMessage(text, info) {
      var now = text ? (info ? "i" : "!") + text : "";
      if (now === said) return;  // most paints have nothing to say: the page is then left untouched
      said = now;
      messageText.textContent = text ? (info ? "" : "⚠ ") + text : "";
      staleNote.textContent = text && !info ? " The picture below is still the last setting that worked; it " +
        "follows the controls again once this is fixed." : "";
      messageArea.hidden = !text;
      messageArea.classList.toggle("is-info", !!info);
      root.classList.toggle("has-message", !!text && !info);
    }
    var notice = "";  // shown once by the next picture drawn

    var controlNamed = {};
    spec.controls.forEach(function (c) {
      controlNamed[c.name] = c;
      if (c.name in values) values[c.name] = accept(c, values[c.name]);  // a seed is a string from the start
      var box = el("div", { class: "explorer-control explorer-" + c.kind }), cid = id + "-" + c.name;
      if (c.kind === "range") {
        var label = el("label", { for: cid }, c.label);
        var track = el("input", { type: "range", id: cid, min: c.min, max: c.max, step: 1 });
        var number = el("input", { type: "number", min: c.min, max: c.max, step: 1, inputmode: "numeric",
          "aria-label": c.label + ", typed", class: "explorer-number" });
        track.addEventListener("input", function () { change(c.name, Number(track.value)); });
        // the browser gives "" for what it cannot read as a number (such as "--5"): badInput tells
        var typed = function () { change(c.name, number.value, number.validity.badInput); };
        number.addEventListener("change", typed);
        number.addEventListener("keydown", function (ev) { if (ev.key === "Enter") { ev.preventDefault(); typed(); } });
        box.append(label, track, number);
        inputs[c.name] = { set: function (v) {
          track.value = v;
          track.setAttribute("aria-valuetext", String(v));
          if (document.activeElement !== number || Number(number.value) !== v) number.value = v;
        } };
      } else if (c.kind === "toggle") {
        var group = el("div", { role: "group", "aria-labelledby": cid + "-label", class: "explorer-toggle" });
        box.append(el("span", { id: cid + "-label", class: "explorer-label" }, c.label), group);
        var buttons = c.options.map(function (opt) {
          var b = el("button", { type: "button", "aria-pressed": "false" }, opt[0]);
          b.addEventListener("click", function () { change(c.name, opt[1]); });
          group.append(b);
          return b;
        });
        inputs[c.name] = { set: function (v) {
          buttons.forEach(function (b, n) { b.setAttribute("aria-pressed", String(c.options[n][1] === v)); });
        } };
      } else if (c.kind === "select") {
        var select = el("select", { id: cid });
        c.options.forEach(function (opt, n) { select.append(el("option", { value: String(n) }, opt[0])); });
        select.addEventListener("change", function () { change(c.name, c.options[Number(select.value)][1]); });
        box.append(el("label", { for: cid }, c.label), select);
        inputs[c.name] = { set: function (v) {
          var n = c.options.findIndex(function (opt) { return opt[1] === v; });
          select.value = String(n < 0 ? c.options.length - 1 : n);
        } };
      } else {  // "text" or "seed": a text box; a seed is checked as the Python NumberBox checks it
        var box2 = el("input", { type: "text", id: cid, spellcheck: "false", autocomplete: "off",
          placeholder: c.placeholder || "" });
        if (c.kind === "seed") box2.setAttribute("inputmode", "numeric");
        var apply = function () { change(c.name, box2.value); };
        box2.addEventListener(c.kind === "seed" ? "change" : "input", apply);
        box2.addEventListener("paste", function (ev) {
          if (c.kind === "text" && /[\r\n]/.test(ev.clipboardData ? ev.clipboardData.getData("text") : "")) {
            notice = "This box holds one line: the pasted line breaks became spaces (␣ on the axes).";
          }
        });
        box2.addEventListener("keydown", function (ev) { if (ev.key === "Enter") { ev.preventDefault(); apply(); } });
        box.append(el("label", { for: cid }, c.label), box2);
        inputs[c.name] = { set: function (v) { if (box2.value !== String(v)) box2.value = String(v); } };
      }
      row.append(box);
    });

    // a control's new value, checked as its box checks it; then the picture is drawn again
    function change(name, raw, unreadable) {
      var value;
      try {
        if (!controlNamed[name]) throw new BadInput("this explorer has no control " + JSON.stringify(name) + "; its controls are " +
          Object.keys(controlNamed).join(", ") + ".");
        value = accept(controlNamed[name], raw, unreadable);
      } catch (err) {
        if (!(err instanceof BadInput)) throw err;
        showMessage(err.message);
        return false;
      }
      values[name] = value;
      var echo = spec.follow ? spec.follow(name, values) : null;
      Object.keys(echo || {}).forEach(function (other) { values[other] = echo[other]; });
      return paint();
    }

    // -- the picture: a table of cells, rebuilt when its size or its tokens change, else recoloured
    var table = null, cells = [], builtFor = "", canvas = null;
    var heat = el("div", { class: "explorer-heat" });
    var bar = el("div", { class: "explorer-colourbar", "aria-hidden": "true" });
    figure.append(heat, bar);
    if (spec.variance) figure.append(variancePanel(spec.variance));

    // the table grows and shrinks by rows and columns (typing adds one of each), never rebuilt whole
    var headRow = null, tbody = null, colgroup = null;
    function cell(i, j) {
      return el("td", { role: "gridcell", tabindex: "-1", "data-i": i, "data-j": j });
    }
    function build(T, tokens) {
      if (!table) {
        table = el("table", { class: "explorer-heatmap", role: "grid", "aria-describedby": id + "-caption",
          "aria-label": "attention picture: rows are queries, columns are keys" });
        colgroup = el("colgroup");
        colgroup.append(el("col", { class: "explorer-axis" }));
        headRow = el("tr");
        headRow.append(el("th", { scope: "col", class: "explorer-corner" }, "query ↓ key →"));
        var thead = el("thead");
        tbody = el("tbody");
        thead.append(headRow);
        table.append(colgroup, thead, tbody);
        heat.append(table);
        if (sizes) sizes.observe(table);  // a new T resizes the table: the canvas follows its cells
      }
      var n = cells.length, i, j;
      cells[active.i] && (cells[active.i][active.j].tabIndex = -1);
      for (i = 0; i < Math.min(n, T); i++) {  // the rows that stay: columns added or removed
        var tr = tbody.rows[i];
        for (j = n; j < T; j++) { cells[i].push(cell(i, j)); tr.append(cells[i][j]); }
        for (j = n - 1; j >= T; j--) cells[i].pop().remove();
      }
      for (i = n; i < T; i++) {  // new rows
        var row = el("tr"), line = [];
        row.append(el("th", { scope: "row" }));
        for (j = 0; j < T; j++) { line.push(cell(i, j)); row.append(line[j]); }
        cells.push(line);
        tbody.append(row);
      }
      for (i = n - 1; i >= T; i--) { cells.pop(); tbody.rows[i].remove(); }
      while (headRow.cells.length - 1 < T) headRow.append(el("th", { scope: "col" }));
      while (headRow.cells.length - 1 > T) headRow.lastChild.remove();
      for (j = 0; j < T; j++) {  // the axes: characters, or positions
        var label = tokens ? tokenLabel(tokens[j]) : String(j);
        var colHead = headRow.cells[j + 1], rowHead = tbody.rows[j].cells[0];
        if (colHead.textContent !== label) { colHead.textContent = label; colHead.title = "key " + j; }
        if (rowHead.textContent !== label) { rowHead.textContent = label; rowHead.title = "query " + j; }
      }
      if (T !== n) {
        sizeCells(T);
        var wasNumbers = n > 0 && n <= ANNOTATE_MAX_T, numbers = T <= ANNOTATE_MAX_T;
        table.classList.toggle("explorer-numbers", numbers);
        if (n > 0 && wasNumbers !== numbers) {  // the cells change how they show their numbers
          cells.forEach(function (line) { line.forEach(function (td) {
            td.colour = null;
            td.label = null;
            if (numbers) {
              td.removeAttribute("aria-label");
            } else {
              td.textContent = "";
              td.style.backgroundColor = "";
            }
          }); });
        }
      }
      // above T = 8 the colours are a canvas under the transparent cells, one pixel a cell, scaled
      // up (course.css: pixelated): recolouring a thousand table cells costs the page a style pass,
      // and a canvas of the cells' size a large bitmap to fill and hand to the compositor at each press
      if (T > ANNOTATE_MAX_T && !canvas) {
        canvas = el("canvas", { class: "explorer-canvas", "aria-hidden": "true" });
        heat.prepend(canvas);
      } else if (T <= ANNOTATE_MAX_T && canvas) {
        canvas.remove();
        canvas = null;
      }
      active = { i: Math.min(active.i, T - 1), j: Math.min(active.j, T - 1) };
      cells[active.i][active.j].tabIndex = 0;
    }

    // The cells' size, square, at most 2.5rem, smaller to fit a phone: set on the T columns and the
    // T + 1 rows, so a new T restyles those 2T + 1 elements, not the T² cells (a size on each cell, or a
    // CSS variable that they inherit, restyled every cell: most of a press's time at large T)
    function sizeCells(T) {
      var side = "min(2.5rem, calc((min(100vw, 42rem) - 4.5rem) / " + (T + 1) + "))";
      while (colgroup.children.length - 1 < T) colgroup.append(el("col"));
      while (colgroup.children.length - 1 > T) colgroup.lastChild.remove();
      for (var j = 1; j <= T; j++) colgroup.children[j].style.width = side;
      headRow.style.height = side;
      for (var i = 0; i < T; i++) tbody.rows[i].style.height = side;
      table.style.fontSize = "min(0.8rem, calc(" + side + " * 0.45))";
    }

    function colourOf(v) {
      if (spec.kind === "scores") return E.colour(maps.scores, v, -spec.limit, spec.limit, masked);
      return E.colour(maps.weights, v, 0, 1, masked);
    }

    function cellText(v) {  // attention_lab.plots.HeatmapArtist._number
      if (v === -Infinity) return "−∞";
      return fixed(v, spec.kind === "scores" ? 1 : 2).replace("-", "−");
    }

    function paint() {
      var r;
      try {
        r = spec.compute(values);
      } catch (err) {
        if (!(err instanceof BadInput)) throw err;
        notice = "";
        showMessage(err.message);  // the previous picture stays
        syncInputs();
        return false;
      }
      showMessage(notice, true);
      notice = "";
      shown = r;
      var m = r.matrix, T = m.rows, key = T + "|" + (r.tokens || "");
      if (key !== builtFor) {
        build(T, r.tokens);
        builtFor = key;
      }
      var numbers = T <= ANNOTATE_MAX_T;
      // a new T moves the cells: the canvas is then placed by the ResizeObserver below, after the
      // frame's own layout, as reading the cells' places here would force a layout of its own
      if (canvas) drawCanvas(m);
      if (canvas && !sizes) placeCanvas();
      for (var i = 0; i < T; i++) {
        for (var j = 0; j < T; j++) {
          var v = E.at(m, i, j), rgb = colourOf(v), td = cells[i][j], text = cellText(v);
          if (numbers && td.colour !== rgb) {  // a table entry: the same array for the same colour
            td.colour = rgb;
            td.style.backgroundColor = "rgb(" + rgb[0] + "," + rgb[1] + "," + rgb[2] + ")";
            // attention_lab.plots.contrast_color
            td.style.color = 0.2126 * rgb[0] + 0.7152 * rgb[1] + 0.0722 * rgb[2] > 0.45 * 255 ? "black" : "white";
          }
          // numbers in the cells up to T = 8 (as the Python pictures); above, each cell's number is its
          // aria-label only, which a screen reader reads and which costs the table no new layout
          if (numbers) {
            if (td.textContent !== text) td.textContent = text;
          } else if (td.label !== text) {
            td.label = text;
            td.setAttribute("aria-label", text);
          }
        }
      }
      paintBar();
      if (spec.variance) moveMarker(values.head_size, r.variance);
      caption.textContent = "Showing: " + spec.alt(values, r);
      syncInputs();
      if (opened && opened.i < T && opened.j < T) open(opened.i, opened.j, false);
      else if (opened) showGone(opened.i, opened.j, T);
      root.dataset.paints = String(Number(root.dataset.paints || 0) + 1);
      root.dispatchEvent(new CustomEvent("explorer:painted", { bubbles: true }));
      return true;
    }

    // the canvas: T × T pixels, one a cell, in the colours of the table entries
    var pixels = null;
    function drawCanvas(m) {
      var T = m.rows;
      if (canvas.width !== T) {
        canvas.width = canvas.height = T;
        pixels = canvas.getContext("2d").createImageData(T, T);
      }
      for (var i = 0; i < T; i++) {
        for (var j = 0; j < T; j++) {
          var rgb = colourOf(E.at(m, i, j)), n = 4 * (i * T + j);
          pixels.data[n] = rgb[0];
          pixels.data[n + 1] = rgb[1];
          pixels.data[n + 2] = rgb[2];
          pixels.data[n + 3] = 255;
        }
      }
      canvas.getContext("2d").putImageData(pixels, 0, 0);
    }
    // it covers the cells: placed after a layout that moved them (a new T, a new width)
    function placeCanvas() {
      var T = cells.length, box = heat.getBoundingClientRect(), first = cells[0][0].getBoundingClientRect();
      var last = cells[T - 1][T - 1].getBoundingClientRect();
      canvas.style.left = first.left - box.left + heat.scrollLeft + "px";
      canvas.style.top = first.top - box.top + "px";
      canvas.style.width = last.right - first.left + "px";
      canvas.style.height = last.bottom - first.top + "px";
    }
    var sizes = window.ResizeObserver ? new ResizeObserver(function () {
      if (canvas) placeCanvas();
    }) : null;
    if (sizes) {
      sizes.observe(heat);
      // The explorer never shrinks while it is used, and its box is of fixed size: the root keeps the
      // tallest height its body has had at this width (a lower T or a shorter text leaves the space),
      // and contains its own layout (course.css, .is-contained). A press then lays out the explorer
      // alone: neither a new caption nor a new number makes the browser place the whole chapter
      // again, which on these long pages took most of a frame. A new width (a turned phone) starts
      // afresh; a taller body (a trace opened) raises the height, the one time the page below moves.
      var tallest = 0, wide = -1;
      new ResizeObserver(function () {
        var width = root.clientWidth, height = body.getBoundingClientRect().height;
        if (width !== wide || height > tallest) {
          wide = width;
          tallest = height;
          root.style.height = tallest + "px";
          root.classList.add("is-contained");
        }
      }).observe(body);
    }

    function syncInputs() {
      Object.keys(inputs).forEach(function (name) { inputs[name].set(values[name]); });
    }

    var barKind = null;
    function paintBar() {
      if (barKind === spec.kind) return;
      barKind = spec.kind;
      var table = maps[spec.kind], stops = [];
      for (var n = 0; n <= 8; n++) {
        var c = table[Math.min(255, n * 32)];
        stops.push("rgb(" + c.join(",") + ") " + (n * 12.5) + "%");
      }
      bar.style.background = "linear-gradient(to right, " + stops.join(", ") + ")";
      var lo = spec.kind === "scores" ? "−" + general(spec.limit) : "0";
      var hi = spec.kind === "scores" ? "+" + general(spec.limit) : "1";
      bar.setAttribute("data-lo", lo);
      bar.setAttribute("data-hi", hi);
      bar.textContent = "";
      bar.append(el("span", { class: "explorer-colourbar-label" }, spec.kind === "scores" ? "score" : "attention weight"));
    }

    // -- every weight opens: the trace panel
    function open(i, j, focus) {
      var T = shown.matrix.rows;
      if (i < 0 || j < 0 || i >= T || j >= T) return;
      cells[active.i][active.j].tabIndex = -1;
      active = { i: i, j: j };
      var td = cells[i][j];
      td.tabIndex = 0;
      if (focus) td.focus();
      unmarkOpen();
      td.classList.add("is-open");
      opened = { i: i, j: j, trace: shown.result ? E.trace(shown.result, i, j, 3) : null };
      showTrace(i, j, opened.trace);
    }

    heat.addEventListener("click", function (ev) {
      var td = ev.target.closest("td");
      if (td) open(Number(td.dataset.i), Number(td.dataset.j), true);
    });
    heat.addEventListener("focusin", function (ev) {
      var td = ev.target.closest("td");
      if (td && !(opened && opened.i === Number(td.dataset.i) && opened.j === Number(td.dataset.j))) {
        open(Number(td.dataset.i), Number(td.dataset.j), false);
      }
    });
    heat.addEventListener("keydown", function (ev) {
      var moves = { ArrowUp: [-1, 0], ArrowDown: [1, 0], ArrowLeft: [0, -1], ArrowRight: [0, 1] };
      var move = moves[ev.key];
      if (!move || !ev.target.closest("td")) return;
      ev.preventDefault();
      open(active.i + move[0], active.j + move[1], true);
    });

    function who(i, j) {
      var t = shown.tokens;
      var q = "query " + i + (t ? " " + pyRepr(t[i]) : ""), k = "key " + j + (t ? " " + pyRepr(t[j]) : "");
      return "Row " + i + " = " + q + ", column " + j + " = " + k;
    }

    function num(x) {
      return x === -Infinity ? "−∞" : (Math.abs(x) >= 1000 ? x.toPrecision(6) : x.toFixed(4)).replace("-", "−");
    }

    function showTrace(i, j, t) {
      var lines = [who(i, j) + "."], v = E.at(shown.matrix, i, j);
      if (!t) {  // chapter 1: no queries or keys, only the average
        lines.push(j > i ? "Key " + j + " comes after query " + i + ": masked, weight 0."
          : "Row " + i + " averages the " + plural(i + 1, "position") + " 0.." + i + ": w = 1/" + (i + 1) + " = " + num(v) + ".");
      } else {
        var terms = t.top.map(function (term) {
          return "q[" + term.index + "]·k[" + term.index + "] = " + num(term.q) + " × " + num(term.k) + " = " + num(term.product);
        });
        lines.push("q_" + i + "·k_" + j + " = " + num(t.dot) + ", the sum of " + plural(shown.result.headSize, "product") +
          "; the largest: " + terms.join("; ") + ".");
        lines.push(t.divisor !== 1 ? "Divided by √d_k = √" + shown.result.headSize + " = " + num(t.divisor) +
          ": score " + num(t.dot / t.divisor) + "." : "Not divided by √d_k: score " + num(t.dot) + ".");
        if (spec.kind === "scores") {
          lines.push("This picture shows the raw score q·k: " + num(v) + ".");
        } else {
          lines.push(t.masked ? "Mask: key " + j + " comes after query " + i + ", so the score becomes −∞ and e^score = 0."
            : shown.result.mask ? "Mask: key " + j + " is not after query " + i + ", so the score stays." : "No mask.");
          lines.push("e^(score − row max " + num(t.rowMax) + ") = " + num(t.exp) + "; the row's sum of those = " +
            num(t.rowSum) + ".");
          lines.push("w_" + i + "," + j + " = " + num(t.exp) + " / " + num(t.rowSum) + " = " + num(t.weight) + ".");
          if (t.share !== null) {
            lines.push("w_" + i + "," + j + "·v_" + j + " is " + (100 * t.share).toFixed(1) + "% of what out_" + i +
              " mixes in (by the size of each w·v).");
          }
        }
      }
      traceLines(lines, { i: i, j: j });
    }

    // a cell left open by a larger picture: said, and opened again when the picture has it once more
    function showGone(i, j, T) {
      unmarkOpen();
      opened.trace = null;
      traceLines(["Row " + i + ", column " + j + " is not in this picture, which has " + plural(T, "row") +
        " and columns; it opens again when the picture has it. Click or focus a cell to open another."], null);
    }

    function unmarkOpen() {
      Array.prototype.forEach.call(table.querySelectorAll(".is-open"), function (c) { c.classList.remove("is-open"); });
    }

    // the panel's title, lines and four move buttons; the buttons are made once, so one that is pressed
    // keeps the keyboard's focus, and a move off the picture's edge (or from no open cell, ``at`` null)
    // is marked unavailable
    var traceList = null, moveButtons = [];
    function traceLines(lines, at) {
      if (!traceList) {
        var nav = el("div", { class: "explorer-trace-moves", role: "group", "aria-label": "open a neighbouring cell" });
        [["↑", "query above", -1, 0], ["↓", "query below", 1, 0], ["←", "key to the left", 0, -1], ["→", "key to the right", 0, 1]]
          .forEach(function (m) {
            var b = el("button", { type: "button", "aria-label": m[1] }, m[0]);
            b.move = m;
            b.addEventListener("click", function () {
              if (b.getAttribute("aria-disabled") !== "true") open(active.i + m[2], active.j + m[3], false);
            });
            moveButtons.push(b);
            nav.append(b);
          });
        traceList = el("ul");
        tracePanel.append(el("p", { class: "explorer-trace-title" }, "How this number was made"), traceList, nav);
      }
      traceList.textContent = "";
      lines.forEach(function (line) { traceList.append(el("li", {}, line)); });
      var T = shown.matrix.rows;
      moveButtons.forEach(function (b) {
        var i = at ? at.i + b.move[2] : -1, j = at ? at.j + b.move[3] : -1;
        b.setAttribute("aria-disabled", String(i < 0 || j < 0 || i >= T || j >= T));
      });
    }

    // -- chapter 3's second view: Var(q·k) against d_k, log-log, a ring at the current d_k
    function variancePanel(vr) {
      var W = 220, H = 170, L = 40, R = 8, Tp = 20, B = 30, ns = "http://www.w3.org/2000/svg";
      var raw = vr.d.map(vr.of), scaled = vr.d.map(function (d, n) { return raw[n] / d; });
      var all = raw.concat(scaled), lo = Math.log2(Math.min.apply(null, all)) - 0.3;
      var hi = Math.log2(Math.max.apply(null, all)) + 0.3, dlo = Math.log2(vr.d[0]), dhi = Math.log2(vr.d[vr.d.length - 1]);
      toXY = function (d, y) {
        return [L + (W - L - R) * (Math.log2(d) - dlo) / Math.max(dhi - dlo, 1),
          Tp + (H - Tp - B) * (1 - (Math.log2(y) - lo) / (hi - lo))];
      };
      var svg = document.createElementNS(ns, "svg");
      svg.setAttribute("viewBox", "0 0 " + W + " " + H);
      svg.setAttribute("class", "explorer-variance");
      svg.setAttribute("role", "img");
      svg.setAttribute("aria-label", "Var(q·k) against d_k: the raw scores' variance grows like d_k, divided by √d_k it stays near 1");
      function add(tag, attrs, text) {
        var node = document.createElementNS(ns, tag);
        Object.keys(attrs).forEach(function (a) { node.setAttribute(a, attrs[a]); });
        if (text !== undefined) node.textContent = text;
        svg.append(node);
        return node;
      }
      add("rect", { x: L, y: Tp, width: W - L - R, height: H - Tp - B, class: "frame" });
      [[raw, "#d95f02", "raw q·k"], [scaled, "#1b9e77", "q·k / √d_k"]].forEach(function (s, n) {
        add("polyline", { points: vr.d.map(function (d, k) { return toXY(d, s[0][k]).join(","); }).join(" "),
          stroke: s[1], fill: "none", "stroke-width": 1.5 });
        add("text", { x: L + 4, y: Tp + 12 + 11 * n, style: "fill: " + s[1], class: "legend" }, s[2]);
      });
      vr.d.forEach(function (d) {
        var p = toXY(d, 1);
        add("text", { x: p[0], y: H - B + 12, class: "tick", "text-anchor": "middle" }, String(d));
      });
      add("text", { x: (L + W - R) / 2, y: H - 4, class: "axis", "text-anchor": "middle" }, "d_k");
      add("text", { x: 12, y: (Tp + H - B) / 2, class: "axis", "text-anchor": "middle",
        transform: "rotate(-90 12 " + (Tp + H - B) / 2 + ")" }, "Var(q·k)");
      add("text", { x: W / 2, y: 13, class: "title", "text-anchor": "middle" }, "variance of the scores");
      marker = add("circle", { r: 5, fill: "none", stroke: "currentColor", "stroke-width": 1.5 });
      return svg;
    }

    function moveMarker(d, variance) {
      var p = toXY(d, variance);
      marker.setAttribute("cx", p[0]);
      marker.setAttribute("cy", p[1]);
    }

    // -- for tests and the benchmark
    root.attentionExplorer = {
      values: function () { return Object.assign({}, values); },
      set: function (name, value) { var ok = change(name, value); return ok ? "" : messageText.textContent; },
      weights: function () {
        var m = shown.matrix, out = [];
        for (var i = 0; i < m.rows; i++) out.push(Array.prototype.map.call(m.data.subarray(i * m.cols, (i + 1) * m.cols),
          function (x) { return x === -Infinity ? null : x; }));
        return out;
      },
      alt: function () { return spec.alt(values, shown); },
      message: function () { return messageText.textContent; },
      open: function (i, j) { open(i, j, true); return opened.trace; },
      trace: function () { return opened && opened.trace; }
    };
    paint();
  }

  /**
   * The chapter around an explorer is long (thousands of elements): marked here, course.css lets the
   * browser skip laying out and painting its parts that are off screen (content-visibility: auto),
   * except the block holding an explorer, which is always drawn.
   */
  function markPage(root) {
    var article = root.closest(".bd-article"), host = root;
    if (!article) return;
    while (host.parentElement && host.parentElement.tagName !== "SECTION" && host.parentElement !== article) {
      host = host.parentElement;
    }
    host.classList.add("explorer-host");
    article.classList.add("explorer-page");
  }

  function mountAll() {
    Array.prototype.forEach.call(document.querySelectorAll(".attention-explorer[data-explorer]"), function (root) {
      if (!root.attentionExplorer && EXPLORERS[root.dataset.explorer]) {
        markPage(root);
        mount(root);
      }
    });
  }

  // attention_lab/explorers/view.py mounts one explorer into a JupyterLab widget view
  window.AttentionExplorers = { mount: mount };
  if (document.readyState === "loading") document.addEventListener("DOMContentLoaded", mountAll);
  else mountAll();
})();
