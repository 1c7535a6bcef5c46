/* Chapter 1's explorer (attention_lab/explorers/average.py): T -> the normalized tril matrix, row t holding 1/(t+1). */
(function (root) {
  "use strict";
  var L = root.AttentionLab;

  L.explorers.average = function () {
    return {
      compute: function (v) {
        var T = v.T, w = new Float32Array(T * T);
        for (var i = 0; i < T; i++) {
          for (var j = 0; j <= i; j++) w[i * T + j] = 1 / (i + 1);  // ones on and below the diagonal, / row sum
        }
        return { matrix: L.engine.matrix(T, T, w), result: null };
      }
    };
  };
})(typeof globalThis !== "undefined" ? globalThis : this);
