/* Chapter 8's explorer (attention_lab/explorers/generate.py): a prompt and a number of steps -> chapter 7's
 * model writing from the prompt, the likeliest character a step, and every head's weights over the
 * characters written so far (row t: the query of step t over the rows its cache held; the last row: the
 * newest query). Each step is chapter 7's explorer computed on the text so far. */
(function (root) {
  "use strict";
  var L = root.AttentionLab;

  L.explorers.generate = function (cfg) {
    var inner = L.explorers.heads(cfg);
    return {
      follow: inner.follow,
      compute: function (v) {
        var chars = v.line || v.text;
        var n = Array.from(chars).length;  // code points, as Python counts
        if (n > cfg.max_prompt) throw L.parts.bad(cfg, "prompt_too_long", { max_prompt: cfg.max_prompt, n: n });
        var r = inner.compute({ line: "", text: chars, removed: -1 });
        for (var s = 0; s < v.step; s++) {  // the likeliest character, lowest index first on a tie
          chars += r.top[0][0];
          r = inner.compute({ line: "", text: chars, removed: -1 });
        }
        r.fields.step = v.step;
        r.fields.newest = Array.from(chars).pop();
        r.written = chars;
        return r;
      },
      panel: inner.panel
    };
  };
})(typeof globalThis !== "undefined" ? globalThis : this);
