/* page.js: the hosted book mounts every explorer of its page once the page is read (mount.js). */
(function (root) {
  "use strict";
  var L = root.AttentionLab;
  if (document.readyState === "loading") document.addEventListener("DOMContentLoaded", L.mountAll);
  else L.mountAll();
})(typeof globalThis !== "undefined" ? globalThis : this);
