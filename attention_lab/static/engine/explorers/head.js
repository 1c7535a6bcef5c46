/* Chapter 5's explorer (attention_lab/explorers/head.py): d_k, T, seed, text -> the weights of one causal head.
 * The engine builds the head from its seed as torch does (attention.js's headAt); the chapter's own modules
 * come as their projections per character and position (cfg.start). A learner's Head the engine cannot
 * rebuild is computed by the kernel, which sends its q, k, v and weights (host.computed); the kernel also
 * checks a Head the engine can draw and sends what is wrong with it. */
(function (root) {
  "use strict";
  var L = root.AttentionLab;

  L.explorers.head = function (cfg, host) {
    var P = L.parts, E = L.engine, start = cfg.start ? P.unpack(cfg.start) : null, tables = {};
    var C = 384;  // the lesson's d_model
    function tablesOf(seed) {  // the tables of the last seed met (headAt keeps its heads' products)
      if (!tables[seed]) tables = { [seed]: E.buildTables(BigInt(seed), cfg.block_size, C, cfg.vocab.length) };
      return tables[seed];
    }
    function picture(v, ids, kernel) {
      if (start && v.head_size === cfg.start.head_size && String(v.seed) === cfg.start.seed) {
        var p = P.projected(start, ids);  // the chapter's own modules
        return E.attention(p.query, p.key, p.value, {});
      }
      if (cfg.engine) return E.headAt(tablesOf(v.seed), ids, v.head_size);
      if (!kernel) throw new P.Pending();
      var parts = P.unpack(kernel.parts), r = E.attention(parts.q, parts.k, parts.v, {});
      r.weights = parts.weights;  // the kernel's, from the learner's own key, query and tril
      return r;
    }
    return {
      follow: function (name, v) {  // T follows a text it can draw, so typing extends the picture
        if (name !== "text") return null;
        try { return { T: P.textIds(v.text, cfg).length }; } catch (err) { return null; }
      },
      compute: function (v) {
        var ids = P.textIds(v.text, cfg);
        if (v.T > ids.length) throw P.bad(cfg, "T_above_text", { T: v.T, n: ids.length });
        var kernel = cfg.kernel && host ? host.computed(v) : null;
        if (kernel && kernel.message) throw new L.controls.BadInput(kernel.message);
        if (cfg.kernel && !host && !cfg.engine) throw P.bad(cfg, "kernel_only", {});
        var r = picture(v, ids.slice(0, v.T), kernel);
        return { matrix: r.weights, tokens: Array.from(v.text).slice(0, v.T).join(""), result: r, fields: { n: v.T } };
      }
    };
  };
})(typeof globalThis !== "undefined" ? globalThis : this);
