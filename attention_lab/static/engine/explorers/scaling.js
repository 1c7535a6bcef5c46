/* Chapter 3's explorer (attention_lab/explorers/scaling.py): d_k, scaling -> softmax weights of unit-variance
 * q and k, and its second picture, Var(q·k) against d_k (log-log, a ring at the current d_k). */
(function (root) {
  "use strict";
  var L = root.AttentionLab;
  var NS = "http://www.w3.org/2000/svg";

  function summary(w) {  // the mean of each row's largest weight and of its entropy in bits
    var T = w.rows, maxSum = 0, entropySum = 0;
    for (var i = 0; i < T; i++) {
      var top = -Infinity;
      for (var j = 0; j < T; j++) {
        var p = L.engine.at(w, i, j);
        top = Math.max(top, p);
        if (p > 0) entropySum -= p * Math.log2(p);
      }
      maxSum += top;
    }
    return { mean_max: maxSum / T, mean_entropy: entropySum / T, uniform: Math.log2(T) };
  }

  L.explorers.scaling = function (cfg) {
    var X = L.parts, q = X.floats(cfg.q), k = X.floats(cfg.k), variance = X.floats(cfg.variance).data;
    return {
      compute: function (v) {
        var r = L.engine.attention(q, k, null, { headSize: v.head_size, scale: v.scale, mask: false });
        var fields = summary(r.weights);
        fields.inverse = 1 / Math.sqrt(v.head_size);
        fields.variance = variance[v.head_size - 1] / (v.scale ? v.head_size : 1);
        return { matrix: r.weights, result: r, fields: fields };
      },
      panel: function (figure) { return variancePanel(figure, cfg, variance); }
    };
  };

  /** The variance panel, an SVG, and update(values, fields), which moves its ring. */
  function variancePanel(figure, cfg, variance) {
    var W = 220, H = 170, Lm = 40, R = 8, Tp = 20, B = 30, words = cfg.panel, d = cfg.d_values;
    var raw = d.map(function (x) { return variance[x - 1]; }), scaled = d.map(function (x, n) { return raw[n] / x; });
    var all = raw.concat(scaled), lo = Math.log2(Math.min.apply(null, all)) - 0.3;
    var hi = Math.log2(Math.max.apply(null, all)) + 0.3, dlo = Math.log2(d[0]), dhi = Math.log2(d[d.length - 1]);
    function toXY(x, y) {
      return [Lm + (W - Lm - R) * (Math.log2(x) - dlo) / Math.max(dhi - dlo, 1),
        Tp + (H - Tp - B) * (1 - (Math.log2(y) - lo) / (hi - lo))];
    }
    var svg = document.createElementNS(NS, "svg");
    [["viewBox", "0 0 " + W + " " + H], ["class", "explorer-variance"], ["role", "img"], ["aria-label", words.alt]]
      .forEach(function (a) { svg.setAttribute(a[0], a[1]); });
    function add(tag, attrs, text) {
      var node = document.createElementNS(NS, tag);
      Object.keys(attrs).forEach(function (a) { node.setAttribute(a, attrs[a]); });
      if (text !== undefined) node.textContent = text;
      svg.append(node);
      return node;
    }
    add("rect", { x: Lm, y: Tp, width: W - Lm - R, height: H - Tp - B, class: "frame" });
    [[raw, "#d95f02", words.raw], [scaled, "#1b9e77", words.scaled]].forEach(function (s, n) {
      add("polyline", { points: d.map(function (x, m) { return toXY(x, s[0][m]).join(","); }).join(" "),
        stroke: s[1], fill: "none", "stroke-width": 1.5 });
      add("text", { x: Lm + 4, y: Tp + 12 + 11 * n, style: "fill: " + s[1], class: "legend" }, s[2]);
    });
    d.forEach(function (x) { add("text", { x: toXY(x, 1)[0], y: H - B + 12, class: "tick", "text-anchor": "middle" }, String(x)); });
    // y ticks at every other power of two inside the frame (1, 4, 16, ...), as the x axis labels its d_k
    for (var e = Math.ceil(lo); e <= Math.floor(hi); e += 1) {
      if (e % 2) continue;
      var y = toXY(d[0], Math.pow(2, e))[1];
      add("line", { x1: Lm - 3, y1: y, x2: Lm, y2: y, class: "frame" });
      add("text", { x: Lm - 5, y: y + 3, class: "tick", "text-anchor": "end" }, String(Math.pow(2, e)));
    }
    add("text", { x: (Lm + W - R) / 2, y: H - 4, class: "axis", "text-anchor": "middle" }, words.x);
    add("text", { x: 12, y: (Tp + H - B) / 2, class: "axis", "text-anchor": "middle",
      transform: "rotate(-90 12 " + (Tp + H - B) / 2 + ")" }, words.y);
    add("text", { x: W / 2, y: 13, class: "title", "text-anchor": "middle" }, words.title);
    var marker = add("circle", { r: 5, fill: "none", stroke: "currentColor", "stroke-width": 1.5 });
    figure.append(svg);
    return function update(v, fields) {
      var p = toXY(v.head_size, fields.variance);
      marker.setAttribute("cx", p[0]);
      marker.setAttribute("cy", p[1]);
    };
  }
})(typeof globalThis !== "undefined" ? globalThis : this);
