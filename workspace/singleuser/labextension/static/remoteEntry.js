// The workspace JupyterLab plugin, written as a federated extension by hand:
// images are built offline, so there is no webpack step. JupyterLab loads
// this script, calls init() with its share scope (from which we take the
// status bar's token and Lumino's Widget, the very objects JupyterLab uses),
// then get("./extension") for the plugins.
//
// What it does:
// - every 30 s (also from a background tab: browsers slow hidden timers to
//   once a minute, they do not stop them) it reads api/workspace/notices and
//   shows new notices as JupyterLab notifications, dismissing withdrawn ones.
//   These requests also tell the culler that a browser is attached.
// - every 5 s while the tab is visible it reads api/workspace/usage and shows
//   GPU utilisation and memory in the status bar (CPU and memory are shown by
//   jupyter-resource-usage).
(function () {
  "use strict";
  var NAME = "@workspace/lab";
  var shareScope = null;

  function shared(pkg) {
    var versions = shareScope && shareScope[pkg];
    if (!versions) return Promise.resolve(null);
    var version = Object.keys(versions).sort().pop();
    return Promise.resolve(versions[version].get()).then(function (factory) { return factory(); });
  }

  function pageConfig(key) {
    var el = document.getElementById("jupyter-config-data");
    var data = el ? JSON.parse(el.textContent || "{}") : {};
    return data[key];
  }

  function api(path) {
    var base = (pageConfig("baseUrl") || "/").replace(/\/?$/, "/");
    var m = document.cookie.match(/(?:^|;\s*)_xsrf=([^;]*)/);
    return fetch(base + "api/workspace/" + path, {
      credentials: "same-origin",
      headers: m ? { "X-XSRFToken": decodeURIComponent(m[1]) } : {}
    }).then(function (r) {
      if (!r.ok) throw new Error("api/workspace/" + path + ": " + r.status);
      return r.json();
    });
  }

  function gib(bytes) { return (bytes / 1073741824).toFixed(1); }

  function makePlugin(statusbar, widgets) {
    return {
      id: NAME + ":plugin",
      description: "Workspace notices and GPU use",
      autoStart: true,
      optional: statusbar ? [statusbar.IStatusBar] : [],
      activate: function (app, statusBar) {
        var shown = {}; // notice id -> notification id
        function pollNotices() {
          return api("notices").then(function (body) {
            var current = {};
            body.notices.forEach(function (n) {
              current[n.id] = true;
              if (!(n.id in shown)) {
                shown[n.id] = null;
                Promise.resolve(app.commands.execute("apputils:notify", {
                  message: n.message, type: n.level, options: { autoClose: false }
                })).then(function (id) { shown[n.id] = id; });
              }
            });
            Object.keys(shown).forEach(function (nid) {
              if (!current[nid]) {
                if (shown[nid]) app.commands.execute("apputils:dismiss-notification", { id: shown[nid] });
                delete shown[nid];
              }
            });
          }).catch(function () { /* the server restarts or stops: try again later */ });
        }
        pollNotices();
        setInterval(pollNotices, 30000);

        if (!statusBar || !widgets) return;
        var item = new widgets.Widget();
        item.addClass("jp-StatusBar-TextItem");
        item.id = "workspace-gpu-usage";
        item.node.title = "GPU utilisation and memory of this workspace";
        var registered = false;
        function pollUsage() {
          if (document.hidden) return;
          api("usage").then(function (u) {
            var gpus = (u.gpu && u.gpu.available) ? u.gpu.gpus : [];
            if (!gpus.length) { item.node.textContent = ""; return; }
            item.node.textContent = gpus.map(function (g) {
              return "GPU" + g.index + " " + g.utilization_percent + "% " +
                gib(g.memory_used_bytes) + "/" + gib(g.memory_total_bytes) + " GB";
            }).join("  ");
            if (!registered) {
              registered = true;
              statusBar.registerStatusItem(NAME + ":gpu", { item: item, align: "left", rank: 100 });
            }
          }).catch(function () {});
        }
        pollUsage();
        setInterval(pollUsage, 5000);
      }
    };
  }

  var root = (window._JUPYTERLAB = window._JUPYTERLAB || {});
  root[NAME] = {
    init: function (scope) { shareScope = scope; return Promise.resolve(); },
    get: function (module) {
      if (module !== "./extension") return Promise.reject(new Error(NAME + " has no module " + module));
      return Promise.all([shared("@jupyterlab/statusbar"), shared("@lumino/widgets")]).then(function (mods) {
        var plugin = makePlugin(mods[0], mods[1]);
        return function () { return { __esModule: true, "default": [plugin] }; };
      });
    }
  };
})();
