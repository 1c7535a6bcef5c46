/*
 * attention.js: the course's attention maths, in the page, with no Python.
 *
 * It reproduces, from a seed, what torch 2.13.0 (CPU, float32) gives the chapters:
 * - torch's CPU generator: mt19937 seeded by `torch.manual_seed(seed)`, and the draws of
 *   `torch.rand` / `uniform_(a, b)` and `torch.randn` / `normal_` (both of torch's paths:
 *   Box-Muller in blocks of 16 for 16 or more numbers, the cached scalar one below that);
 * - the default start of `nn.Linear(C, d, bias=False)` and `nn.Embedding(n, C)`, and chapter
 *   5's token table, position table and head built in the explorer's order;
 * - x @ W.T, scores q @ k.T, the 1/sqrt(d_k) scale, the causal mask (tril), softmax weights,
 *   out = weights @ v, and the trace of one weight w_ij for a learner to read;
 * - the vocabulary's encode and a colour map lookup in matplotlib's manner.
 *
 * How close: the raw stream, rand, uniform_ (so nn.Linear) and randn of fewer than 16 numbers
 * are torch's to the bit; randn of 16 or more agrees to about 2e-6, because torch's AVX2
 * kernel takes vectorized approximations of log, sin and cos. uniform_ follows torch's AVX2
 * and AVX-512 kernels, which fuse x * (to - from) + from into one multiply-add; torch's
 * default kernel (no AVX2) rounds twice, one float32 step away in about half the numbers.
 * A matrix is {rows, cols, data}, data a row-major Float32Array: every stored number is a
 * float32 as in torch, but sums run in float64 and are rounded once, so pictures agree with
 * torch's to about 1e-6, not bit for bit.
 * Seeds: whole Numbers 0 .. 2**53, or BigInts 0 .. 2**64 - 1; torch keeps the low 32 bits.
 *
 * Kept honest by tests/test_engine.py, which runs this file under Node and in Chromium and compares
 * every draw, weight and picture with torch computed in the test.
 * Loads as a classic script (adds AttentionLab.engine) or as a CommonJS module (Node).
 */
