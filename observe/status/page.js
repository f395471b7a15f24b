"use strict";
// troupe's status page: polls its JSON (the Hub's snapshot) every 2 s and
// redraws. The trend charts draw the snapshot's history (the Hub keeps the
// last 5 minutes), so they are full as soon as the page opens. Server data
// only ever reaches the page as text nodes (textContent) and attribute
// values (setAttribute): never as HTML.
(function () {
  const POLL_MS = 2000;
  const HISTORY = 150; // the points a chart spans: the Hub's 5 minutes at 2 s
  const SVG = "http://www.w3.org/2000/svg";

  // el makes an element; children that are strings become text nodes.
  function el(tag, attrs, ...children) {
    const e = document.createElement(tag);
    for (const [k, v] of Object.entries(attrs || {})) e.setAttribute(k, String(v));
    for (const c of children) e.append(c instanceof Node ? c : document.createTextNode(String(c)));
    return e;
  }
  function badge(text, kind, state) {
    const attrs = { class: "badge", "data-kind": kind };
    if (state) attrs["data-state"] = state;
    return el("span", attrs, text);
  }
  function fill(id, rows) {
    const table = document.getElementById(id);
    table.tBodies[0].replaceChildren(...rows);
    const empty = document.getElementById(id + "-empty");
    if (empty) {
      empty.hidden = rows.length > 0;
      table.hidden = rows.length === 0;
    }
  }
  function age(seconds) {
    const s = Math.max(0, Math.floor(seconds || 0));
    if (s < 60) return s + " s";
    if (s < 3600) return Math.floor(s / 60) + " min " + (s % 60) + " s";
    const h = Math.floor(s / 3600);
    return h + " h " + Math.floor((s % 3600) / 60) + " min";
  }
  function secs(v) {
    if (!(v > 0)) return "0 ms";
    return v < 1 ? (v * 1000).toFixed(v < 0.01 ? 2 : 0) + " ms" : v.toFixed(2) + " s";
  }
  function bytes(n) {
    if (n < 0) return "n/a";
    const units = ["B", "KiB", "MiB", "GiB", "TiB"];
    let i = 0;
    while (n >= 1024 && i < units.length - 1) { n /= 1024; i++; }
    return (i ? n.toFixed(1) : String(n)) + " " + units[i];
  }
  function clock(t) {
    const d = new Date(t);
    return isNaN(d) ? String(t) : d.toLocaleTimeString();
  }
  const callStates = {
    starting: ["starting", "info"],
    waiting_approval: ["waiting for approval", "warn"],
    running: ["running", "ok"],
    streaming: ["streaming", "ok"],
  };
  const serverStates = { ready: "ok", connecting: "info", down: "bad", failed: "bad", closed: "warn" };

  function conn(state, text) {
    const c = document.getElementById("conn");
    c.setAttribute("data-conn", state);
    c.textContent = text;
  }

  // windowText says how far back a window of seconds goes: "5 min", "40 s".
  function windowText(seconds) {
    const s = Math.max(0, Math.round(seconds || 0));
    return s >= 60 ? Math.round(s / 60) + " min" : s + " s";
  }

  function tiles(s) {
    const m = s.metrics || {};
    const win = " (last " + windowText(m.latency_window_seconds) + ")";
    const lat = (v) => (m.latency_calls > 0 ? secs(v) : "–");
    // A tenant's view (s.viewer) has only its own counts: the server's
    // totals, latencies, refusals and spool are not its to see.
    const items = s.viewer ? [
      ["Sessions", m.sessions],
      ["Calls in flight", m.calls_in_flight],
      ["Waiting for approval", m.approvals_pending],
      ["Up", age(s.uptime_seconds)],
    ] : [
      ["Sessions", m.sessions],
      ["Calls in flight", m.calls_in_flight],
      ["Waiting for approval", m.approvals_pending],
      ["Calls finished", m.calls_total],
      ["Calls failed", m.calls_failed],
      ["Latency p50" + win, lat(m.latency_p50_seconds)],
      ["Latency p99" + win, lat(m.latency_p99_seconds)],
      ["HTTP refused", m.http_refused_total],
      ["Spool", bytes(m.spool_bytes)],
      ["Up", age(s.uptime_seconds)],
    ];
    document.getElementById("tiles").replaceChildren(...items.map(([k, v]) =>
      el("div", { class: "tile" }, el("div", { class: "v" }, v === undefined ? "–" : v), el("div", { class: "k" }, k))));
  }

  // points are the snapshot's history as the charts plot it: rates per
  // second, the rest as served.
  function points(s) {
    const period = s.history_period_seconds || POLL_MS / 1000;
    return (s.history || []).slice(-HISTORY).map((h) => ({
      rate: (h.calls || 0) / period, refusedRate: (h.http_refused || 0) / period,
      inflight: h.calls_in_flight || 0, sessions: h.sessions || 0,
      p50: h.latency_p50_seconds || 0, p99: h.latency_p99_seconds || 0,
    }));
  }

  function chart(history, title, key, format) {
    const values = history.map((h) => h[key]);
    const max = Math.max(...values, 1e-9);
    const w = 300, h = 48;
    const step = w / (HISTORY - 1);
    const x0 = w - (values.length - 1) * step;
    const pts = values.map((v, i) => (x0 + i * step).toFixed(1) + "," + (h - 2 - (v / max) * (h - 4)).toFixed(1));
    const svg = document.createElementNS(SVG, "svg");
    svg.setAttribute("viewBox", "0 0 " + w + " " + h);
    svg.setAttribute("preserveAspectRatio", "none");
    svg.setAttribute("role", "img");
    svg.setAttribute("aria-label", title);
    svg.setAttribute("data-points", values.length);
    if (pts.length > 1) {
      const area = document.createElementNS(SVG, "polygon");
      area.setAttribute("points", x0.toFixed(1) + "," + h + " " + pts.join(" ") + " " + w + "," + h);
      const line = document.createElementNS(SVG, "polyline");
      line.setAttribute("points", pts.join(" "));
      svg.append(area, line);
    }
    const last = values.length ? values[values.length - 1] : 0;
    return el("div", { class: "chart" },
      el("div", { class: "k" }, el("span", {}, title), el("span", {}, format(last) + " (max " + format(max < 1e-6 ? 0 : max) + ")")),
      svg);
  }

  function charts(s) {
    const n = (v) => (Number.isInteger(v) ? String(v) : v.toFixed(2));
    const h = points(s);
    document.getElementById("charts").replaceChildren(
      chart(h, "Calls finished / s", "rate", n),
      chart(h, "Calls in flight", "inflight", n),
      chart(h, "Sessions", "sessions", n),
      chart(h, "Latency p50 (per 2 s)", "p50", secs),
      chart(h, "Latency p99 (per 2 s)", "p99", secs),
      chart(h, "HTTP refused / s", "refusedRate", n),
    );
  }

  function calls(s) {
    fill("calls", (s.calls || []).map((c) => {
      const [label, kind] = callStates[c.state] || [c.state, "info"];
      return el("tr", { "data-tool": c.tool, "data-state": c.state },
        el("td", { class: "mono" }, c.tool),
        el("td", {}, badge(label, kind, c.state)),
        el("td", { class: "num" }, age(c.age_seconds)),
        el("td", { class: "mono" }, c.id),
        el("td", { class: "mono" }, c.session),
        el("td", { class: "mono", "data-col": "identity" }, c.identity || ""));
    }));
  }

  function downstreams(s) {
    fill("downstreams", (s.downstreams || []).map((d) =>
      el("tr", { "data-server": d.name, "data-state": d.state },
        el("td", { class: "mono" }, d.name),
        el("td", {}, badge(d.state, serverStates[d.state] || "info", d.state)),
        el("td", { class: "num", "data-col": "tools" },
          d.tools_exposed !== undefined && d.tools_exposed !== d.tools ? d.tools_exposed + " of " + d.tools : d.tools),
        el("td", { class: "err" }, d.error || ""))));
  }

  // acceptNotes are what the last Accept of each held version answered,
  // kept across redraws (by server, kind, name and hash).
  const acceptNotes = new Map();
  function heldKey(h) { return [h.server, h.kind, h.name, h.hash].join("\u0000"); }

  // accept posts an operator's accept of the held version h: the version
  // shown (its hash), with the page's accept token.
  async function accept(h, token, button) {
    button.disabled = true;
    let note;
    try {
      const resp = await fetch("status/accept", { method: "POST", credentials: "same-origin", cache: "no-store",
        headers: { "Content-Type": "application/json" },
        body: JSON.stringify({ server: h.server, kind: h.kind, name: h.name, hash: h.hash, token: token }) });
      note = resp.ok ? ["accepted", "ok"] : [(await resp.text()).trim() || "error " + resp.status, resp.status === 409 ? "warn" : "bad"];
    } catch (e) {
      note = ["troupe is not answering", "bad"];
    }
    acceptNotes.set(heldKey(h), note);
    button.disabled = false;
    poll(true);
  }

  // held lists the downstream tools and prompts held since they changed,
  // each with its diff (already escaped by troupe: invisible characters
  // show as \u escapes) and, for an operator, an Accept button.
  function held(s) {
    const list = s.held || [];
    document.getElementById("held-section").hidden = list.length === 0;
    const token = s.accept_token || "";
    document.getElementById("held").tBodies[0].replaceChildren(...list.map((h) => {
      const note = acceptNotes.get(heldKey(h));
      const action = el("td", {});
      if (token) {
        const button = el("button", { type: "button", "data-action": "accept" }, "Accept");
        button.addEventListener("click", () => accept(h, token, button));
        action.append(button);
      } else {
        action.append(el("span", { class: "muted" }, "troupe tools --accept " + h.server + "." + h.name));
      }
      if (note) action.append(" ", badge(note[0], note[1]));
      return el("tr", { "data-server": h.server, "data-name": h.name, "data-kind": h.kind },
        el("td", { class: "mono" }, h.server),
        el("td", { class: "mono" }, h.name, " ", el("span", { class: "muted" }, "(" + h.kind + ")")),
        el("td", {}, clock(h.since)),
        el("td", {}, el("div", {}, h.summary || ""), el("pre", { class: "diff" }, (h.diff || []).join("\n"))),
        action);
    }));
  }

  // cluster shows this node and the members when troupe runs as a cluster
  // node; for one process there is no such section at all.
  function cluster(s) {
    const old = document.getElementById("cluster");
    const c = s.cluster;
    if (!c) {
      if (old) old.remove();
      return;
    }
    const members = (c.members || []).map((m) =>
      el("tr", { "data-member": m.id, "data-self": m.self ? "true" : "false" },
        el("td", { class: "mono" }, m.id, ...(m.self ? [" ", badge("this node", "info")] : [])),
        el("td", { class: "mono" }, m.address),
        el("td", { class: "num", "data-col": "rtt" }, m.self ? "–" : m.rtt_seconds > 0 ? secs(m.rtt_seconds) : "not measured yet")));
    const table = el("table", { id: "members" },
      el("thead", {}, el("tr", {}, el("th", {}, "Member"), el("th", {}, "Address"), el("th", {}, "Round trip"))),
      el("tbody", {}, ...members));
    const section = el("section", { id: "cluster", "aria-labelledby": "h-cluster", "data-node": c.node, "data-ready": c.ready ? "true" : "false" },
      el("h2", { id: "h-cluster" }, "Cluster ",
        el("span", { class: "muted" }, "(this node: ", el("span", { class: "mono", id: "cluster-node" }, c.node), ") "),
        badge(c.ready ? "ready" : "not ready", c.ready ? "ok" : "bad", c.ready ? "ready" : "not-ready")),
      table);
    if (old) old.replaceWith(section);
    else document.getElementById("tiles").after(section);
  }

  function sessions(s) {
    const list = s.sessions || [];
    const eras = ["legacy", "modern", "pending"];
    const counts = {};
    for (const x of list) {
      const row = (counts[x.transport] = counts[x.transport] || { legacy: 0, modern: 0, pending: 0, other: 0 });
      if (eras.includes(x.era)) row[x.era]++; else row.other++;
    }
    document.getElementById("session-counts").tBodies[0].replaceChildren(...Object.keys(counts).sort().map((t) => {
      const r = counts[t];
      return el("tr", {}, el("td", {}, t), ...eras.map((e) => el("td", { class: "num" }, r[e])),
        el("td", { class: "num" }, r.legacy + r.modern + r.pending + r.other));
    }));
    document.getElementById("session-counts").hidden = list.length === 0;
    const clustered = !!s.cluster;
    document.getElementById("sessions-owner").hidden = !clustered;
    fill("sessions", list.map((x) =>
      el("tr", { "data-session": x.id },
        el("td", { class: "mono" }, x.id),
        ...(clustered ? [el("td", { class: "mono", "data-col": "owner" }, x.owner || "")] : []),
        el("td", {}, x.transport),
        el("td", {}, x.era),
        el("td", {}, x.version || ""),
        el("td", {}, x.client || ""),
        el("td", { class: "mono", "data-col": "identity" }, x.identity || ""),
        el("td", { class: "num" }, age(x.age_seconds)),
        el("td", { class: "num", "data-col": "calls" }, x.calls_total || 0),
        el("td", { class: "num", "data-col": "in-flight" }, x.calls || 0))));
  }

  function audit(s) {
    fill("audit", (s.audit || []).map((a) =>
      el("tr", { "data-outcome": a.outcome },
        el("td", {}, clock(a.time)),
        el("td", { class: "mono" }, a.tool),
        el("td", {}, badge(a.outcome, a.outcome === "ok" ? "ok" : "bad")),
        el("td", {}, a.approval),
        el("td", { class: "num" }, secs(a.duration_seconds)),
        el("td", { class: "mono" }, a.correlation_id),
        el("td", { class: "mono" }, a.session),
        el("td", { class: "mono", "data-col": "identity" }, a.identity || ""))));
  }

  // viewer names the tenant whose own view the page shows, and hides the
  // server-wide sections its snapshot does not carry.
  function viewer(s) {
    const tenant = !!s.viewer;
    document.getElementById("viewer").hidden = !tenant;
    document.getElementById("viewer-name").textContent = s.viewer || "";
    document.getElementById("trends").hidden = tenant;
    document.getElementById("downstreams-section").hidden = tenant;
  }

  function render(s) {
    document.getElementById("version").textContent = s.version || "";
    viewer(s);
    tiles(s);
    cluster(s);
    charts(s);
    calls(s);
    downstreams(s);
    held(s);
    sessions(s);
    audit(s);
  }

  // poll fetches the snapshot and redraws, then again in POLL_MS; once
  // (now) fetches it at once without starting another round.
  async function poll(once) {
    try {
      const resp = await fetch("status/", { credentials: "same-origin", cache: "no-store",
        headers: { Accept: "application/json" } });
      if (resp.status === 401 || resp.status === 403) {
        conn("error", "not authorized: open /status?token=<token> again");
      } else if (!resp.ok) {
        conn("error", "error " + resp.status);
      } else {
        render(await resp.json());
        conn("ok", "updated " + new Date().toLocaleTimeString());
      }
    } catch (e) {
      conn("error", "troupe is not answering");
    }
    if (!once) setTimeout(poll, POLL_MS);
  }
  poll();
})();
