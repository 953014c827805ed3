// Charts (uPlot, served by this service from static/vendor/uplot: nothing is fetched from elsewhere).
//
// <figure class="usage-chart" data-api="…/executions/N/usage" data-live="true">: an execution's CPU,
// memory and GPU over its life, from its usage samples; a live one is drawn again every 15 s.
// <figure id="activity-chart" data-api="…/api/activity">: executions running and waiting over the last day.
// Each figure's caption says in words what the chart shows (for screen readers and as a summary); the
// drawn chart is kept on the element (`figure.chart`) and its sample count in data-points.
(function () {
  "use strict";
  const xsrf = () => (document.cookie.match(/(?:^|; )_xsrf=([^;]*)/) || [])[1] || "";

  function load(url) {
    return fetch(url, { credentials: "same-origin", headers: { "X-XSRFToken": decodeURIComponent(xsrf()) } }).then(
      function (r) {
        return r.json().then(function (body) {
          if (!r.ok) throw new Error(body.message || r.statusText);
          return body;
        });
      },
    );
  }

  function seconds(iso) {
    return Date.parse(iso.endsWith("Z") || iso.includes("+") ? iso : iso + "Z") / 1000;
  }

  function max(values) {
    return values.reduce((m, v) => (v != null && v > m ? v : m), 0);
  }

  function plot(figure, options, data) {
    const box = figure.querySelector(".chart-box");
    if (figure.chart) figure.chart.destroy();
    const width = Math.max(280, box.clientWidth || figure.clientWidth || 600);
    figure.chart = new uPlot(Object.assign({ width: width, height: 200 }, options), data, box);
    figure.dataset.points = String(data[0].length);
  }

  function usage(figure) {
    return load(figure.dataset.api).then(function (u) {
      const samples = u.samples || [];
      const caption = figure.querySelector("figcaption");
      if (!samples.length) {
        caption.textContent = _("No usage samples yet: the first is taken about a minute after the start.");
        figure.dataset.points = "0";
        return u;
      }
      const x = samples.map((s) => seconds(s.at));
      const cpu = samples.map((s) => (s.cpu_percent == null ? null : Math.round(s.cpu_percent * 10) / 10));
      const mem = samples.map((s) => (s.memory_bytes == null ? null : Math.round(s.memory_bytes / 1e5) / 10));
      const gpu = samples.map((s) => (s.gpu_percent == null ? null : s.gpu_percent));
      const hasGpu = gpu.some((v) => v != null);
      const series = [
        {},
        { label: _("CPU (% of one core)"), scale: "pct", stroke: "#0d6efd", width: 2 },
        { label: _("Memory (MB)"), scale: "mb", stroke: "#198754", width: 2 },
      ];
      const data = [x, cpu, mem];
      if (hasGpu) {
        series.push({ label: _("GPU (%)"), scale: "pct", stroke: "#d63384", width: 2 });
        data.push(gpu);
      }
      plot(
        figure,
        {
          scales: { x: { time: true }, pct: { range: (u, lo, hi) => [0, Math.max(100, hi)] }, mb: { range: (u, lo, hi) => [0, Math.max(1, hi)] } },
          axes: [{}, { scale: "pct", values: (u, v) => v.map((n) => n + " %") }, { scale: "mb", side: 1, grid: { show: false }, values: (u, v) => v.map((n) => n + " MB") }],
          series: series,
        },
        data,
      );
      caption.textContent = hasGpu
        ? _("{n} samples: CPU up to {cpu} % of one core, memory up to {mem} MB, GPU up to {gpu} %.", {
            n: samples.length, cpu: max(cpu), mem: max(mem), gpu: max(gpu),
          })
        : _("{n} samples: CPU up to {cpu} % of one core, memory up to {mem} MB.", {
            n: samples.length, cpu: max(cpu), mem: max(mem),
          });
      return u;
    });
  }

  function activity(figure) {
    return load(figure.dataset.api).then(function (a) {
      const x = a.at.map(seconds);
      const stepped = uPlot.paths && uPlot.paths.stepped ? uPlot.paths.stepped({ align: 1 }) : undefined;
      plot(
        figure,
        {
          scales: { x: { time: true }, n: { range: (u, lo, hi) => [0, Math.max(1, hi)] } },
          axes: [{}, { scale: "n", values: (u, v) => v.map((n) => (Number.isInteger(n) ? String(n) : "")) }],
          series: [
            {},
            { label: _("Running"), scale: "n", stroke: "#198754", width: 2, paths: stepped },
            { label: _("Waiting in the queue"), scale: "n", stroke: "#fd7e14", width: 2, paths: stepped },
          ],
        },
        [x, a.running, a.queued],
      );
      figure.querySelector("figcaption").textContent = _(
        "Over the last {hours} hours: up to {running} executions ran and up to {queued} waited at once; now {now_running} run and {now_queued} wait.",
        {
          hours: Math.round((x[x.length - 1] - x[0]) / 3600),
          running: max(a.running), queued: max(a.queued),
          now_running: a.running[a.running.length - 1], now_queued: a.queued[a.queued.length - 1],
        },
      );
    });
  }

  // <figure class="traffic-chart" data-api="…/api/deployments/NAME/traffic">: a deployment's requests a
  // minute and their p50 and p99 latency over the last hour (the router's counts, #33)
  function traffic(figure) {
    return load(figure.dataset.api).then(function (t) {
      const points = t.points || [];
      const caption = figure.querySelector("figcaption");
      if (!points.length) {
        caption.textContent = _("No request in the last hour.");
        figure.dataset.points = "0";
        return t;
      }
      const x = points.map((p) => seconds(p.minute));
      const ms = (v) => (v == null || !isFinite(v) ? null : Math.round(v * 1000));
      plot(
        figure,
        {
          scales: { x: { time: true }, n: { range: (u, lo, hi) => [0, Math.max(1, hi)] }, ms: { range: (u, lo, hi) => [0, Math.max(1, hi)] } },
          axes: [{}, { scale: "n" }, { scale: "ms", side: 1, grid: { show: false }, values: (u, v) => v.map((n) => n + " ms") }],
          series: [
            {},
            { label: _("Requests a minute"), scale: "n", stroke: "#0d6efd", width: 2 },
            { label: _("Failed"), scale: "n", stroke: "#dc3545", width: 2 },
            { label: _("p50 latency (ms)"), scale: "ms", stroke: "#198754", width: 1 },
            { label: _("p99 latency (ms)"), scale: "ms", stroke: "#fd7e14", width: 1 },
          ],
        },
        [x, points.map((p) => p.requests), points.map((p) => p.failures), points.map((p) => ms(p.p50)), points.map((p) => ms(p.p99))],
      );
      const last = points[points.length - 1];
      caption.textContent = _("{requests} requests in all, {failures} failed; in the last minute with traffic: {n} requests, p99 under {p99} ms.", {
        requests: t.requests, failures: t.failures, n: last.requests, p99: ms(last.p99),
      });
      return t;
    });
  }

  function failed(figure, e) {
    figure.querySelector("figcaption").textContent = _("The chart could not be loaded: {error}", { error: e.message });
  }

  document.querySelectorAll("figure.usage-chart").forEach(function (figure) {
    const draw = () => usage(figure).catch((e) => failed(figure, e));
    draw().then(function () {
      if (figure.dataset.live === "true") setInterval(draw, 15000);
    });
  });
  document.querySelectorAll("figure.traffic-chart").forEach(function (figure) {
    const draw = () => traffic(figure).catch((e) => failed(figure, e));
    draw().then(() => setInterval(draw, 15000));
  });
  const act = document.getElementById("activity-chart");
  if (act) activity(act).catch((e) => failed(act, e));
})();
