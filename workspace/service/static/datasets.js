// The datasets page: create, share, and upload a version in chunks with a
// progress bar (MB, MB/s, time left). A dropped connection is resumed from the
// byte the server has (GET of the upload), also after a page reload: the
// upload's id is kept in localStorage for that file.
(function () {
  "use strict";
  var box = document.getElementById("datasets");
  var api = box.dataset.api;
  var CHUNK = 8 << 20;

  function xsrf() {
    var m = document.cookie.match(/(?:^|;\s*)_xsrf=([^;]*)/);
    return m ? decodeURIComponent(m[1]) : "";
  }
  function call(method, path, body, raw) {
    var opts = { method: method, credentials: "same-origin", headers: { "X-XSRFToken": xsrf() } };
    if (raw !== undefined) { opts.body = raw; opts.headers["Content-Type"] = "application/octet-stream"; }
    else if (body !== undefined) { opts.body = JSON.stringify(body); opts.headers["Content-Type"] = "application/json"; }
    return fetch(api + path, opts).then(function (r) {
      if (r.status === 204) return null;
      return r.json().then(function (data) {
        if (!r.ok) throw new Error(data.message || (method + " " + path + ": " + r.status));
        return data;
      });
    });
  }
  function showError(e) {
    var el = document.getElementById("js-error");
    el.textContent = e.message || String(e);
    el.classList.remove("d-none");
  }
  function sleep(ms) { return new Promise(function (r) { setTimeout(r, ms); }); }
  function mb(n) { return (n / 1e6).toFixed(1) + " MB"; }

  async function upload(ref, file, unpack, bar, text) {
    var key = "workspace-upload:" + ref + ":" + file.name + ":" + file.size + ":" + file.lastModified;
    var id = localStorage.getItem(key), offset = 0;
    if (id) {
      try { offset = (await call("GET", "/datasets/" + ref + "/uploads/" + id)).offset; text.textContent = _("Resuming at {size}", {size: mb(offset)}); }
      catch (e) { id = null; }
    }
    if (!id) {
      id = (await call("POST", "/datasets/" + ref + "/uploads", { filename: file.name, size: file.size, unpack: unpack })).id;
      localStorage.setItem(key, id);
    }
    var started = performance.now(), from = offset, failures = 0;
    while (offset < file.size) {
      try {
        var r = await call("PUT", "/datasets/" + ref + "/uploads/" + id + "?offset=" + offset, undefined,
                           file.slice(offset, offset + CHUNK));
        offset = r.offset;
        failures = 0;
      } catch (e) {
        if (++failures > 20) throw new Error(_("The upload stopped: {error} Reload the page and choose the file again to resume.", {error: e.message}));
        text.textContent = _("Connection lost at {size}; resuming…", {size: mb(offset)});
        await sleep(Math.min(1000 * failures, 10000));
        try { offset = (await call("GET", "/datasets/" + ref + "/uploads/" + id)).offset; } catch (e2) { /* try again */ }
        continue;
      }
      var secs = (performance.now() - started) / 1000, rate = (offset - from) / secs;
      bar.style.width = Math.round(100 * offset / file.size) + "%";
      var progress = {done: mb(offset), total: mb(file.size), rate: (rate / 1e6).toFixed(1)};
      if (offset < file.size && rate > 0) {
        progress.seconds = Math.ceil((file.size - offset) / rate);
        text.textContent = _("{done} of {total}, {rate} MB/s, about {seconds} s left", progress);
      } else {
        text.textContent = _("{done} of {total}, {rate} MB/s", progress);
      }
    }
    text.textContent = _("Checking and making the version…");
    var v = await call("POST", "/datasets/" + ref + "/uploads/" + id + "/complete", {});
    localStorage.removeItem(key);
    bar.style.width = "100%";
    text.textContent = _("Version {version}: {size}, {files} files", {version: v.version, size: mb(v.bytes), files: v.files});
    return v;
  }

  document.querySelectorAll(".dataset").forEach(function (card) {
    var ref = card.dataset.ref;
    var form = card.querySelector(".upload-form");
    if (form) form.addEventListener("submit", function (ev) {
      ev.preventDefault();
      var file = form.elements.file.files[0];
      var bar = card.querySelector(".upload-bar");
      bar.parentElement.classList.remove("d-none");
      form.querySelector("button").disabled = true;
      upload(ref, file, form.elements.unpack.checked, bar, card.querySelector(".upload-text"))
        .then(function () { setTimeout(function () { window.location.reload(); }, 1000); })
        .catch(function (e) { showError(e); form.querySelector("button").disabled = false; });
    });
    var share = card.querySelector(".share-form");
    if (share) share.addEventListener("submit", function (ev) {
      ev.preventDefault();
      var body = {};
      body[share.elements.kind.value] = share.elements.principal.value.trim();
      call("POST", "/datasets/" + ref + "/shares", body).then(function () { window.location.reload(); }).catch(showError);
    });
  });

  document.getElementById("new-dataset").addEventListener("submit", function (ev) {
    ev.preventDefault();
    var f = ev.target.elements;
    call("POST", "/datasets", { name: f.name.value.trim(), description: f.description.value, visibility: f.visibility.value })
      .then(function () { window.location.reload(); }).catch(showError);
  });
})();
