// console.js -- saker's web console (docs/console.md).  Polls the JSON
// API under /api/; every name and item preview goes into the page with
// textContent, never as HTML.
"use strict";

(function () {
  const POLL_MS = 2000;
  const PAGE = 50;
  const state = { prefix: "", sort: "name", desc: false, offset: 0,
    server: null, timer: null, busy: false };

  const $ = (id) => document.getElementById(id);

  function el(tag, text, cls) {
    const e = document.createElement(tag);
    if (text !== undefined && text !== null) e.textContent = String(text);
    if (cls) e.className = cls;
    return e;
  }

  function fmtNum(n) {
    return Number(n).toLocaleString("en-US");
  }

  function fmtBytes(n) {
    const u = ["B", "KiB", "MiB", "GiB", "TiB"];
    let i = 0;
    n = Number(n);
    while (n >= 1024 && i < u.length - 1) { n /= 1024; i++; }
    return (i === 0 ? n : n.toFixed(1)) + " " + u[i];
  }

  function fmtAge(ms) {
    ms = Number(ms);
    if (!ms) return "-";
    const s = ms / 1000;
    if (s < 60) return s.toFixed(1) + " s";
    if (s < 3600) return Math.floor(s / 60) + " min " + Math.floor(s % 60) + " s";
    if (s < 86400) return Math.floor(s / 3600) + " h " + Math.floor(s % 3600 / 60) + " min";
    return Math.floor(s / 86400) + " d " + Math.floor(s % 86400 / 3600) + " h";
  }

  // The depth samples as a small SVG line chart, built with DOM calls
  // (no markup from strings); data-samples and data-last say what it shows.
  const SVG = "http://www.w3.org/2000/svg";

  function svgEl(tag, attrs) {
    const e = document.createElementNS(SVG, tag);
    for (const k in attrs) e.setAttribute(k, String(attrs[k]));
    return e;
  }

  function chart(depth, w, h, cls, intervalMs) {
    depth = Array.isArray(depth) ? depth : [];
    const svg = svgEl("svg", { width: w, height: h, viewBox: "0 0 " + w + " " + h,
      class: "chart " + cls, role: "img" });
    const max = depth.reduce((m, v) => Math.max(m, Number(v)), 0);
    const last = depth.length ? Number(depth[depth.length - 1]) : 0;
    svg.dataset.samples = String(depth.length);
    svg.dataset.last = String(last);
    svg.dataset.max = String(max);
    const span = intervalMs ? fmtAge(depth.length * intervalMs) : "";
    const title = svgEl("title", {});
    title.textContent = depth.length === 0 ? "no samples yet" :
      "depth over the last " + span + ": now " + fmtNum(last) + ", max " + fmtNum(max);
    svg.append(title);
    svg.append(svgEl("line", { x1: 0, y1: h - 0.5, x2: w, y2: h - 0.5, class: "base" }));
    if (depth.length === 0) return svg;
    // the newest sample at the right edge; a full window fills the width
    const slots = Math.max(depth.length, Number(state.server && state.server.history_samples) || 60);
    const dx = w / Math.max(slots - 1, 1);
    const x0 = w - (depth.length - 1) * dx;
    const pad = 2;
    const pts = depth.map((v, i) => {
      const y = max > 0 ? h - pad - (Number(v) / max) * (h - 2 * pad) : h - pad;
      return (x0 + i * dx).toFixed(1) + "," + y.toFixed(1);
    });
    if (pts.length === 1) pts.push((w).toFixed(1) + "," + pts[0].split(",")[1]);
    svg.append(svgEl("polyline", { points: pts.join(" "), class: "line" }));
    return svg;
  }

  function fmtRate(r) {
    r = Number(r);
    return r === 0 ? "0" : r < 10 ? r.toFixed(2) : r.toFixed(0);
  }

  async function api(path, opts) {
    const r = await fetch(path, Object.assign({ credentials: "same-origin",
      cache: "no-store" }, opts || {}));
    let body = null;
    try { body = await r.json(); } catch (e) { body = null; }
    if (!r.ok) {
      const msg = body && body.error ? body.error : r.status + " " + r.statusText;
      throw new Error(msg);
    }
    return body;
  }

  function setStatus(text, bad) {
    const s = $("status");
    s.textContent = text;
    s.classList.toggle("error", !!bad);
  }

  function facts(dl, pairs) {
    dl.replaceChildren();
    for (const [k, v] of pairs) {
      const d = el("div");
      d.append(el("dt", k), el("dd", v));
      dl.append(d);
    }
  }

  // ------------------------------------------------------------ server

  function showServer(s) {
    state.server = s;
    facts($("server"), [
      ["version", s.version], ["store", s.store], ["sync", s.sync],
      ["status", s.status], ["uptime", fmtAge(s.uptime * 1000)],
      ["connections", fmtNum(s.connections)], ["queues", fmtNum(s.queues)],
      ["commits", fmtNum(s.commits)], ["commit", s.commit_mean_ms.toFixed(3) + " ms"],
    ].concat(s.database === undefined ? [] :
      [["database", s.database === "connected" ? "connected" : "DOWN: " + s.database]]));
    $("actions").hidden = !s.writes_allowed;
    const span = s.history_interval_ms * s.history_samples;
    $("hist-head").textContent = s.history_interval_ms === 0 ? "depth (off)" :
      span === 3600000 ? "last hour" : "last " + fmtAge(span);
  }

  // ---------------------------------------------------------- overview

  function queueLink(name) {
    const a = el("a", name);
    a.href = "#/q/" + encodeURIComponent(name);
    return a;
  }

  function showQueues(d) {
    const tb = $("queues").tBodies[0];
    const rows = [];
    for (const q of d.queues) {
      const tr = el("tr");
      tr.dataset.queue = q.name;
      if (q.dead_lettered > 0) tr.className = "hot";
      const name = el("td", null, "name");
      name.append(queueLink(q.name));
      const spark = el("td", null, "spark");
      spark.append(chart(q.depth, 120, 22, "sparkline",
        state.server && state.server.history_interval_ms));
      tr.append(name,
        el("td", fmtNum(q.items), "n items"),
        spark,
        el("td", fmtBytes(q.bytes), "n"),
        el("td", fmtNum(q.delayed), "n"),
        el("td", fmtNum(q.open), "n"),
        el("td", fmtNum(q.waiters), "n"),
        el("td", fmtNum(q.dead_lettered), "n"),
        el("td", fmtNum(q.expired), "n"),
        el("td", fmtAge(q.age_ms), "n"),
        el("td", fmtRate(q.enqueue_rate), "n"),
        el("td", fmtRate(q.dequeue_rate), "n"));
      rows.push(tr);
    }
    tb.replaceChildren(...rows);
    $("empty").hidden = d.queues.length > 0;
    const last = Math.min(d.offset + d.queues.length, d.total);
    $("page").textContent = d.total === 0 ? "" :
      (d.offset + 1) + "\u2013" + last + " of " + fmtNum(d.total);
    $("prev").disabled = d.offset === 0;
    $("next").disabled = last >= d.total;
    $("totals").textContent = fmtNum(d.totals.items) + " items, " +
      fmtBytes(d.totals.bytes) + ", " + fmtNum(d.totals.delayed) + " delayed, " +
      fmtNum(d.totals.open) + " open";
    for (const b of document.querySelectorAll("#queues th button")) {
      b.classList.toggle("asc", b.dataset.sort === state.sort && !state.desc);
      b.classList.toggle("desc", b.dataset.sort === state.sort && state.desc);
    }
  }

  function queuesURL() {
    const p = new URLSearchParams();
    if (state.prefix) p.set("prefix", state.prefix);
    p.set("sort", (state.desc ? "-" : "") + state.sort);
    p.set("offset", String(state.offset));
    p.set("limit", String(PAGE));
    p.set("history", "1");
    return "/api/queues?" + p.toString();
  }

  // ------------------------------------------------------------- queue

  function currentQueue() {
    const h = location.hash;
    if (!h.startsWith("#/q/")) return null;
    try { return decodeURIComponent(h.slice(4)); } catch (e) { return null; }
  }

  function showHistory(hist) {
    const box = $("qchart");
    const iv = hist ? hist.interval_ms : 0;
    box.replaceChildren(chart(hist ? hist.depth : [], 600, 120, "big", iv));
    const n = hist ? hist.depth.length : 0;
    $("qchart-note").textContent = !hist ? "" : iv === 0 ?
      "sampling is off (--http-history 0)" :
      n + " samples, one every " + fmtAge(iv) + (n ? ", max " +
      fmtNum(box.firstChild.dataset.max) + ", now " +
      fmtNum(box.firstChild.dataset.last) : "");
  }

  function showOpen(open) {
    const rows = [];
    for (const o of open ? open.open : []) {
      const tr = el("tr");
      tr.append(el("td", o.id, "n"), el("td", o.holder, "holder"),
        el("td", o.user === null ? "-" : o.user, "user"),
        el("td", fmtAge(o.age_ms), "n"), el("td", o.deliveries, "n"),
        el("td", o.deadline_ms ? new Date(o.deadline_ms).toISOString() : ""));
      rows.push(tr);
    }
    $("open").tBodies[0].replaceChildren(...rows);
    $("noopen").hidden = rows.length > 0;
    $("open-more").textContent = open && open.total > rows.length ?
      "and " + fmtNum(open.total - rows.length) + " more" : "";
  }

  function showRetrying(retry) {
    const rows = [];
    for (const it of retry ? retry.items : []) {
      const tr = el("tr");
      tr.append(el("td", fmtAge(it.age_ms), "n"), el("td", it.deliveries, "n"),
        el("td", fmtNum(it.size), "n"),
        el("td", new Date(it.due_ms).toISOString()),
        el("td", it.preview + (it.truncated ? " \u2026" : ""),
          "preview" + (it.encoding === "hex" ? " hex" : "")));
      rows.push(tr);
    }
    $("retrying").tBodies[0].replaceChildren(...rows);
    $("noretrying").hidden = rows.length > 0;
  }

  function showQueue(name, q, peek) {
    $("qname").textContent = name;
    if (q) {
      facts($("qfacts"), [
        ["items", fmtNum(q.items)], ["bytes", fmtBytes(q.bytes)],
        ["delayed", fmtNum(q.delayed)], ["open", fmtNum(q.open)],
        ["waiters", fmtNum(q.waiters)], ["dead-lettered", fmtNum(q.dead_lettered)],
        ["retries", fmtNum(q.retries)],
        ["dedup ids", fmtNum(q.dedup_ids)], ["duplicates", fmtNum(q.dedup_hits)],
        ["expired", fmtNum(q.expired)], ["oldest", fmtAge(q.age_ms)],
        ["in/s", fmtRate(q.enqueue_rate)], ["out/s", fmtRate(q.dequeue_rate)],
      ]);
    } else {
      facts($("qfacts"), [["", "no such queue"]]);
    }
    const rows = [];
    for (const it of peek ? peek.items : []) {
      const tr = el("tr");
      const pv = el("td", it.preview + (it.truncated ? " \u2026" : ""),
        "preview" + (it.encoding === "hex" ? " hex" : ""));
      tr.append(el("td", it.state), el("td", fmtAge(it.age_ms), "n"),
        el("td", it.flags, "n"), el("td", it.deliveries, "n"),
        el("td", fmtNum(it.size), "n"),
        el("td", it.due_ms ? new Date(it.due_ms).toISOString() : ""), pv);
      rows.push(tr);
    }
    $("items").tBodies[0].replaceChildren(...rows);
    $("noitems").hidden = rows.length > 0;
  }

  // -------------------------------------------------------------- loop

  async function refresh() {
    if (state.busy) return;
    state.busy = true;
    try {
      showServer(await api("/api/server"));
      const name = currentQueue();
      $("overview").hidden = name !== null;
      $("queue").hidden = name === null;
      if (name === null) {
        showQueues(await api(queuesURL()));
      } else {
        const enc = encodeURIComponent(name);
        const list = await api("/api/queues?limit=1&prefix=" + enc);
        const q = list.queues.find((x) => x.name === name) || null;
        let peek = null, hist = null, open = null, retry = null;
        if (q) {
          peek = await api("/api/queues/" + enc + "/peek?n=20");
          hist = await api("/api/queues/" + enc + "/history");
          open = await api("/api/queues/" + enc + "/open?n=100");
          retry = await api("/api/queues/" + enc + "/peek?n=20&retrying=1");
        }
        showQueue(name, q, peek);
        showHistory(hist);
        showOpen(open);
        showRetrying(retry);
      }
      setStatus("updated " + new Date().toLocaleTimeString("en-GB"), false);
    } catch (e) {
      setStatus(e.message, true);
    } finally {
      state.busy = false;
    }
  }

  function poll() {
    clearTimeout(state.timer);
    refresh().finally(() => { state.timer = setTimeout(poll, POLL_MS); });
  }

  async function post(action, params, question) {
    const name = currentQueue();
    if (name === null || !state.server) return;
    if (!window.confirm(question)) return;
    const p = new URLSearchParams(params);
    const qs = p.toString();
    try {
      const r = await api("/api/queues/" + encodeURIComponent(name) + "/" + action +
        (qs ? "?" + qs : ""), { method: "POST",
        headers: { "X-CSRF-Token": state.server.csrf_token } });
      if (action === "delete") {
        location.hash = "#/";
        return;
      }
      $("result").textContent = action === "flush" ? "flushed" :
        "moved " + r.moved + " to " + r.to;
    } catch (e) {
      $("result").textContent = e.message;
    }
    poll();
  }

  function target() {
    const t = $("target").value.trim();
    return t ? { to: t } : {};
  }

  document.addEventListener("DOMContentLoaded", () => {
    $("prefix").addEventListener("input", () => {
      state.prefix = $("prefix").value;
      state.offset = 0;
      poll();
    });
    for (const b of document.querySelectorAll("#queues th button")) {
      b.addEventListener("click", () => {
        const k = b.dataset.sort;
        if (state.sort === k) state.desc = !state.desc;
        else { state.sort = k; state.desc = k !== "name"; }
        state.offset = 0;
        poll();
      });
    }
    $("prev").addEventListener("click", () => {
      state.offset = Math.max(0, state.offset - PAGE);
      poll();
    });
    $("next").addEventListener("click", () => {
      state.offset += PAGE;
      poll();
    });
    $("requeue-all").addEventListener("click", () => {
      const t = target();
      post("requeue", t, "Move every item of " + currentQueue() + " to " +
        (t.to || "the queue it is the dead-letter queue of") + "?");
    });
    $("requeue-some").addEventListener("click", () => {
      const n = parseInt($("requeue-n").value, 10);
      if (!(n >= 1)) return;
      const t = Object.assign(target(), { n: String(n) });
      post("requeue", t, "Move the first " + n + " items of " + currentQueue() +
        " to " + (t.to || "the queue it is the dead-letter queue of") + "?");
    });
    $("flush").addEventListener("click", () => {
      post("flush", {}, "Delete every item of " + currentQueue() + "?");
    });
    $("delete").addEventListener("click", () => {
      post("delete", {}, "Delete the queue " + currentQueue() + " and every item in it?");
    });
    window.addEventListener("hashchange", () => {
      $("result").textContent = "";
      poll();
    });
    poll();
  });
})();
