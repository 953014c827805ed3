// The workspace page: live usage of a running execution and the progress of a save.
// While something changes (starting, saving) the page reloads itself when it is done.
(function () {
  "use strict";
  var box = document.getElementById("executions");
  if (!box) return;
  var api = box.dataset.api, query = box.dataset.query || "";  // query: ?user= of a read-only view
  function xsrf() {
    var m = document.cookie.match(/(?:^|;\s*)_xsrf=([^;]*)/);
    return m ? decodeURIComponent(m[1]) : "";
  }
  function get(path) {
    // cookie-authenticated fetches carry the XSRF token (JupyterHub checks it, GETs included)
    return fetch(api + path + query, { credentials: "same-origin", headers: { "X-XSRFToken": xsrf() } }).then(function (r) {
      if (!r.ok) throw new Error(path + ": " + r.status);
      return r.json();
    });
  }
  function gb(b) { return (b / 1e9).toFixed(2) + " GB"; }
  function poll() {
    document.querySelectorAll(".usage").forEach(function (el) {
      get("/executions/" + el.dataset.number + "/usage").then(function (u) {
        var s = u.samples[u.samples.length - 1];
        if (!s) return;
        // each part a label of its own; the line puts them together
        var parts = [s.cpu_percent === null ? _("CPU –") : _("CPU {percent} %", {percent: s.cpu_percent.toFixed(1)})];
        if (s.memory_bytes !== null) parts.push(_("memory {size}", {size: gb(s.memory_bytes)}));
        if (s.gpu_percent !== null) parts.push(_("GPU {percent} %", {percent: s.gpu_percent.toFixed(0)}));
        parts.push(s.browser ? _("browser attached") : _("no browser"));
        el.textContent = _("Usage ({time} UTC): {usage}", {time: s.at.replace("T", " ").slice(0, 19), usage: parts.join(", ")});
      }).catch(function () {});
    });
    get("/executions").then(function (list) {
      var changed = false;
      list.forEach(function (ex) {
        var card = document.querySelector('.execution[data-number="' + ex.number + '"]');
        if (!card || card.dataset.state !== ex.state) { changed = true; return; }
        if (ex.state === "saving" && ex.save_progress) {
          var p = ex.save_progress, bar = card.querySelector(".save-progress");
          var done = p.bytes_total ? p.bytes / p.bytes_total : (p.files_total ? p.files / p.files_total : 0);
          if (bar) bar.style.width = Math.round(100 * done) + "%";
          var text = card.querySelector(".save-text");
          if (text) text.textContent = _("Saving: {progress}", {progress: p.text});
        }
      });
      // The badge is the hub's view (its server ready, or pending a stop), which settles a moment after
      // the newest execution's record does: reload until they agree, or a page drawn in between
      // would say "stopping" (or "starting") forever.
      var badge = document.getElementById("state"), newest = list[list.length - 1];
      if (badge && newest) {
        var shown = badge.dataset.state;
        if ((shown === "stopping" && (newest.state === "stopped" || newest.state === "failed")) ||
            (shown === "starting" && newest.state === "running")) changed = true;
      }
      if (changed) window.location.reload();
    }).catch(function () {});
  }
  // "Make a dataset from this output": create the dataset if it is new, then a version from the output
  // (no copy: the version shares the output's files).
  function send(url, body) {
    return fetch(url, {
      method: "POST", credentials: "same-origin", body: JSON.stringify(body),
      headers: { "X-XSRFToken": xsrf(), "Content-Type": "application/json" },
    }).then(function (r) { return r.json().then(function (data) { return { status: r.status, data: data }; }); });
  }
  document.querySelectorAll(".dataset-form").forEach(function (form) {
    form.addEventListener("submit", function (event) {
      event.preventDefault();
      var result = form.querySelector(".dataset-result"), name = form.elements.dsname.value.trim();
      var datasetsApi = box.dataset.datasetsApi, owner = box.dataset.user;
      result.className = "col-12 dataset-result text-muted";
      result.textContent = _("Making the version…");
      send(datasetsApi, { name: name }).then(function (made) {
        if (made.status !== 201 && made.status !== 409) throw new Error(made.data.message);
        return send(datasetsApi + "/" + encodeURIComponent(owner) + "/" + encodeURIComponent(name) + "/versions", {
          from_execution: { workspace: box.dataset.workspace, number: Number(form.getAttribute("data-number")),
                            path: form.elements.path.value.trim() },
        });
      }).then(function (v) {
        if (v.status !== 201) throw new Error(v.data.message);
        result.className = "col-12 dataset-result text-success";
        result.textContent = _("{dataset} version {version}: {size} MB, {files} files.", {
          dataset: owner + "/" + name, version: v.data.version, size: (v.data.bytes / 1e6).toFixed(1), files: v.data.files,
        });
      }).catch(function (e) {
        result.className = "col-12 dataset-result text-danger";
        result.textContent = e.message;
      });
    });
  });
  // A task's log: followed as it is written while the task runs, read once when its box is opened after.
  function showLog(pre) {
    if (pre.dataset.loaded) return;
    pre.dataset.loaded = "true";
    var follow = pre.dataset.follow === "true";
    var url = api + "/executions/" + pre.dataset.number + "/logs" + (query ? query + "&" : "?") + (follow ? "follow=1" : "");
    fetch(url, { credentials: "same-origin", headers: { "X-XSRFToken": xsrf() } }).then(function (r) {
      if (!r.ok) return r.json().then(function (e) { throw new Error(e.message); });
      var reader = r.body.getReader(), decoder = new TextDecoder();
      function read() {
        return reader.read().then(function (step) {
          if (step.done) return;
          var atEnd = pre.scrollTop + pre.clientHeight >= pre.scrollHeight - 4;
          pre.textContent += decoder.decode(step.value, { stream: true });
          if (atEnd) pre.scrollTop = pre.scrollHeight;  // keep following unless the reader scrolled up
          return read();
        });
      }
      return read();
    }).catch(function (e) { pre.textContent += "\n[" + e.message + "]"; });
  }
  document.querySelectorAll(".task-log").forEach(function (pre) {
    var details = pre.closest("details");
    if (details.open) showLog(pre);
    details.addEventListener("toggle", function () { if (details.open) showLog(pre); });
  });
  document.querySelectorAll(".cancel-task").forEach(function (button) {
    button.addEventListener("click", function () {
      button.disabled = true;
      send(api + "/executions/" + button.dataset.number + "/cancel", {}).then(function (r) {
        button.textContent = r.status === 202 ? _("Cancelling…") : r.data.message;
      });
    });
  });
  if (box.dataset.active === "true" || document.querySelector(".usage, .save-progress")) {
    poll();
    setInterval(poll, 2000);
  }
})();
