/* Chapter 7's explorer (attention_lab/explorers/heads.py): a line or typed text, and a head to remove -> the
 * weights of every head of chapter 7's model side by side (one picture a head), and the model's likeliest
 * next characters after the text: each head's output, side by side, W_O (c_proj), then lm_head. Removing
 * head h gives its output zero weight in W_O, as the chapter's ablation does. */
(function (root) {
  "use strict";
  var L = root.AttentionLab;
  var f32 = Math.fround;

  L.explorers.heads = function (cfg) {
    var P = L.parts, E = L.engine, m = cfg.model;
    var heads = m.heads.map(function (h) { return P.unpack(h); });
    var proj = P.floats(m.c_proj), lm = P.floats(m.lm_head), bias = P.floats(m.lm_bias);

    function nextCharacter(outs, removed) {  // the last position's probabilities, float32 as torch rounds
      var hs = outs[0].cols, C = hs * outs.length, T = outs[0].rows, side = new Float64Array(C), y = [];
      outs.forEach(function (o, h) {
        for (var c = 0; c < hs; c++) side[h * hs + c] = h === removed ? 0 : E.at(o, T - 1, c);
      });
      for (var r = 0; r < C; r++) {  // y = side @ W_O.T, one float32 each
        var s = 0;
        for (var c2 = 0; c2 < C; c2++) s += side[c2] * E.at(proj, r, c2);
        y.push(f32(s));
      }
      var V = lm.rows, logits = new Float32Array(V);
      for (var i = 0; i < V; i++) {
        var z = 0;
        for (var j = 0; j < C; j++) z += y[j] * E.at(lm, i, j);
        logits[i] = f32(z + bias.data[i]);
      }
      var top = -Infinity, sum = 0, probs = new Float32Array(V), k;
      for (k = 0; k < V; k++) top = Math.max(top, logits[k]);
      for (k = 0; k < V; k++) sum += Math.exp(logits[k] - top);
      for (k = 0; k < V; k++) probs[k] = Math.exp(logits[k] - top) / sum;  // softmax in float64, then float32
      return probs;
    }

    return {
      follow: P.followLine,
      compute: function (v) {
        var chars = v.line || v.text, ids = P.textIds(chars, cfg), pictures = [], outs = [];
        heads.forEach(function (head, h) {
          var p = P.projected(head, ids), r = E.attention(p.query, p.key, p.value, {});
          pictures.push({ matrix: r.weights, result: r, title: "head " + h });
          outs.push(r.out);
        });
        var probs = nextCharacter(outs, v.removed), order = [];
        for (var i = 0; i < probs.length; i++) order.push(i);
        order.sort(function (a, b) { return probs[b] - probs[a] || a - b; });
        var top = order.slice(0, cfg.top).map(function (n) { return [cfg.vocab[n], probs[n]]; });
        var fields = { n: ids.length };
        top.slice(0, 3).forEach(function (t, n) { fields["c" + (n + 1)] = t[0]; fields["p" + (n + 1)] = t[1]; });
        return { pictures: pictures, tokens: chars, fields: fields, top: top, probs: probs };
      },
      panel: function (figure) { return nextPanel(figure, cfg); }
    };
  };

  /** The next-character panel: a list of the likeliest characters, each with its probability and a bar. */
  function nextPanel(figure, cfg) {
    var el = L.controls.el, words = cfg.panel;
    var box = el("div", { class: "explorer-next", role: "group", "aria-label": words.alt });
    var list = el("ol", { class: "explorer-next-list" });
    box.append(el("p", { class: "explorer-picture-title" }, words.title), list);
    figure.append(box);
    return function update(values, fields, r) {
      list.textContent = "";
      r.top.forEach(function (t) {
        var bar = el("span", { class: "explorer-next-bar" }), track = el("span", { class: "explorer-next-track" });
        bar.style.width = (100 * t[1]).toFixed(1) + "%";
        track.append(bar);
        var item = el("li");
        item.append(el("span", { class: "explorer-next-char" }, cfg.picture.visible[t[0]] || t[0]),
          el("span", { class: "explorer-next-p" }, L.format.say("{p:.2f}", { p: t[1] })), track);
        list.append(item);
      });
    };
  }
})(typeof globalThis !== "undefined" ? globalThis : this);
