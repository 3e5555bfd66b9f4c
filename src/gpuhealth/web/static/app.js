// gpuhealth serve: the dashboard. No framework; uPlot draws the charts. Every value from the server is
// put on the page with textContent (never as HTML). The event stream is read with fetch() rather than
// EventSource so that the bearer token can travel in a header.
"use strict";
(function () {
  // Each chart: its unit (on the axis ticks), a fixed range where the range means something, and the
  // reading drawn as a dashed line (the slowdown temperature, the power limit).
  const CHARTS = [
    { metric: "temperature_c", label: "Temperature", unit: "°C", fmt: (v) => v.toFixed(0) + " °C",
      range: () => [20, 100], line: (r) => r.temperature_slowdown_c, lineLabel: "slowdown" },
    { metric: "utilization_gpu_pct", label: "Utilisation", unit: "%", fmt: (v) => v.toFixed(0) + " %",
      range: () => [0, 100] },
    { metric: "memory_used_mib", label: "Memory", unit: "GiB", fmt: (v) => (v / 1024).toFixed(1) + " GiB",
      scale: 1 / 1024, range: (r) => (r.memory_total_mib ? [0, r.memory_total_mib / 1024] : null) },
    { metric: "power_w", label: "Power", unit: "W", fmt: (v) => v.toFixed(0) + " W",
      range: (r) => (r.power_limit_w ? [0, r.power_limit_w] : null), line: (r) => r.power_limit_w, lineLabel: "limit" },
  ];
  const CHART_H = 96; // px, axes included (.chart-plot in app.css has the same height)
  const STATUS_RANK = { ok: 0, warning: 1, critical: 2, lost: 3 };
  const STATUS_TEXT = { ok: "OK", warning: "Warning", critical: "Critical", lost: "Lost" };
  // What each monitor rule watches, in words (the page never shows rule keys).
  const RULE_TEXT = {
    temperature: "Temperature", stuck_sensor: "Stuck sensor", hung_job: "Hung job",
    utilization_collapse: "Utilisation collapse", xid: "Xid error", ecc: "ECC errors",
    pending_retirement: "Memory repair pending", clock_slowdown: "Clock slowdown", gpu_lost: "GPU lost",
    gpu_count: "GPU count", idle: "Idle GPU",
  };
  const RANGES = { "15m": 900, "1h": 3600, "6h": 21600, "24h": 86400, "7d": 604800 };
  const VERDICT_CLASS = { HEALTHY: "v-healthy", DEGRADED: "v-degraded", BROKEN: "v-broken" };
  const $ = (id) => document.getElementById(id);
  const cards = new Map(); // gpu index -> {el, charts: Map(metric -> chart)}
  let token = sessionStorage.getItem("gpuhealth-token") || "";
  let range = "15m";
  let lastStatus = null;

  function el(tag, cls, text) {
    const node = document.createElement(tag);
    if (cls) node.className = cls;
    if (text !== undefined && text !== null) node.textContent = String(text);
    return node;
  }

  function span(s) {  // "idle for 5 h": the card's note for a GPU at 0 % (server's idle_for_s)
    if (s < 5400) return Math.round(s / 60) + " min";
    if (s < 129600) return Math.round(s / 3600) + " h";
    return Math.round(s / 86400) + " d";
  }

  function ago(t) {
    if (!t) return "never";
    const s = Math.max(0, Date.now() / 1000 - t);
    if (s < 90) return Math.round(s) + " s ago";
    if (s < 5400) return Math.round(s / 60) + " min ago";
    if (s < 129600) return Math.round(s / 3600) + " h ago";
    return Math.round(s / 86400) + " d ago";
  }

  function clock(t) {
    return new Date(t * 1000).toLocaleTimeString([], { hour: "2-digit", minute: "2-digit", second: "2-digit" });
  }

  // ------------------------------------------------------------------ talking to the server

  class NeedToken extends Error {}

  async function api(path, options) {
    const opts = Object.assign({ cache: "no-store" }, options || {});
    opts.headers = Object.assign({}, opts.headers || {});
    if (token) opts.headers.Authorization = "Bearer " + token;
    const response = await fetch(path, opts);
    if (response.status === 401) {
      askToken();
      throw new NeedToken("token required");
    }
    return response;
  }

  function askToken() {
    const form = $("token-form");
    if (!form.hidden) return;
    form.hidden = false;
    $("token-input").focus();
  }

  $("token-form").addEventListener("submit", (event) => {
    event.preventDefault();
    token = $("token-input").value.trim();
    sessionStorage.setItem("gpuhealth-token", token);
    $("token-form").hidden = true;
    loadAll();
  });

  // ------------------------------------------------------------------ the verdict banner

  function renderStatus(status) {
    lastStatus = status;
    const banner = $("banner");
    banner.className = "banner " + (VERDICT_CLASS[status.verdict] || "v-nodata");
    $("verdict").textContent = status.verdict;
    let summary = status.summary;
    const finished = status.monitor.replay_finished === true;  // the trace ran out: the summary says so
    if (!status.monitor.running && status.monitor.note && !finished) summary += "; monitor: " + status.monitor.note;
    $("summary").textContent = summary;
    if (finished) $("live").textContent = "replay finished";
    const button = $("check-now");
    if (status.check.running) {
      button.disabled = true;
      button.textContent = "Checking…";
    } else if (button.dataset.busy !== "1") {
      button.disabled = false;
      button.textContent = "Check now";
    }
  }

  // ------------------------------------------------------------------ findings

  function renderFindings(doc) {
    const list = $("findings");
    list.replaceChildren();
    const meta = $("findings-meta");
    if (doc.error) meta.textContent = doc.error;
    else if (!doc.checked_at) meta.textContent = doc.running ? "checking…" : "no check yet: press Check now";
    else {
      const c = doc.counts || {};
      meta.textContent = doc.verdict + " · checked " + ago(doc.checked_at) + " · " + (c.critical || 0) +
        " critical, " + (c.warning || 0) + " warning, " + (c.info || 0) + " info";
      meta.dataset.checkedAt = String(doc.checked_at);
    }
    if (doc.checked_at && doc.findings.length === 0) {
      list.append(el("li", "empty", "Nothing wrong found" + (doc.skipped.length ? " (" + doc.skipped.length +
        " check(s) skipped for lack of evidence: not checked, not passed)" : "") + "."));
    }
    for (const f of doc.findings) {
      const item = el("li", "finding sev-" + f.severity);
      const head = el("div", "f-head");
      head.append(el("span", "sev", f.severity), el("code", null, f.code));
      if (f.subject_text) head.append(el("span", "subject", f.subject_text));
      head.append(impactBadge(f));
      item.append(head);
      const layout = f.layout;  // the headline first, then the rest and each count, time and next step on its line
      if (layout) {
        item.append(el("p", "msg headline", layout.headline));
        if (layout.rest) item.append(el("p", "msg", layout.rest));
        for (const [label, value] of layout.facts) {
          const fact = el("p", "msg fact");
          fact.append(el("span", "label", label + ": "), value);
          item.append(fact);
        }
      } else item.append(el("p", "msg", f.message));
      for (const fix of f.fixes || []) {
        // a command is shown as one (monospace, selected whole to copy); a step or an edit is words to follow
        const isCommand = !fix.kind || fix.kind === "command";
        const row = el("div", isCommand ? "fix" : "fix fix-step");
        const word = isCommand ? "fix" : fix.kind === "edit" ? "edit" : "step";
        row.append(el("span", fix.disruptive ? "disruptive" : null, word + (fix.disruptive ? " (disruptive):" : ":")));
        if (fix.note) row.append(" ", el("span", "note", fix.note));
        if (isCommand) row.append(el("code", null, fix.command));
        else row.append(" ", el("span", "step", fix.command));
        item.append(row);
      }
      if (f.evidence && f.evidence.length) {
        const details = el("details");
        details.append(el("summary", null, "evidence"));
        for (const ev of f.evidence) details.append(el("pre", null, ev.source + "\n" + ev.lines.join("\n")));
        item.append(details);
      }
      list.append(item);
    }
  }

  async function checkNow() {
    const button = $("check-now");
    const note = $("check-note");
    button.disabled = true;
    button.dataset.busy = "1";
    button.textContent = "Checking…";
    note.textContent = "Running the full check…";
    try {
      const response = await api("/api/v1/check", { method: "POST" });
      const body = await response.json();
      if (response.status === 200) {
        renderFindings(body);
        note.textContent = "Check finished: " + (body.verdict || "no verdict") + ", " + body.findings.length +
          " finding(s).";
        $("findings-h").scrollIntoView({ block: "nearest" });
      } else if (response.status === 202) {
        note.textContent = "The check is still running; its findings will appear here.";
      } else {
        note.textContent = body.error || "HTTP " + response.status;
      }
    } catch (error) {
      note.textContent = error instanceof NeedToken ? "A token is needed." : "Check failed: " + error;
    } finally {
      button.dataset.busy = "";
      button.disabled = false;
      button.textContent = "Check now";
      if (lastStatus) renderStatus(lastStatus);
    }
  }

  $("check-now").addEventListener("click", checkNow);

  // ------------------------------------------------------------------ alerts

  function ruleText(rule) {
    if (rule.startsWith("check:")) return "Full check " + rule.slice(6);
    return RULE_TEXT[rule] || rule.replace(/_/g, " ");
  }

  // What it does to the node and what to do (docs/actions.md), as a small text badge: "gpu unusable · reset gpu".
  function impactBadge(x) {
    const badge = el("span", "impact impact-" + (x.impact || "none"),
      (x.impact || "?").replace(/_/g, " ") + " · " + (x.action || "?").replace(/_/g, " "));
    badge.title = "impact: " + x.impact + "; action: " + x.action;
    return badge;
  }

  function alertItem(a) {
    const item = el("li", "alert sev-" + a.severity + (a.state === "resolved" ? " resolved" : ""));
    item.dataset.gpu = a.gpu === null ? "" : String(a.gpu);
    const head = el("div", "f-head");
    head.append(el("span", "sev", a.state === "resolved" ? "resolved" : a.severity),
      el("span", "rule", ruleText(a.rule)),
      el("span", "subject", a.gpu === null ? "host" : "GPU " + a.gpu),
      el("span", "when", clock(a.t)), impactBadge(a));
    item.append(head, el("p", "msg", a.message));
    // acknowledged (`gpuhealth ack`): still listed, with who said what and until when; its page is held back
    if (a.acknowledged) {
      const until = a.acknowledged.until === null ? "until cleared"
        : "until " + new Date(a.acknowledged.until * 1000).toLocaleString();
      item.append(el("p", "ack", "Acknowledged " + until + ": " + a.acknowledged.reason));
    }
    return item;
  }

  // The list shows what is firing now; the feed of every change sits folded below it.
  function renderAlerts(doc) {
    const list = $("alerts");
    list.replaceChildren();
    if (!doc.active.length) list.append(el("li", "empty", "No active alerts."));
    for (const a of doc.active) list.append(alertItem(a));
    const recent = $("alert-history");
    recent.replaceChildren();
    for (const a of doc.recent) recent.append(alertItem(a));
    $("alert-history-n").textContent = String(doc.recent.length);
  }

  // A card's status follows alerts and checks even when no sample comes (a replay that ended).
  function refreshGpus() {
    api("/api/v1/gpus").then((r) => r.json()).then(renderSamples).catch(() => {});
  }

  let alertsDue = null;
  function addAlert() {  // re-read both lists (one request), at most every half second
    if (alertsDue) return;
    alertsDue = setTimeout(() => {
      alertsDue = null;
      api("/api/v1/alerts").then((r) => r.json()).then(renderAlerts).catch(() => {});
      refreshGpus();
    }, 500);
  }

  // ------------------------------------------------------------------ GPU cards and charts

  function axisColor() {
    return getComputedStyle(document.documentElement).getPropertyValue("--muted").trim() || "#666";
  }

  function hhmm(t) {
    const d = new Date(t * 1000);
    return String(d.getHours()).padStart(2, "0") + ":" + String(d.getMinutes()).padStart(2, "0");
  }

  // Short time labels: hours:minutes, seconds only for spans under a minute, the date for whole days.
  function timeTick(t, incr) {
    const d = new Date(t * 1000);
    if (incr >= 86400) return d.toLocaleDateString([], { day: "numeric", month: "short" });
    const hm = hhmm(t);
    return incr < 60 ? hm + ":" + String(d.getSeconds()).padStart(2, "0") : hm;
  }

  function tickText(v, unit) {
    const digits = Math.abs(v) >= 10 || v === 0 ? 0 : 1;
    return v.toFixed(digits) + " " + unit;
  }

  function makeChart(host, spec) {
    const css = getComputedStyle(document.documentElement);
    const stroke = css.getPropertyValue("--chart").trim() || "#2b5fb4";
    const fill = css.getPropertyValue("--chart-fill").trim();
    const limit = css.getPropertyValue("--crit").trim() || "#c0262d";
    const grid = { stroke: "rgba(128,128,128,.18)", width: 1 };
    const tick = { stroke: "rgba(128,128,128,.18)", width: 1, size: 4 };
    const font = "10px system-ui, sans-serif";
    const chart = { data: [[], [], []], host, spec, lastT: 0, range: null, line: null };
    const opts = {
      width: Math.max(120, host.clientWidth || 150),
      height: CHART_H,
      legend: { show: false },
      cursor: { show: false },
      scales: {
        x: { time: true },
        // a fixed range when the reading gives one (0 to the limit...), stretched if a value goes past it
        y: { range: (u, lo, hi) => {
          if (lo === null || hi === null) return chart.range || [0, 1];
          if (!chart.range) return lo === hi ? [lo - 1, hi + 1] : [lo, hi];
          return [Math.min(chart.range[0], lo), Math.max(chart.range[1], hi)];
        } },
      },
      axes: [
        // hours:minutes only, spaced so that labels never overlap at 375 px
        { stroke: axisColor(), grid, ticks: tick, font, size: 24, gap: 3, space: 60,
          values: (u, splits, axis, space, incr) => splits.map((t) => timeTick(t, incr)) },
        { stroke: axisColor(), grid, ticks: tick, font, size: 56, gap: 3, space: 22,
          values: (u, splits) => splits.map((v) => tickText(v, spec.unit)) },
      ],
      series: [{}, { stroke, fill, width: 1.5, points: { show: false } },
        { stroke: limit, width: 1, dash: [4, 3], points: { show: false } }],
    };
    const plot = new uPlot(opts, chart.data, host);
    chart.plot = plot;
    new ResizeObserver(() => {
      const width = Math.max(120, host.clientWidth);
      if (width !== plot.width) plot.setSize({ width, height: CHART_H });
    }).observe(host);
    return chart;
  }

  function lineSeries(chart) {  // the threshold as a flat series over the same times
    const value = chart.line === null ? null : chart.line * (chart.spec.scale || 1);
    chart.data[2] = chart.data[0].map(() => value);
  }

  // The latest readings give the chart's fixed range and its threshold line.
  function setLimits(chart, readings) {
    const range = chart.spec.range ? chart.spec.range(readings) : null;
    const line = chart.spec.line ? chart.spec.line(readings) : null;
    const changed = String(range) !== String(chart.range) || (line ?? null) !== chart.line;
    chart.range = range;
    chart.line = line ?? null;
    if (changed && chart.data[0].length) {
      lineSeries(chart);
      chart.plot.setData(chart.data);
    }
    chart.host.dataset.range = range ? range.join(",") : "";
    chart.host.dataset.line = chart.line === null ? "" : String(chart.line);
  }

  // A history answer (as of the server's `until`) merged with what the stream drew meanwhile: replacing the
  // chart lost a sample streamed between the answer and its arrival (series.js has the rule).
  function setChart(chart, t, v, until) {
    const scale = chart.spec.scale || 1;
    const merged = window.gpuhealthSeries.mergeHistory(t, v.map((x) => x * scale), chart.data[0], chart.data[1],
      until);
    chart.data[0] = merged.t;
    chart.data[1] = merged.v;
    lineSeries(chart);
    chart.lastT = chart.data[0].length ? chart.data[0][chart.data[0].length - 1] : 0;
    chart.plot.setData(chart.data);
    mark(chart);
    chart.host.dataset.historyUntil = String(until);  // which answer the chart holds (the tests wait for it)
  }

  function appendChart(chart, t, value) {
    if (value === undefined || value === null || t <= chart.lastT) return;
    chart.data[0].push(t);
    chart.data[1].push(value * (chart.spec.scale || 1));
    chart.data[2].push(chart.line === null ? null : chart.line * (chart.spec.scale || 1));
    chart.lastT = t;
    const since = t - RANGES[range];
    let drop = 0;
    while (drop < chart.data[0].length && chart.data[0][drop] < since) drop++;
    if (drop) {
      chart.data[0].splice(0, drop);
      chart.data[1].splice(0, drop);
      chart.data[2].splice(0, drop);
    }
    chart.plot.setData(chart.data);
    mark(chart);
  }

  function mark(chart) {
    chart.host.dataset.points = String(chart.data[0].length);
    chart.host.dataset.lastT = String(chart.lastT);
  }

  function ensureCard(gpu) {
    let card = cards.get(gpu.gpu);
    if (card) return card;
    const root = el("article", "gpu-card");
    root.dataset.gpu = String(gpu.gpu);
    const head = el("div", "gpu-head");
    const title = el("span", "gpu-title", "GPU " + gpu.gpu);
    const model = el("span", "gpu-model");
    const state = el("span", "gpu-state");
    head.append(title, model, state);
    const note = el("p", "gpu-note");
    const more = el("ul", "gpu-reasons");
    const charts = el("div", "charts");
    const procs = el("details", "procs");
    const procsHead = el("summary", null, "Processes");
    const procsTable = el("table");
    procs.append(procsHead, procsTable);
    root.append(head, note, more, charts, procs);
    $("gpus").append(root);
    card = { el: root, gpu: gpu.gpu, rank: 0, model, state, note, more, procs, procsHead, procsTable,
      charts: new Map() };
    cards.set(gpu.gpu, card);
    for (const spec of CHARTS) {
      const box = el("div", "chart");
      box.dataset.metric = spec.metric;
      const label = el("div", "chart-label");
      const value = el("span", "chart-value", "–");
      label.append(el("span", null, spec.label), value);
      const host = el("div", "chart-plot");
      box.append(label, host);
      charts.append(box);
      const chart = makeChart(host, spec);
      chart.value = value;
      card.charts.set(spec.metric, chart);
    }
    return card;
  }

  function renderProcesses(card, processes) {
    if (!processes) {
      card.procs.hidden = true;
      return;
    }
    card.procs.hidden = false;
    card.procsHead.textContent = processes.length ? "Processes (" + processes.length + ")" : "No processes";
    const rows = [el("tr")];
    rows[0].append(el("th", null, "PID"), el("th", null, "Name"), el("th", "num", "Memory"));
    for (const p of processes) {
      const row = el("tr");
      row.append(el("td", "num", p.pid), el("td", null, p.name || "–"),
        el("td", "num", p.memory_mib === null || p.memory_mib === undefined ? "–" :
          (p.memory_mib >= 1024 ? (p.memory_mib / 1024).toFixed(1) + " GiB" : p.memory_mib.toFixed(0) + " MiB")));
      rows.push(row);
    }
    card.procsTable.replaceChildren(...rows);
  }

  function renderTrouble(card, gpu) {
    const status = gpu.status || (gpu.state === "ok" ? "ok" : "lost");
    card.rank = STATUS_RANK[status] || 0;
    card.el.dataset.status = status;
    card.state.textContent = STATUS_TEXT[status] || status;
    card.state.className = "gpu-state st-" + status;
    card.el.className = "gpu-card st-" + status;
    let reason = gpu.reason || "";
    if (gpu.state === "stale" && !gpu.reason) reason = "no sample since " + ago(gpu.last_seen);
    if (!reason && gpu.idle_for_s >= 60) reason = "idle for " + span(gpu.idle_for_s);
    card.note.textContent = reason;
    card.note.hidden = !reason;
    const others = (gpu.reasons || []).slice(1);
    card.more.replaceChildren(...others.map((r) => el("li", "sev-" + r.severity, r.text)));
    card.more.hidden = others.length === 0;
  }

  // Cards in trouble first (lost, critical, warning), then by GPU index; DOM moves only when needed.
  function sortCards() {
    const order = [...cards.values()].sort((a, b) => b.rank - a.rank || a.gpu - b.gpu);
    const host = $("gpus");
    const now = [...host.children];
    if (order.every((c, i) => now[i] === c.el)) return;
    for (const c of order) host.append(c.el);
  }

  function renderGpu(gpu) {
    const card = ensureCard(gpu);
    card.model.textContent = [gpu.model, gpu.pci_bus_id].filter(Boolean).join(" · ");
    renderTrouble(card, gpu);
    renderProcesses(card, gpu.processes);
    const readings = gpu.readings || {};
    for (const [metric, chart] of card.charts) {
      setLimits(chart, readings);
      const v = readings[metric];
      if (v === undefined) chart.value.textContent = "–";
      else {
        let text = chart.spec.fmt(v);
        if (metric === "memory_used_mib" && readings.memory_total_mib) text += " / " +
          (readings.memory_total_mib / 1024).toFixed(0);
        if (metric === "power_w" && readings.power_limit_w) text += " / " + readings.power_limit_w.toFixed(0);
        chart.value.textContent = text;
        appendChart(chart, readings.t, v);
      }
    }
  }

  function renderSamples(doc) {
    for (const gpu of doc.gpus) renderGpu(gpu);
    sortCards();
  }

  async function loadHistory() {
    const response = await api("/api/v1/history?range=" + encodeURIComponent(range));
    if (!response.ok) return;
    const doc = await response.json();
    for (const s of doc.series) {
      const card = cards.get(s.gpu) || ensureCard({ gpu: s.gpu });
      const chart = card.charts.get(s.metric);
      if (chart) setChart(chart, s.t, s.v, doc.until);
    }
  }

  for (const button of document.querySelectorAll("#ranges button")) {
    button.addEventListener("click", () => {
      range = button.dataset.range;
      for (const b of document.querySelectorAll("#ranges button")) b.setAttribute("aria-pressed", String(b === button));
      loadHistory().catch(() => {});
    });
  }

  // ------------------------------------------------------------------ the event stream

  function handle(block) {
    let name = "message";
    const data = [];
    for (const line of block.split("\n")) {
      if (!line || line.startsWith(":")) continue;
      const colon = line.indexOf(":");
      const field = colon < 0 ? line : line.slice(0, colon);
      let value = colon < 0 ? "" : line.slice(colon + 1);
      if (value.startsWith(" ")) value = value.slice(1);
      if (field === "event") name = value;
      else if (field === "data") data.push(value);
    }
    if (!data.length) return;
    const doc = JSON.parse(data.join("\n"));
    if (name === "status") renderStatus(doc);
    else if (name === "samples") renderSamples(doc);
    else if (name === "alert") addAlert(doc);
    else if (name === "findings") {
      renderFindings(doc);
      refreshGpus();
    }
  }

  const sleep = (ms) => new Promise((resolve) => setTimeout(resolve, ms));

  async function stream() {
    for (;;) {
      try {
        const response = await api("/api/v1/events", { headers: { Accept: "text/event-stream" } });
        if (!response.ok || !response.body) throw new Error("HTTP " + response.status);
        // connected; a replay that ran out stays "replay finished" (nothing more will stream)
        $("live").textContent = lastStatus && lastStatus.monitor.replay_finished === true ? "replay finished" : "live";
        const reader = response.body.getReader();
        const decoder = new TextDecoder();
        let buffer = "";
        for (;;) {
          const { value, done } = await reader.read();
          if (done) break;
          buffer += decoder.decode(value, { stream: true });
          let end;
          while ((end = buffer.indexOf("\n\n")) >= 0) {
            handle(buffer.slice(0, end));
            buffer = buffer.slice(end + 2);
          }
        }
      } catch (error) {
        // reconnect below
      }
      $("live").textContent = "offline: reconnecting";
      await sleep(3000);
    }
  }

  async function loadAll() {
    try {
      const [status, gpus, alerts, findings] = await Promise.all(
        ["status", "gpus", "alerts", "findings"].map((p) => api("/api/v1/" + p).then((r) => r.json())));
      renderStatus(status);
      renderSamples(gpus);
      renderAlerts(alerts);
      renderFindings(findings);
      await loadHistory();
    } catch (error) {
      if (!(error instanceof NeedToken)) $("summary").textContent = "cannot reach gpuhealth: " + error;
    }
  }

  setInterval(() => {
    const meta = $("findings-meta");
    if (meta.dataset.checkedAt && lastStatus) {
      meta.textContent = meta.textContent.replace(/checked [^·]*·/, "checked " + ago(Number(meta.dataset.checkedAt)) + " ·");
    }
  }, 10000);

  loadAll().then(stream);
})();
