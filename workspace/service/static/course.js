// The Course page: a roster file (the CSV an LMS exports, or one username per line) fills the roster box,
// so it can be read before it is sent; the server checks every line.
(function () {
  "use strict";
  document.querySelectorAll("input.roster-file").forEach(function (input) {
    input.addEventListener("change", function () {
      var file = input.files[0];
      if (!file) return;
      var box = input.form.querySelector("textarea[name=roster]");
      file.text().then(function (text) { box.value = text; });
    });
  });
})();
