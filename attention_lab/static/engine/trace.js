/*
 * trace.js: the panel under an explorer's picture that says how one number was made ("How this number
 * was made"): q·k and its largest terms, the division by √d_k, the mask, e^score over the row's sum,
 * the weight and, for a head, its share of what the query's output mixes in (attention.js's trace).
 * Four buttons open the neighbouring cells; they are made once, so one that is pressed keeps the
 * keyboard's focus, and a move off the picture is marked unavailable.
 */
(function (root) {
  "use strict";
  var L = root.AttentionLab = root.AttentionLab || {};
  var el = L.controls.el;
  var MOVES = [["↑", "query above", -1, 0], ["↓", "query below", 1, 0], ["←", "key to the left", 0, -1],
    ["→", "key to the right", 0, 1]];

  function num(x) {
    return x === -Infinity ? "−∞" : (Math.abs(x) >= 1000 ? x.toPrecision(6) : x.toFixed(4)).replace("-", "−");
  }

  function TracePanel(panel, onMove) {
    var nav = el("div", { class: "explorer-trace-moves", role: "group", "aria-label": "open a neighbouring cell" });
    this.buttons = MOVES.map(function (m) {
      var b = el("button", { type: "button", "aria-label": m[1] }, m[0]);
      b.move = m;
      b.addEventListener("click", function () {
        if (b.getAttribute("aria-disabled") !== "true") onMove(m[2], m[3]);
      });
      nav.append(b);
      return b;
    });
    this.list = el("ul");
    this.panel = panel;
    this.nav = nav;
  }

  /** The panel's lines for cell (i, j) of ``shown`` (a computed picture: matrix, tokens, result) and
   * ``t``, attention.js's trace of it (null where there are no queries and keys: chapter 1). */
  TracePanel.prototype.show = function (shown, kind, i, j, t) {
    var pyRepr = L.format.pyRepr, plural = L.format.plural, tokens = shown.tokens ? Array.from(shown.tokens) : null;
    var q = "query " + i + (tokens ? " " + pyRepr(tokens[i]) : ""), k = "key " + j + (tokens ? " " + pyRepr(tokens[j]) : "");
    var lines = [(shown.title ? shown.title + ": row " : "Row ") + i + " = " + q + ", column " + j + " = " + k + "."];
    var v = L.engine.at(shown.matrix, i, j);
    if (!t) {
      lines.push(j > i ? "Key " + j + " comes after query " + i + ": masked, weight 0."
        : "Row " + i + " averages the " + plural(i + 1, "position") + " 0.." + i + ": w = 1/" + (i + 1) + " = " + num(v) + ".");
    } else {
      lines = lines.concat(scoreLines(shown.result, i, j, t));
      lines = lines.concat(kind === "scores" ? ["This picture shows the raw score q·k: " + num(v) + "."]
        : weightLines(shown.result, i, j, t));
    }
    this.write(lines, { i: i, j: j }, shown.matrix.rows);
  };

  function scoreLines(r, i, j, t) {
    var terms = t.top.map(function (term) {
      return "q[" + term.index + "]·k[" + term.index + "] = " + num(term.q) + " × " + num(term.k) + " = " + num(term.product);
    });
    return ["q_" + i + "·k_" + j + " = " + num(t.dot) + ", the sum of " + L.format.plural(r.headSize, "product") +
      "; the largest: " + terms.join("; ") + ".",
      t.divisor !== 1 ? "Divided by √d_k = √" + r.headSize + " = " + num(t.divisor) + ": score " + num(t.dot / t.divisor) + "."
        : "Not divided by √d_k: score " + num(t.dot) + "."];
  }

  function weightLines(r, i, j, t) {
    var w = "w_" + i + "," + j, lines = [
      t.masked ? "Mask: key " + j + " comes after query " + i + ", so the score becomes −∞ and e^score = 0."
        : r.mask ? "Mask: key " + j + " is not after query " + i + ", so the score stays." : "No mask.",
      "e^(score − row max " + num(t.rowMax) + ") = " + num(t.exp) + "; the row's sum of those = " + num(t.rowSum) + ".",
      w + " = " + num(t.exp) + " / " + num(t.rowSum) + " = " + num(t.weight) + "."];
    if (t.share !== null) {
      lines.push(w + "·v_" + j + " is " + (100 * t.share).toFixed(1) + "% of what out_" + i +
        " mixes in (by the size of each w·v).");
    }
    return lines;
  }

  /** A cell left open by a larger picture: said, and opened again when the picture has it once more. */
  TracePanel.prototype.gone = function (i, j, T) {
    this.write(["Row " + i + ", column " + j + " is not in this picture, which has " + L.format.plural(T, "row") +
      " and columns; it opens again when the picture has it. Click or focus a cell to open another."], null, T);
  };

  TracePanel.prototype.write = function (lines, at, T) {
    if (!this.list.parentNode) this.panel.append(el("p", { class: "explorer-trace-title" }, "How this number was made"),
      this.list, this.nav);
    var list = this.list;
    list.textContent = "";
    lines.forEach(function (line) { list.append(el("li", {}, line)); });
    this.buttons.forEach(function (b) {
      var i = at ? at.i + b.move[2] : -1, j = at ? at.j + b.move[3] : -1;
      b.setAttribute("aria-disabled", String(i < 0 || j < 0 || i >= T || j >= T));
    });
  };

  L.TracePanel = TracePanel;
})(typeof globalThis !== "undefined" ? globalThis : this);
