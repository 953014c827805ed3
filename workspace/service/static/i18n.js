// The pages' sentences in the page's language: _("... {name} ...", {name: value}).
// The translations of this page's language come with the page (base.html, from the catalogue of
// workspace/i18n.py); a sentence without one reads as written.
(function () {
  "use strict";
  const node = document.getElementById("workspace-messages");
  const messages = node ? JSON.parse(node.textContent || "{}") : {};
  window._ = function (message, params) {
    const text = messages[message] || message;
    if (!params) return text;
    return text.replace(/\{(\w+)\}/g, (whole, key) => (key in params ? String(params[key]) : whole));
  };
})();
