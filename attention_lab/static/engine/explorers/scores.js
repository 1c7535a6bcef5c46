/* Chapter 2's explorer (attention_lab/explorers/scores.py): d_k, T -> the raw scores q @ k.T of the chapter's
 * sequence, a head of size d_k taking the first d_k columns of the chapter's projections. */
(function (root) {
  "use strict";
  var L = root.AttentionLab;

  function range(m) {
    var lo = Infinity, hi = -Infinity;
    for (var n = 0; n < m.data.length; n++) {
      lo = Math.min(lo, m.data[n]);
      hi = Math.max(hi, m.data[n]);
    }
    return [lo, hi];
  }

  L.explorers.scores = function (cfg) {
    var E = L.engine, q = L.parts.floats(cfg.q_all), k = L.parts.floats(cfg.k_all);
    return {
      compute: function (v) {
        var r = E.attention(L.parts.topRows(q, v.T), L.parts.topRows(k, v.T), null,
          { headSize: v.head_size, mask: false });
        var s = range(r.raw), z = range(r.scores);
        return { matrix: r.raw, result: r, fields: { lo: s[0], hi: s[1], scaled_lo: z[0], scaled_hi: z[1] } };
      }
    };
  };
})(typeof globalThis !== "undefined" ? globalThis : this);
