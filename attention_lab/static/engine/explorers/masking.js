/* Chapter 4's explorer (attention_lab/explorers/masking.py): T, mask -> softmax(q k^T / √d_k), the future masked or not. */
(function (root) {
  "use strict";
  var L = root.AttentionLab;

  L.explorers.masking = function (cfg) {
    var X = L.parts, q = X.floats(cfg.q), k = X.floats(cfg.k);
    return {
      compute: function (v) {
        var r = L.engine.attention(X.topRows(q, v.T), X.topRows(k, v.T), null, { mask: v.mask });
        return { matrix: r.weights, result: r };
      }
    };
  };
})(typeof globalThis !== "undefined" ? globalThis : this);
