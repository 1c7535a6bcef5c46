/*
 * heatmap.js: an explorer's picture, a table of T × T cells coloured by the colour map of its kind
 * (viridis for weights on 0..1, RdBu_r for scores on ±limit), the numbers written in the cells up to
 * T = 8 and each cell's number its aria-label above; above T = 8 the colours are a canvas under the
 * transparent cells. Every cell opens (click, tap, or focus and the arrow keys): ``onOpen(i, j, focus)``.
 * ``picture`` is the config's "picture": its kind, limit, colour bar label, cell format, the T up to
 * which cells hold numbers, and the visible stand-ins for space and newline on the axes. ``withBar``
 * false: no colour bar (the explorer's first picture carries the one they share).
 */
(function (root) {
  "use strict";
  var L = root.AttentionLab = root.AttentionLab || {};
  var el = L.controls.el;

  function hexToRgb(hex) {
    var n = parseInt(hex.slice(1), 16);
    return [(n >> 16) & 255, (n >> 8) & 255, n & 255];
  }

  function Heatmap(figure, picture, colours, id, onOpen, withBar) {
    this.picture = picture;
    this.digits = Number(/^\.(\d+)f$/.exec(picture.cell_format)[1]);  // the cells' numbers: f"{v:.2f}"
    this.table = null;
    this.cells = [];
    this.builtFor = "";
    this.canvas = null;
    this.active = { i: 0, j: 0 };
    this.id = id;
    var map = picture.kind === "scores" ? colours.RdBu_r : colours.viridis;
    this.map = map.map(hexToRgb);
    this.masked = hexToRgb(colours.masked);
    // cells too small for their numbers (chapter 7's heads, two a row) keep them for a screen reader and the
    // trace panel, not on screen
    this.heat = el("div", { class: "explorer-heat" + (picture.numbers_hidden ? " explorer-quiet" : "") });
    figure.append(this.heat);
    if (withBar !== false) {  // several pictures on one scale share the first one's colour bar
      this.bar = el("div", { class: "explorer-colourbar", "aria-hidden": "true" });
      figure.append(this.bar);
      this.paintBar();
    }
    this.listen(onOpen);
    var self = this;
    // a new T moves the cells: the canvas follows them after the frame's own layout
    this.sizes = window.ResizeObserver ? new ResizeObserver(function () { if (self.canvas) self.placeCanvas(); }) : null;
    if (this.sizes) this.sizes.observe(this.heat);
  }

  Heatmap.prototype.listen = function (onOpen) {
    var self = this;
    function at(ev) {
      var td = ev.target.closest("td");
      return td ? { i: Number(td.dataset.i), j: Number(td.dataset.j) } : null;
    }
    this.heat.addEventListener("click", function (ev) { var c = at(ev); if (c) onOpen(c.i, c.j, true); });
    this.heat.addEventListener("focusin", function (ev) { var c = at(ev); if (c) onOpen(c.i, c.j, false, true); });
    this.heat.addEventListener("keydown", function (ev) {
      var move = { ArrowUp: [-1, 0], ArrowDown: [1, 0], ArrowLeft: [0, -1], ArrowRight: [0, 1] }[ev.key];
      if (!move || !at(ev)) return;
      ev.preventDefault();
      onOpen(self.active.i + move[0], self.active.j + move[1], true);
    });
  };

  Heatmap.prototype.paintBar = function () {
    var stops = [];
    for (var n = 0; n <= 8; n++) {
      var c = this.map[Math.min(255, n * 32)];
      stops.push("rgb(" + c.join(",") + ") " + (n * 12.5) + "%");
    }
    this.bar.style.background = "linear-gradient(to right, " + stops.join(", ") + ")";
    var g = L.format.general, scores = this.picture.kind === "scores";
    this.bar.setAttribute("data-lo", scores ? "−" + g(this.picture.limit, 6) : "0");
    this.bar.setAttribute("data-hi", scores ? "+" + g(this.picture.limit, 6) : "1");
    this.bar.append(el("span", { class: "explorer-colourbar-label" }, this.picture.colourbar));
  };

  Heatmap.prototype.colourOf = function (v) {
    var scores = this.picture.kind === "scores";
    return L.engine.colour(this.map, v, scores ? -this.picture.limit : 0, scores ? this.picture.limit : 1, this.masked);
  };

  Heatmap.prototype.cellText = function (v) {  // attention_lab.plots.heatmaps._number
    if (v === -Infinity) return "−∞";
    return L.format.fixed(v, this.digits).replace("-", "−");
  };

  /** Draw ``m`` (an engine matrix, T × T) with ``tokens`` (or positions) on the axes. */
  Heatmap.prototype.paint = function (m, tokens) {
    var T = m.rows, key = T + "|" + (tokens || "");
    if (key !== this.builtFor) {
      this.build(T, tokens);
      this.builtFor = key;
    }
    var numbers = T <= this.picture.numbers_up_to;
    if (this.canvas) this.drawCanvas(m);
    if (this.canvas && !this.sizes) this.placeCanvas();
    for (var i = 0; i < T; i++) {
      for (var j = 0; j < T; j++) this.paintCell(this.cells[i][j], L.engine.at(m, i, j), numbers);
    }
  };

  Heatmap.prototype.paintCell = function (td, v, numbers) {
    var text = this.cellText(v);
    if (numbers) {
      var rgb = this.colourOf(v);
      if (td.colour !== rgb) {  // a table entry: the same array for the same colour
        td.colour = rgb;
        td.style.backgroundColor = "rgb(" + rgb[0] + "," + rgb[1] + "," + rgb[2] + ")";
        // attention_lab.plots.contrast_color
        td.style.color = 0.2126 * rgb[0] + 0.7152 * rgb[1] + 0.0722 * rgb[2] > 0.45 * 255 ? "black" : "white";
      }
      if (td.textContent !== text) td.textContent = text;
    } else if (td.label !== text) {
      // above T = 8 a cell's number is its aria-label only: a screen reader reads it, the table keeps its layout
      td.label = text;
      td.setAttribute("aria-label", text);
    }
  };

  Heatmap.prototype.makeTable = function () {
    this.table = el("table", { class: "explorer-heatmap", role: "grid", "aria-describedby": this.id + "-caption",
      "aria-label": "attention picture: rows are queries, columns are keys" });
    this.colgroup = el("colgroup");
    this.colgroup.append(el("col", { class: "explorer-axis" }));
    this.headRow = el("tr");
    this.headRow.append(el("th", { scope: "col", class: "explorer-corner" }, "query ↓ key →"));
    var thead = el("thead");
    this.tbody = el("tbody");
    thead.append(this.headRow);
    this.table.append(this.colgroup, thead, this.tbody);
    this.heat.append(this.table);
    if (this.sizes) this.sizes.observe(this.table);  // a new T resizes the table: the canvas follows its cells
  };

  function cell(i, j) {
    return el("td", { role: "gridcell", tabindex: "-1", "data-i": i, "data-j": j });
  }

  /** The table grows and shrinks by rows and columns (typing adds one of each), never rebuilt whole. */
  Heatmap.prototype.build = function (T, tokens) {
    if (!this.table) this.makeTable();
    var cells = this.cells, n = cells.length, i, j;
    if (cells[this.active.i]) cells[this.active.i][this.active.j].tabIndex = -1;
    for (i = 0; i < Math.min(n, T); i++) {  // the rows that stay: columns added or removed
      var tr = this.tbody.rows[i];
      for (j = n; j < T; j++) { cells[i].push(cell(i, j)); tr.append(cells[i][j]); }
      for (j = n - 1; j >= T; j--) cells[i].pop().remove();
    }
    for (i = n; i < T; i++) {  // new rows
      var row = el("tr"), line = [];
      row.append(el("th", { scope: "row" }));
      for (j = 0; j < T; j++) { line.push(cell(i, j)); row.append(line[j]); }
      cells.push(line);
      this.tbody.append(row);
    }
    for (i = n - 1; i >= T; i--) { cells.pop(); this.tbody.rows[i].remove(); }
    this.label(T, tokens);
    if (T !== n) this.resize(T, n);
    this.active = { i: Math.min(this.active.i, T - 1), j: Math.min(this.active.j, T - 1) };
    cells[this.active.i][this.active.j].tabIndex = 0;
  };

  Heatmap.prototype.label = function (T, tokens) {  // the axes: characters, or positions
    var headRow = this.headRow, visible = this.picture.visible;
    while (headRow.cells.length - 1 < T) headRow.append(el("th", { scope: "col" }));
    while (headRow.cells.length - 1 > T) headRow.lastChild.remove();
    var chars = tokens ? Array.from(tokens) : null;
    for (var j = 0; j < T; j++) {
      var text = chars ? visible[chars[j]] || chars[j] : String(j);
      var colHead = headRow.cells[j + 1], rowHead = this.tbody.rows[j].cells[0];
      if (colHead.textContent !== text) { colHead.textContent = text; colHead.title = "key " + j; }
      if (rowHead.textContent !== text) { rowHead.textContent = text; rowHead.title = "query " + j; }
    }
  };

  Heatmap.prototype.resize = function (T, n) {
    this.sizeCells(T);
    var upTo = this.picture.numbers_up_to, wasNumbers = n > 0 && n <= upTo, numbers = T <= upTo;
    this.table.classList.toggle("explorer-numbers", numbers);
    if (n > 0 && wasNumbers !== numbers) {  // the cells change how they show their numbers
      this.cells.forEach(function (line) { line.forEach(function (td) {
        td.colour = td.label = null;
        if (numbers) td.removeAttribute("aria-label");
        else { td.textContent = ""; td.style.backgroundColor = ""; }
      }); });
    }
    // above T = 8 the colours are a canvas under the transparent cells, one pixel a cell, scaled up
    // (pixelated): recolouring a thousand cells costs a style pass, a canvas of their size a large bitmap
    if (!numbers && !this.canvas) {
      this.canvas = el("canvas", { class: "explorer-canvas", "aria-hidden": "true" });
      this.heat.prepend(this.canvas);
    } else if (numbers && this.canvas) {
      this.canvas.remove();
      this.canvas = null;
    }
  };

  // The cells' size, square, at most 2.5rem (or the picture's max_cell), smaller to fit a phone, and on a
  // wide screen small enough for per_row pictures side by side (chapter 7's heads): set on the T columns
  // and the T + 1 rows, so a new T restyles those 2T + 1 elements, not the T² cells
  Heatmap.prototype.sizeCells = function (T) {
    var p = this.picture, wide = p.per_row && window.matchMedia && window.matchMedia("(min-width: 48rem)").matches;
    var side = "min(" + (p.max_cell || 2.5) + "rem, calc((min(100vw, 42rem) / " + (wide ? p.per_row : 1) +
      " - 4.5rem) / " + (T + 1) + "))", cols = this.colgroup.children;
    while (cols.length - 1 < T) this.colgroup.append(el("col"));
    while (cols.length - 1 > T) this.colgroup.lastChild.remove();
    for (var j = 1; j <= T; j++) cols[j].style.width = side;
    this.headRow.style.height = side;
    for (var i = 0; i < T; i++) this.tbody.rows[i].style.height = side;
    this.table.style.fontSize = "min(0.8rem, calc(" + side + " * 0.45))";
  };

  Heatmap.prototype.drawCanvas = function (m) {  // T × T pixels, one a cell, in the cells' colours
    var T = m.rows, canvas = this.canvas;
    if (canvas.width !== T) {
      canvas.width = canvas.height = T;
      this.pixels = canvas.getContext("2d").createImageData(T, T);
    }
    var data = this.pixels.data;
    for (var i = 0; i < T; i++) {
      for (var j = 0; j < T; j++) {
        var rgb = this.colourOf(L.engine.at(m, i, j)), n = 4 * (i * T + j);
        data[n] = rgb[0];
        data[n + 1] = rgb[1];
        data[n + 2] = rgb[2];
        data[n + 3] = 255;
      }
    }
    canvas.getContext("2d").putImageData(this.pixels, 0, 0);
  };

  Heatmap.prototype.placeCanvas = function () {  // over the cells, after a layout that moved them
    var T = this.cells.length, box = this.heat.getBoundingClientRect();
    var first = this.cells[0][0].getBoundingClientRect(), last = this.cells[T - 1][T - 1].getBoundingClientRect();
    var style = this.canvas.style;
    style.left = first.left - box.left + this.heat.scrollLeft + "px";
    style.top = first.top - box.top + "px";
    style.width = last.right - first.left + "px";
    style.height = last.bottom - first.top + "px";
  };

  /** Mark cell (i, j) open: the keyboard's place in the grid and its ring. */
  Heatmap.prototype.mark = function (i, j, focus) {
    this.cells[this.active.i][this.active.j].tabIndex = -1;
    this.active = { i: i, j: j };
    var td = this.cells[i][j];
    td.tabIndex = 0;
    if (focus) td.focus();
    this.unmark();
    td.classList.add("is-open");
  };

  Heatmap.prototype.unmark = function () {
    Array.prototype.forEach.call(this.table.querySelectorAll(".is-open"), function (c) { c.classList.remove("is-open"); });
  };

  L.Heatmap = Heatmap;
})(typeof globalThis !== "undefined" ? globalThis : this);
