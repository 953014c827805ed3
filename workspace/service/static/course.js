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

// Pre-warming a course before a lecture (api/courses/NAME/prewarm): the button starts it (a POST with the
// XSRF token), and its progress is asked for every second while it runs; a page opened meanwhile shows it.
(function () {
  "use strict";
  function xsrf() {
    var m = document.cookie.match(/(?:^|;\s*)_xsrf=([^;]*)/);
    return m ? decodeURIComponent(m[1]) : "";
  }
  function call(method, url) {
    return fetch(url, { method: method, credentials: "same-origin", headers: { "X-XSRFToken": xsrf() } }).then(
      function (r) { return r.json().then(function (data) { return { status: r.status, data: data }; }); }
    );
  }
  function details(s) {
    var lines = [];
    (s.nodes || []).forEach(function (n) {
      lines.push(_("{node}: {count} student(s)", { node: n.name, count: n.homes }));
      if (n.image === "failed") lines.push(_("The image on {node}: {error}", { node: n.name, error: n.image_error }));
    });
    (s.students || []).forEach(function (st) {
      if (st.state === "failed") {
        lines.push(_("The home of {student} to {node}: {error}", { student: st.name, node: st.node, error: st.error }));
      }
    });
    return lines;
  }
  function show(box, s, failed) {
    var status = box.querySelector(".prewarm-status"), bar = box.querySelector(".progress");
    status.textContent = s.message || "";
    status.className = "small mt-2 mb-0 prewarm-status" + (failed || s.state === "failed" ? " text-danger" : "");
    box.querySelector(".prewarm-start").disabled = s.state === "running";
    if (s.homes && s.state !== "none") {
      var pct = s.homes.total ? Math.round((100 * s.homes.done) / s.homes.total) : s.state === "done" ? 100 : 0;
      bar.classList.remove("d-none");
      bar.setAttribute("aria-valuenow", String(pct));
      bar.querySelector(".prewarm-bar").style.width = pct + "%";
    }
    var list = box.querySelector(".prewarm-details");
    list.textContent = "";
    details(s).forEach(function (text) {
      var li = document.createElement("li");
      li.textContent = text;
      list.appendChild(li);
    });
  }
  function follow(box) {
    call("GET", box.dataset.api).then(function (r) {
      if (r.status !== 200) return show(box, r.data, true);
      show(box, r.data, false);
      if (r.data.state === "running") setTimeout(function () { follow(box); }, 1000);
    });
  }
  document.querySelectorAll(".prewarm").forEach(function (box) {
    follow(box);
    box.querySelector(".prewarm-start").addEventListener("click", function (ev) {
      ev.target.disabled = true;
      call("POST", box.dataset.api).then(function (r) {
        if (r.status !== 202 && r.status !== 200) {
          ev.target.disabled = false;
          show(box, r.data, true);
          if (r.status === 409) setTimeout(function () { follow(box); }, 1000); // the one under way
          return;
        }
        show(box, r.data, false);
        if (r.data.state === "running") setTimeout(function () { follow(box); }, 1000);
      });
    });
  });
})();