(function (root) {
  "use strict";

  var f32 = Math.fround;

  // ---- torch's CPU generator ---------------------------------------------------------------

  var N = 624, M = 397;
  var MAX_SEED = Math.pow(2, 53);

  // torch keeps only the low 32 bits of its 64-bit seed (mt19937's init_with_uint32)
  function seed32(seed) {
    if (typeof seed === "bigint") {
      if (seed < BigInt(0) || seed >= BigInt(2) ** BigInt(64)) {
        throw new RangeError("seed must be from 0 to 2**64 - 1; got " + seed);
      }
      return Number(seed & BigInt(0xffffffff));
    }
    if (typeof seed !== "number" || !Number.isInteger(seed) || seed < 0 || seed > MAX_SEED) {
      throw new RangeError("seed must be a whole number from 0 to 2**53 (or a BigInt below " +
        "2**64); got " + seed);
    }
    return seed % 4294967296;
  }

  /** A generator seeded as torch.Generator().manual_seed(seed) seeds it. */
  function Generator(seed) {
    this.state = new Uint32Array(N);
    this.manualSeed(seed === undefined ? 0 : seed);
  }

  Generator.prototype.manualSeed = function (seed) {
    var s = this.state;
    s[0] = seed32(seed);
    for (var j = 1; j < N; j++) {
      var prev = s[j - 1];
      s[j] = (Math.imul(1812433253, (prev ^ (prev >>> 30)) >>> 0) + j) >>> 0;
    }
    this.left = 1;  // the first draw twists the state
    this.next = 0;
    this.nextNormal = null;  // the scalar path's cached second normal; seeding forgets it
    return this;
  };

  function twist(s) {
    for (var j = 0; j < N; j++) {
      var y = (s[j] & 0x80000000) | (s[(j + 1) % N] & 0x7fffffff);
      s[j] = s[(j + M) % N] ^ (y >>> 1) ^ (y & 1 ? 0x9908b0df : 0);
    }
  }

  /** The next raw 32-bit draw (torch's generator->random()). */
  Generator.prototype.random = function () {
    if (--this.left === 0) {
      twist(this.state);
      this.left = N;
      this.next = 0;
    }
    var y = this.state[this.next++];
    y ^= y >>> 11;
    y ^= (y << 7) & 0x9d2c5680;
    y ^= (y << 15) & 0xefc60000;
    y ^= y >>> 18;
    return y >>> 0;
  };

  // a float32 in [0, 1) from the low 24 bits of one draw: exact in float32
  Generator.prototype.uniform01 = function () {
    return (this.random() & 0xffffff) / 16777216;
  };

  // a float64 in [0, 1) from the low 53 bits of two draws (random64: first draw high)
  Generator.prototype.uniform01Double = function () {
    var hi = this.random() & 0x1fffff, lo = this.random();
    return (hi * 4294967296 + lo) / 9007199254740992;
  };

  /** n numbers as torch's uniform_(a, b) draws them into a float32 tensor. */
  Generator.prototype.uniform = function (n, a, b) {
    var from = f32(a === undefined ? 0 : a), to = f32(b === undefined ? 1 : b);
    var width = f32(to - from), out = new Float32Array(n);
    for (var i = 0; i < n; i++) {
      // torch's AVX2 kernel fuses x * (to - from) + from into one multiply-add; in float64
      // these float32s multiply and add exactly, so storing rounds once, as the fused one does
      out[i] = this.uniform01() * width + from;
    }
    return out;
  };

  /** torch.rand(n, generator=g): uniform on [0, 1). */
  Generator.prototype.rand = function (n) {
    return this.uniform(n, 0, 1);
  };

  // Box-Muller on data[at .. at+15]: 1 - data[j] and data[j+8] make data[j] and data[j+8]
  function normalFill16(data, at, mean, std) {
    for (var j = at; j < at + 8; j++) {
      var u1 = f32(1 - data[j]);  // (0, 1]: safe for log
      var radius = Math.sqrt(-2 * Math.log(u1));
      var theta = f32(2 * Math.PI * data[j + 8]);
      data[j] = radius * Math.cos(theta) * std + mean;
      data[j + 8] = radius * Math.sin(theta) * std + mean;
    }
  }

  // the scalar path: two float64 uniforms give two normals; the second waits for the next call
  Generator.prototype.normalScalar = function () {
    if (this.nextNormal !== null) {
      var cached = this.nextNormal;
      this.nextNormal = null;
      return cached;
    }
    var u1 = this.uniform01Double(), u2 = this.uniform01Double();
    var r = Math.sqrt(-2 * Math.log1p(-u2));
    var theta = 2 * Math.PI * u1;
    this.nextNormal = r * Math.sin(theta);
    return r * Math.cos(theta);
  };

  /** n numbers as torch's normal_(mean, std) draws them into a contiguous float32 tensor. */
  Generator.prototype.normal = function (n, mean, std) {
    mean = mean === undefined ? 0 : mean;
    std = std === undefined ? 1 : std;
    var data = new Float32Array(n), i;
    if (n < 16) {  // torch's scalar path, in float64, rounded to float32 once
      for (i = 0; i < n; i++) data[i] = this.normalScalar() * std + mean;
      return data;
    }
    for (i = 0; i < n; i++) data[i] = this.uniform01();
    for (i = 0; i + 16 <= n; i += 16) normalFill16(data, i, f32(mean), f32(std));
    if (n % 16 !== 0) {  // torch draws the last 16 again and transforms them as one block
      for (i = n - 16; i < n; i++) data[i] = this.uniform01();
      normalFill16(data, n - 16, f32(mean), f32(std));
    }
    return data;
  };

  /** torch.randn(n, generator=g). */
  Generator.prototype.randn = function (n) {
    return this.normal(n, 0, 1);
  };

  // ---- matrices and the modules' default start ---------------------------------------------

  function matrix(rows, cols, data) {
    if (data.length !== rows * cols) {
      throw new RangeError("expected " + rows * cols + " numbers for a (" + rows + ", " + cols +
        ") matrix; got " + data.length);
    }
    return { rows: rows, cols: cols, data: data instanceof Float32Array ? data : new Float32Array(data) };
  }

  function at(m, i, j) {
    return m.data[i * m.cols + j];
  }

  function row(m, i) {
    return m.data.subarray(i * m.cols, (i + 1) * m.cols);
  }

  /** nn.Linear(inFeatures, outFeatures, bias=False).weight, (out, in), drawn from g. */
  function linearWeight(g, inFeatures, outFeatures) {
    // kaiming_uniform_(a=sqrt(5)) as torch/nn/init.py computes it, in float64
    var a = Math.sqrt(5);
    var gain = Math.sqrt(2.0 / (1 + a * a));
    var bound = Math.sqrt(3.0) * (gain / Math.sqrt(inFeatures));  // = 1/sqrt(in)
    return matrix(outFeatures, inFeatures, g.uniform(outFeatures * inFeatures, -bound, bound));
  }

  /** nn.Embedding(n, C).weight, (n, C), drawn from g: normal_(0, 1). */
  function embeddingWeight(g, n, C) {
    return matrix(n, C, g.randn(n * C));
  }

  /** A copy of the generator, at the same place in its stream. */
  Generator.prototype.clone = function () {
    var g = Object.create(Generator.prototype);
    g.state = new Uint32Array(this.state);
    g.left = this.left;
    g.next = this.next;
    g.nextNormal = this.nextNormal;
    return g;
  };

  /**
   * Chapter 5's modules under torch.manual_seed(seed), in the explorer's order: the token
   * table nn.Embedding(vocabSize, C), the position table nn.Embedding(blockSize, C), then
   * Head(C, headSize, blockSize), whose key, query and value are made in that order.
   */
  function buildHead(seed, headSize, blockSize, C, vocabSize) {
    return headFrom(buildTables(seed, blockSize, C, vocabSize), headSize);
  }

  /**
   * The two tables alone, and the generator where they leave it: every head size starts from
   * there (headFrom), so a page that changes d_k draws only the head's weights again.
   */
  function buildTables(seed, blockSize, C, vocabSize) {
    C = C === undefined ? 384 : C;
    vocabSize = vocabSize === undefined ? 65 : vocabSize;
    var g = new Generator(seed);
    var tokenTable = embeddingWeight(g, vocabSize, C);  // (vocab, C)
    var positionTable = embeddingWeight(g, blockSize, C);  // (block_size, C)
    return { after: g, tokenTable: tokenTable, positionTable: positionTable, C: C, blockSize: blockSize };
  }

  /**
   * Head(C, headSize, blockSize) drawn after the tables of buildTables: key, query, value. The three
   * nn.Linear(C, headSize) draw 3 * headSize * C numbers in a row from the same uniform on
   * ±1/sqrt(C), so every head size reads the start of one stream drawn once per seed (and drawn
   * longer when a larger head asks): a new d_k on the slider costs no draws.
   */
  function headFrom(tables, headSize) {
    var C = tables.C, n = headSize * C;
    if (!tables.stream || tables.stream.length < 3 * n) {
      var longer = Math.max(3 * n, tables.stream ? 2 * tables.stream.length : 0);
      tables.stream = linearWeight(tables.after.clone(), C, longer / C).data;  // (3 * rows, C) in a row
    }
    var part = function (k) { return matrix(headSize, C, tables.stream.subarray(k * n, (k + 1) * n)); };
    return { tokenTable: tables.tokenTable, positionTable: tables.positionTable, key: part(0),
      query: part(1), value: part(2), C: C, headSize: headSize, blockSize: tables.blockSize };
  }

  // ---- the attention maths -----------------------------------------------------------------

  /** x = token_table[ids] + position_table[arange(T)]: (T, C). */
  function embed(modules, ids) {
    var T = ids.length, C = modules.C;
    if (T > modules.blockSize) {
      throw new RangeError("T=" + T + " is above block_size=" + modules.blockSize);
    }
    var x = new Float32Array(T * C);
    for (var t = 0; t < T; t++) {
      var tok = row(modules.tokenTable, ids[t]), pos = row(modules.positionTable, t);
      for (var c = 0; c < C; c++) x[t * C + c] = tok[c] + pos[c];
    }
    return matrix(T, C, x);
  }

  /** x @ W.T for x (T, in) and W (out, in): (T, out); `rows` keeps W's first rows only. */
  function linear(x, W, rows) {
    var out = rows === undefined ? W.rows : rows, n = x.cols;
    if (W.cols !== n || out > W.rows) {
      throw new RangeError("x is (" + x.rows + ", " + n + ") but W is (" + W.rows + ", " + W.cols +
        "): W must be (out, in) with in = " + n);
    }
    var y = new Float32Array(x.rows * out), xd = x.data, wd = W.data;  // local names: a tight loop
    for (var t = 0; t < x.rows; t++) {
      for (var o = 0; o < out; o++) {
        var sum = 0, xt = t * n, wo = o * n;
        for (var c = 0; c < n; c++) sum += xd[xt + c] * wd[wo + c];
        y[t * out + o] = sum;
      }
    }
    return matrix(x.rows, out, y);
  }

  /** scores = q @ k.T over the first d_k columns (all by default): (T, T). */
  function dotScores(q, k, headSize) {
    var d = headSize === undefined ? q.cols : headSize, T = q.rows;
    var s = new Float32Array(T * k.rows), qd = q.data, kd = k.data;
    for (var i = 0; i < T; i++) {
      for (var j = 0; j < k.rows; j++) {
        var sum = 0, qi = i * q.cols, kj = j * k.cols;
        for (var m = 0; m < d; m++) sum += qd[qi + m] * kd[kj + m];
        s[i * k.rows + j] = sum;
      }
    }
    return matrix(T, k.rows, s);
  }

  /** softmax over the last axis; -Infinity (a masked score) gives an exact 0. */
  function softmax(scores) {
    var T = scores.rows, n = scores.cols, w = new Float32Array(T * n);
    for (var i = 0; i < T; i++) {
      var r = row(scores, i), max = -Infinity, sum = 0, j;
      for (j = 0; j < n; j++) max = Math.max(max, r[j]);
      for (j = 0; j < n; j++) sum += Math.exp(r[j] - max);
      for (j = 0; j < n; j++) w[i * n + j] = Math.exp(r[j] - max) / sum;
    }
    return matrix(T, n, w);
  }

  /**
   * One head's picture from q, k (T, d_k) and optionally v: scores = q @ k.T, divided by
   * sqrt(d_k) when options.scale (default true), future keys j > i set to -Infinity when
   * options.mask (default true), weights = softmax(scores), and out = weights @ v.
   * options.headSize uses only the first d_k columns of q, k and v (chapters 2 and 3).
   */
  function attention(q, k, v, options) {
    options = options || {};
    var d = options.headSize === undefined ? q.cols : options.headSize;
    var scale = options.scale !== false, mask = options.mask !== false;
    var raw = dotScores(q, k, d), T = raw.rows;
    var scores = matrix(T, raw.cols, raw.data.slice());
    var divisor = f32(Math.sqrt(d));  // torch casts the Python float to float32
    for (var i = 0; i < T; i++) {
      for (var j = 0; j < raw.cols; j++) {
        var s = scale ? f32(at(raw, i, j) / divisor) : at(raw, i, j);
        scores.data[i * raw.cols + j] = mask && j > i ? -Infinity : s;  // tril == 0 -> -inf
      }
    }
    var weights = softmax(scores), out = null;
    if (v) {
      var o = new Float32Array(T * d), wd = weights.data, vd = v.data, n = raw.cols;
      for (i = 0; i < T; i++) {
        for (var m = 0; m < d; m++) {
          var sum = 0;
          for (j = 0; j < n; j++) sum += wd[i * n + j] * vd[j * v.cols + m];
          o[i * d + m] = sum;
        }
      }
      out = matrix(T, d, o);
    }
    return { raw: raw, scores: scores, weights: weights, out: out, headSize: d, scale: scale,
      mask: mask, q: q, k: k, v: v || null };
  }

  /** Chapter 5: the head built by buildHead over the ids of a text: x, q, k, v and the picture. */
  function head(modules, ids) {
    var x = embed(modules, ids);  // (T, C)
    var k = linear(x, modules.key), q = linear(x, modules.query), v = linear(x, modules.value);
    var result = attention(q, k, v, { scale: true, mask: true });
    result.x = x;
    return result;
  }

  /**
   * The same result as head(headFrom(tables, headSize), ids), made for a page whose d_k and text
   * change at every press. Every head size's key, query and value are the row ranges [0, d), [d, 2d)
   * and [2d, 3d) of headFrom's one stream S, so each position's x @ S.T, kept per (position,
   * character), serves every d_k: a new d_k, or a character typed at the end, adds no product over C
   * (a new character adds one row). The products are linear()'s, number for number.
   */
  function headAt(tables, ids, headSize) {
    var C = tables.C, d = headSize, T = ids.length;
    if (T > tables.blockSize) throw new RangeError("T=" + T + " is above block_size=" + tables.blockSize);
    headFrom(tables, headSize);  // the stream, drawn long enough
    var S = tables.stream, rows = S.length / C;
    if (tables.rowsFor !== rows || tables.kept > 4096) {
      tables.rowsOf = {};
      tables.rowsFor = rows;
      tables.kept = 0;
    }
    var q = new Float32Array(T * d), k = new Float32Array(T * d), v = new Float32Array(T * d);
    var x = new Float32Array(C);
    for (var t = 0; t < T; t++) {
      var key = t + ":" + ids[t], p = tables.rowsOf[key];
      if (!p) {
        var tok = row(tables.tokenTable, ids[t]), pos = row(tables.positionTable, t);
        for (var c = 0; c < C; c++) x[c] = tok[c] + pos[c];  // x_t, float32 as embed() stores it
        p = new Float32Array(rows);
        for (var r = 0; r < rows; r++) {
          var sum = 0, at0 = r * C;
          for (c = 0; c < C; c++) sum += x[c] * S[at0 + c];
          p[r] = sum;
        }
        tables.rowsOf[key] = p;
        tables.kept++;
      }
      for (var m = 0; m < d; m++) {
        k[t * d + m] = p[m];
        q[t * d + m] = p[d + m];
        v[t * d + m] = p[2 * d + m];
      }
    }
    return attention(matrix(T, d, q), matrix(T, d, k), matrix(T, d, v), { scale: true, mask: true });
  }

  function norm(m, i, d) {
    var sum = 0;
    for (var c = 0; c < d; c++) sum += at(m, i, c) * at(m, i, c);
    return Math.sqrt(sum);
  }

  /**
   * How w_ij (row i = query, column j = key) comes about, from a result of attention() or
   * head(): the dot product q_i·k_j and its `top` largest terms by size, the score after the
   * scale, whether j is masked, e^(score - row max) over the row's sum of those, and w_ij.
   * With v, `share` is w_ij |v_j| / sum over j' of w_ij' |v_j'|: the part of the value
   * vectors mixed into out_i that comes from key j, in 0..1 (a row's shares sum to 1).
   */
  function trace(result, i, j, top) {
    var d = result.headSize, terms = [];
    for (var m = 0; m < d; m++) {
      var qm = at(result.q, i, m), km = at(result.k, j, m);
      terms.push({ index: m, q: qm, k: km, product: qm * km });
    }
    terms.sort(function (a, b) { return Math.abs(b.product) - Math.abs(a.product) || a.index - b.index; });
    var scores = row(result.scores, i), max = -Infinity, rowSum = 0, c;
    for (c = 0; c < scores.length; c++) max = Math.max(max, scores[c]);
    for (c = 0; c < scores.length; c++) rowSum += Math.exp(scores[c] - max);
    var t = {
      i: i, j: j, dot: at(result.raw, i, j), top: terms.slice(0, top === undefined ? 3 : top),
      divisor: result.scale ? Math.sqrt(d) : 1, score: at(result.scores, i, j),
      masked: result.mask && j > i, rowMax: max, exp: Math.exp(scores[j] - max), rowSum: rowSum,
      weight: at(result.weights, i, j), share: null
    };
    if (result.v) {
      var total = 0;
      for (c = 0; c < scores.length; c++) total += at(result.weights, i, c) * norm(result.v, c, d);
      t.share = total > 0 ? t.weight * norm(result.v, j, d) / total : 0;
    }
    return t;
  }

  // ---- helpers for the pages ---------------------------------------------------------------

  /** The ids of text's characters in vocab (a string: the course's 65 sorted characters). */
  function encode(text, vocab) {
    var ids = [], missing = [];
    for (var t = 0; t < text.length; t++) {
      var id = vocab.indexOf(text[t]);
      if (id < 0 && missing.indexOf(text[t]) < 0) missing.push(text[t]);
      ids.push(id);
    }
    if (missing.length) {
      throw new RangeError("not in the vocabulary: " + missing.map(JSON.stringify).join(", "));
    }
    return ids;
  }

  /**
   * The entry of a 256-colour table for value on vmin..vmax, as matplotlib's
   * cmap(Normalize(vmin, vmax)(value)) picks it for a float32 value: below vmin the first
   * entry, above vmax the last, and `bad` for -Infinity or NaN (a masked score).
   */
  function colour(table, value, vmin, vmax, bad) {
    if (!isFinite(value)) return bad;
    var x = f32(f32(f32(value) - f32(vmin)) / f32(f32(vmax) - f32(vmin)));
    var n = table.length, index = Math.floor(f32(x * n));
    return table[Math.max(0, Math.min(n - 1, index))];  // vmax itself takes the last colour
  }

  var api = {
    Generator: Generator, linearWeight: linearWeight, embeddingWeight: embeddingWeight,
    buildHead: buildHead, buildTables: buildTables, headFrom: headFrom, headAt: headAt, matrix: matrix, at: at, embed: embed, linear: linear,
    attention: attention, head: head, trace: trace, encode: encode, colour: colour
  };
  (root.AttentionLab = root.AttentionLab || {}).engine = api;
  if (typeof module === "object" && module.exports) module.exports = api;
})(typeof globalThis !== "undefined" ? globalThis : this);
