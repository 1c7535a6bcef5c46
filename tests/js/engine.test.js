// engine.test.js: the page engine under Node's own test runner (`node --test tests/js/`), no browser.
//
// Its cases come from Python (tests/test_engine_node.py writes them and runs this file, setting
// ENGINE_CASES to their JSON): the words every explorer shares, filled by Python's say() and here by
// format.js; values each control takes or refuses, with Python's messages; and each explorer's pictures
// and captions at several settings, as the Python explorers compute them. ENGINE_SCRIPTS lists the
// engine's scripts in their load order (attention_lab/explorers/view.py's SCRIPTS).
"use strict";
const test = require("node:test");
const assert = require("node:assert");
const fs = require("fs");
const vm = require("vm");

const cases = JSON.parse(fs.readFileSync(process.env.ENGINE_CASES, "utf8"), (key, v) =>
  v && typeof v === "object" && "__float__" in v ? Number(v.__float__) : v);
for (const path of process.env.ENGINE_SCRIPTS.split("\n")) {
  vm.runInThisContext(fs.readFileSync(path, "utf8"), { filename: path });
}
const L = globalThis.AttentionLab;

test("templates are filled as Python fills them", () => {
  for (const [template, fields, want] of cases.say) assert.strictEqual(L.format.say(template, fields), want, template);
});

test("a control takes or refuses a value with Python's words", () => {
  for (const [control, raw, want, messages] of cases.accept) {
    let got;
    try {
      got = { value: L.controls.accept(control, raw, false, messages) };
    } catch (err) {
      if (!(err instanceof L.controls.BadInput)) throw err;
      got = { message: err.message };
    }
    assert.deepStrictEqual(got, want, JSON.stringify([control.name, raw]));
  }
});

test("every explorer computes Python's picture and caption", () => {
  for (const { config, settings } of cases.explorers) {
    const spec = L.explorers[config.explorer](config, null);
    for (const { values, matrix, caption, message, probs } of settings) {
      let r;
      try {
        r = spec.compute(values);
      } catch (err) {
        if (!(err instanceof L.controls.BadInput)) throw err;
        assert.strictEqual(err.message, message, config.explorer + " " + JSON.stringify(values));
        continue;
      }
      assert.strictEqual(message, undefined, config.explorer + ": Python refused " + JSON.stringify(values));
      // one picture, or (chapter 7) one a head, each against Python's matrix of that head
      const pictures = r.pictures ? r.pictures.map((p) => p.matrix) : [r.matrix];
      const wanted = r.pictures ? matrix : [matrix];
      assert.strictEqual(pictures.length, wanted.length, config.explorer);
      pictures.forEach((m, h) => {
        const want2 = wanted[h];
        assert.deepStrictEqual([m.rows, m.cols], [want2.length, want2.length], config.explorer);
        for (let i = 0; i < m.rows; i++) {
          for (let j = 0; j < m.cols; j++) {
            const got = L.engine.at(m, i, j), want = want2[i][j];
            assert.ok(got === want || Math.abs(got - want) <= 1e-5,
              `${config.explorer} ${JSON.stringify(values)} [${h}, ${i}, ${j}]: ${got} vs ${want}`);
          }
        }
      });
      if (probs) {  // chapter 7: the next-character probabilities
        assert.strictEqual(r.probs.length, probs.length, config.explorer);
        probs.forEach((want, i) => assert.ok(Math.abs(r.probs[i] - want) <= 1e-5,
          `${config.explorer} ${JSON.stringify(values)} p[${i}]: ${r.probs[i]} vs ${want}`));
      }
      assert.strictEqual(L.parts.caption(config, values, r), caption, config.explorer);
    }
  }
});
