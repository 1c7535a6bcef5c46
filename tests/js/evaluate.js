// evaluate.js: a Node process that runs the page engine (attention_lab/static/engine/) without a browser,
// for tests/browser/test_engine.py and tests/js/: it loads the engine's scripts given as arguments into
// its global scope, then answers one JSON line per request, {fn, arg} -> {value} or {error}, where fn is
// the source of a function of arg, as Playwright's page.evaluate takes it. A request's numbers may be
// Infinity, -Infinity or NaN (Python writes them as those JavaScript words); so may a reply's, as
// {"__float__": "-Infinity"}, which browsing.NodePage reads back.
"use strict";
const fs = require("fs");
const vm = require("vm");
const readline = require("readline");

for (const path of process.argv.slice(2)) vm.runInThisContext(fs.readFileSync(path, "utf8"), { filename: path });
globalThis.window = globalThis;  // the tests' code names the page's global as window

const lines = readline.createInterface({ input: process.stdin });
lines.on("line", async (line) => {
  let reply;
  try {
    const { fn, arg } = vm.runInThisContext("(" + line + ")");  // JSON, or JSON with -Infinity in it
    const value = await vm.runInThisContext("(" + fn + ")")(arg);
    reply = { value: value === undefined ? null : value };
  } catch (err) {
    reply = { error: String(err && err.stack || err) };
  }
  const floats = (key, v) => typeof v === "number" && !Number.isFinite(v) ? { __float__: String(v) } : v;
  process.stdout.write(JSON.stringify(reply, floats) + "\n");
});
