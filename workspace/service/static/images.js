// The Images page: build an image and follow its log, share one, delete one (the REST API, api/images).
(function () {
  "use strict";
  var api = document.currentScript.dataset.api;
  var pre = document.getElementById("build-log");
  function xsrf() {
    var m = document.cookie.match(/(?:^|;\s*)_xsrf=([^;]*)/);
    return m ? decodeURIComponent(m[1]) : "";
  }
  function call(method, url, body) {
    return fetch(url, {
      method: method,
      credentials: "same-origin",
      headers: { "X-XSRFToken": xsrf(), "Content-Type": "application/json" },
      body: body === undefined ? undefined : JSON.stringify(body),
    }).then(function (r) {
      if (r.status === 204) return { status: 204, data: {} };
      return r.json().then(function (data) { return { status: r.status, data: data }; });
    });
  }
  function path(name) { return api + "/" + name.split("/").map(encodeURIComponent).join("/"); }
  // the log as it is written, until the build ends; then the page shows the result
  function follow(name, reloadAtEnd) {
    pre.classList.remove("d-none");
    pre.textContent = "";
    fetch(path(name) + "/log" + (reloadAtEnd ? "?follow=1" : ""), {
      credentials: "same-origin", headers: { "X-XSRFToken": xsrf() },
    }).then(function (r) {
      if (!r.ok) return r.json().then(function (e) { throw new Error(e.message); });
      var reader = r.body.getReader(), decoder = new TextDecoder();
      function read() {
        return reader.read().then(function (step) {
          if (step.done) {
            // the reloaded page shows the image's state and opens this log again (#log=NAME), so the log
            // just watched stays on the page
            if (reloadAtEnd) { history.replaceState(null, "", "#log=" + encodeURIComponent(name)); location.reload(); }
            return;
          }
          var atEnd = pre.scrollTop + pre.clientHeight >= pre.scrollHeight - 4;
          pre.textContent += decoder.decode(step.value, { stream: true });
          if (atEnd) pre.scrollTop = pre.scrollHeight;
          return read();
        });
      }
      return read();
    }).catch(function (e) { pre.textContent += "\n[" + e.message + "]"; });
  }
  var form = document.getElementById("build-form");
  if (form) {
    form.addEventListener("submit", function (ev) {
      ev.preventDefault();
      var result = document.getElementById("build-result");
      var f = new FormData(form), body = {};
      ["name", "from", "apt", "pip", "script", "visibility"].forEach(function (k) { body[k] = f.get(k); });
      document.getElementById("build").disabled = true;
      call("POST", api, body).then(function (r) {
        document.getElementById("build").disabled = false;
        if (r.status !== 202) { result.className = "ms-2 text-danger"; result.textContent = r.data.message; return; }
        result.className = "ms-2 text-success";
        result.textContent = _("Building {name}…", {name: r.data.name});
        follow(r.data.name, true);
      });
    });
  }
  // a Dockerfile and its folder (a tar archive, sent in base64 in the JSON body: the API's one shape)
  function base64Of(file) {
    return new Promise(function (resolve, reject) {
      var reader = new FileReader();
      reader.onload = function () { resolve(reader.result.slice(reader.result.indexOf(",") + 1)); };
      reader.onerror = function () { reject(reader.error); };
      reader.readAsDataURL(file);
    });
  }
  var dockerfileForm = document.getElementById("dockerfile-form");
  if (dockerfileForm) {
    dockerfileForm.addEventListener("submit", function (ev) {
      ev.preventDefault();
      var result = document.getElementById("dockerfile-result"), button = document.getElementById("build-dockerfile");
      var f = new FormData(dockerfileForm), file = document.getElementById("dockerfile-context").files[0];
      var body = { name: f.get("name"), visibility: f.get("visibility"), dockerfile: f.get("dockerfile") };
      var max = Number(document.getElementById("dockerfile-context").dataset.max);
      if (file && file.size > max) {
        result.className = "ms-2 text-danger";
        result.textContent = _("The folder's archive is larger than {mb} MB.", {mb: Math.floor(max / 1000000)});
        return;
      }
      button.disabled = true;
      (file ? base64Of(file) : Promise.resolve(null)).then(function (context) {
        if (context !== null) body.context = context;
        return call("POST", api, body);
      }).then(function (r) {
        button.disabled = false;
        if (r.status !== 202) { result.className = "ms-2 text-danger"; result.textContent = r.data.message; return; }
        result.className = "ms-2 text-success";
        result.textContent = _("Building {name}…", {name: r.data.name});
        follow(r.data.name, true);
      }).catch(function (e) {
        button.disabled = false;
        result.className = "ms-2 text-danger";
        result.textContent = e.message;
      });
    });
  }
  document.querySelectorAll(".user-image").forEach(function (row) {
    var name = row.dataset.name;
    var busy = row.dataset.state === "queued" || row.dataset.state === "building";
    var log = row.querySelector(".show-log");
    if (log) log.addEventListener("click", function () { follow(name, busy); });
    if (location.hash === "#log=" + encodeURIComponent(name)) follow(name, busy);
    var del = row.querySelector(".delete-image");
    if (del) del.addEventListener("click", function () {
      if (!confirm(_("Delete the image {name}? Workspaces cannot start from it any more.", {name: name}))) return;
      call("DELETE", path(name)).then(function (r) {
        if (r.status === 204) row.remove(); else alert(r.data.message);
      });
    });
    var vis = row.querySelector(".visibility");
    if (vis) vis.addEventListener("change", function () {
      call("PATCH", path(name), { visibility: vis.value }).then(function (r) {
        if (r.status !== 200) alert(r.data.message);
      });
    });
    row.querySelectorAll(".revoke-approval").forEach(function (button) {
      button.addEventListener("click", function () {
        var audience = button.parentNode.dataset.for;
        call("POST", path(name) + "/revoke", { for: audience }).then(function (r) {
          if (r.status === 200) location.reload(); else alert(r.data.message);
        });
      });
    });
    if (busy && log) follow(name, true);  // a build under way: its log at once
  });
  // an administrator's or an instructor's approval of the build they read (a rebuild since: the API's 409)
  document.querySelectorAll(".pending-image").forEach(function (row) {
    var button = row.querySelector(".approve-image"), result = row.querySelector(".approve-result");
    button.addEventListener("click", function () {
      button.disabled = true;
      var body = { for: row.dataset.for, build: parseInt(row.dataset.build, 10) };
      call("POST", path(row.dataset.name) + "/approve", body).then(function (r) {
        if (r.status === 200) { location.reload(); return; }
        button.disabled = false;
        result.className = "small approve-result text-danger";
        result.textContent = r.data.message;
      });
    });
  });
})();
