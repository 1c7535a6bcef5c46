// Loaded before the widget manager (html-manager's embed.js), on pages with widgets.
// Added by book/_ext/selfhosted_assets.py through myst-nb's nb_ipywidgets_js; not a bundle, two small fixes.
(function () {
  "use strict";
  // 1. ipywidgets draws a slider's description as a <label> that nothing points at, so the focusable handle
  //    (role=slider) has no accessible name for a screen reader. Name each handle by its visible label.
  var labelled = 0;
  function nameSliders(root) {
    var handles = (root.querySelectorAll ? root : document).querySelectorAll('[role="slider"]:not([aria-labelledby]):not([aria-label])');
    Array.prototype.forEach.call(handles, function (handle) {
      var box = handle.closest(".widget-slider, .widget-hslider, .widget-vslider");
      var label = box && box.querySelector(".widget-label");
      if (!label || !label.textContent.trim()) return;
      if (!label.id) label.id = "widget-slider-label-" + ++labelled;
      handle.setAttribute("aria-labelledby", label.id);
    });
  }
  document.addEventListener("DOMContentLoaded", function () {
    new MutationObserver(function () { nameSliders(document); }).observe(document.body, { childList: true, subtree: true });
  });

  // 2. ipywidgets typesets labels with MathJax 2's `MathJax.Hub.Queue(["Typeset", MathJax.Hub, el])` whenever a
  //    window.MathJax exists. The self-hosted book renders its maths with KaTeX at build time and loads no
  //    MathJax, so this does nothing there; the CDN build (no Node, selfhosted_assets.py) loads MathJax 3, which
  //    has no Hub: the call would throw and the widget view fail. Give MathJax 3 that call.
  //    Runs on `load` (after MathJax's own script, which replaces window.MathJax) and before the widget
  //    manager's `load` handler, registered later.
  window.addEventListener("load", function () {
    var mj = window.MathJax;
    if (!mj || mj.Hub || !mj.version || mj.version.charAt(0) === "2") return;
    mj.Hub = {
      Queue: function () {
        Array.prototype.forEach.call(arguments, function (job) {
          var el = Array.isArray(job) && job[0] === "Typeset" ? job[2] : null;
          var ready = mj.startup && mj.startup.promise ? mj.startup.promise : Promise.resolve();
          ready.then(function () {
            return mj.typesetPromise ? mj.typesetPromise(el ? [el] : undefined) : null;
          }).catch(function (err) { console.warn("MathJax typeset of a widget label failed", err); });
        });
      },
    };
  });
})();
