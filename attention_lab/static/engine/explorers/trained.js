/* Chapter 6's explorer (attention_lab/explorers/trained.py): a line or typed text, trained/untrained -> the
 * weights of chapter 6's head, from each model's projections per character and position. */
(function (root) {
  "use strict";
  var L = root.AttentionLab;

  L.explorers.trained = function (cfg) {
    var P = L.parts, models = { true: P.unpack(cfg.models.trained), false: P.unpack(cfg.models.untrained) };
    return {
      follow: P.followLine,
      compute: function (v) {
        var chars = v.line || v.text, ids = P.textIds(chars, cfg);
        var p = P.projected(models[v.trained], ids), r = L.engine.attention(p.query, p.key, p.value, {});
        var w = r.weights, T = ids.length, diag = 0, back = 0;
        for (var i = 0; i < T; i++) {
          diag += L.engine.at(w, i, i);
          for (var j = 0; j < i; j++) back += L.engine.at(w, i, j) * (i - j);
        }
        return { matrix: w, tokens: chars, result: r, fields: { n: T, own: diag / T, back: back / T } };
      }
    };
  };
})(typeof globalThis !== "undefined" ? globalThis : this);
