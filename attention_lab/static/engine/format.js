/*
 * format.js: the explorers' words filled in the page as Python fills them (attention_lab.explorers.controls.say).
 *
 * Every caption and message is a template written once, in Python, that travels in the explorer's
 * config. A field is {name}, {name:.2f} or {name:g} (Python's format specs, ties rounded to even as
 * Python does), {n:word} ("1 word", "3 words") or {s!r} (Python's repr() of a string; of each item of a
 * list, joined by ", "). tests/test_engine.py fills the same templates in both languages.
 * Loads as a classic script (adds AttentionLab.format) or as a CommonJS module (Node).
 */
(function (root) {
  "use strict";

  /** Python's repr() of a str: single quotes unless it holds ' and no ", and what Python does not count
   * as printable (controls, format characters, spaces other than " ", unassigned) escaped as it does. */
  var UNPRINTABLE = /[\p{Cc}\p{Cf}\p{Cs}\p{Co}\p{Cn}\p{Zl}\p{Zp}\p{Zs}]/u;
  var ESCAPES = { "\\": "\\\\", "\n": "\\n", "\t": "\\t", "\r": "\\r" };
  function pyRepr(s) {
    var quote = s.indexOf("'") >= 0 && s.indexOf('"') < 0 ? '"' : "'";
    var out = "";
    for (var ch of s) {
      if (ESCAPES[ch]) out += ESCAPES[ch];
      else if (ch === quote) out += "\\" + ch;
      else if (ch === " " || !UNPRINTABLE.test(ch)) out += ch;
      else out += pyEscape(ch.codePointAt(0));
    }
    return quote + out + quote;
  }

  function pyEscape(code) {  // \xhh, \uhhhh or \Uhhhhhhhh, as repr() writes a character it does not print
    var hex = code.toString(16);
    return code < 0x100 ? "\\x" + hex.padStart(2, "0") : code < 0x10000 ? "\\u" + hex.padStart(4, "0")
      : "\\U" + hex.padStart(8, "0");
  }

  /** f"{x:.{digits}f}": toFixed, but an exact tie rounds to even as Python does (0.125 -> "0.12"). */
  function fixed(x, digits) {
    var twice = x * Math.pow(2, digits + 1);  // an odd whole number exactly when x ends in a 5 at digits + 1
    if (Number.isInteger(twice) && Math.abs(twice) % 2 === 1 && Math.abs(twice) < Math.pow(2, 52)) {
      var p = Math.pow(10, digits), below = Math.floor(x * p);
      var n = below % 2 === 0 ? below : below + 1;
      return (n / p).toFixed(digits);
    }
    var s = x.toFixed(digits);
    return Object.is(x, -0) || (x < 0 && !/^-/.test(s)) ? "-" + s : s;
  }

  /** f"{x:g}" and f"{x:.{p}g}": p significant digits, trailing zeros dropped, an exponent outside 1e-4 .. 1e{p}. */
  function general(x, p) {
    if (x === 0) return Object.is(x, -0) ? "-0" : "0";
    if (!isFinite(x)) return x > 0 ? "inf" : x < 0 ? "-inf" : "nan";
    var exp = Number(x.toExponential(p - 1).split("e")[1]);
    if (exp >= -4 && exp < p) return String(Number(fixed(x, Math.max(p - 1 - exp, 0))));
    var parts = x.toExponential(p - 1).split("e"), mantissa = parts[0].replace(/\.?0+$/, "");
    var e = Number(parts[1]);
    return mantissa + "e" + (e < 0 ? "-" : "+") + String(Math.abs(e)).padStart(2, "0");
  }

  function plural(n, word) {
    return n + " " + word + (n === 1 ? "" : "s");
  }

  function field(value, asRepr, spec) {
    if (asRepr) return Array.isArray(value) ? value.map(pyRepr).join(", ") : pyRepr(value);
    if (!spec) return String(value);
    if (/^[a-z]{2,}$/i.test(spec)) return plural(value, spec);  // a word, not a one-letter type such as g
    var m = /^\.(\d+)([fg])$/.exec(spec);
    if (m) return m[2] === "f" ? fixed(value, Number(m[1])) : general(value, Number(m[1]));
    if (spec === "g") return general(value, 6);
    throw new Error("format.js: no format spec " + spec);
  }

  /** A template with its fields filled, as attention_lab.explorers.controls.say fills it. */
  function say(template, fields) {
    return template.replace(/\{(\w+)(!r)?(?::([^{}]*))?\}/g, function (all, name, asRepr, spec) {
      if (!(name in fields)) throw new Error("format.js: the template " + JSON.stringify(template) + " names " + name);
      return field(fields[name], !!asRepr, spec);
    });
  }

  var api = { say: say, pyRepr: pyRepr, fixed: fixed, general: general, plural: plural };
  (root.AttentionLab = root.AttentionLab || {}).format = api;
  if (typeof module === "object" && module.exports) module.exports = api;
})(typeof globalThis !== "undefined" ? globalThis : this);
