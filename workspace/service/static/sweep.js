// A sweep's page keeps itself up to date while runs remain: every few seconds it reads the page again
// and puts in its runs' rows and counts, as the server said them (in the page's language), until every
// run has ended. Nothing is sent but a GET of this same page.
(function () {
  "use strict";
  const table = document.getElementById("sweep-runs");
  if (!table || table.dataset.done === "true") return;
  const every = 3000;
  async function refresh() {
    try {
      const response = await fetch(window.location.href, { credentials: "same-origin", cache: "no-store" });
      if (!response.ok) return setTimeout(refresh, every * 3);
      const page = new DOMParser().parseFromString(await response.text(), "text/html");
      for (const id of ["sweep-runs", "sweep-counts", "sweep-actions"]) {
        const fresh = page.getElementById(id);
        const here = document.getElementById(id);
        if (fresh && here) {
          here.replaceChildren(...Array.from(fresh.childNodes).map((n) => document.importNode(n, true)));
          if (id === "sweep-runs") here.dataset.done = fresh.dataset.done;
        }
      }
      if (table.dataset.done !== "true") setTimeout(refresh, every);
    } catch (e) {
      setTimeout(refresh, every * 3);
    }
  }
  setTimeout(refresh, every);
})();
