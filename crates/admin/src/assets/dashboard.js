// The pending-age dashboard: fetches status.json every 2 s and redraws.
// Data is only ever set as textContent and SVG attributes (never parsed as
// markup), and nothing is styled inline, so the page runs under
// `script-src 'self'; style-src 'self'`.
"use strict";

const REFRESH_MS = 2000;
const WINDOW_MS = 15 * 60 * 1000;
const SVG = "http://www.w3.org/2000/svg";
const LEVEL_NAMES = { healthy: "Healthy", slow: "Slow creates", recovery: "Recovery territory", stuck: "Creates stuck — page" };

function formatAge(seconds) {
  if (seconds == null) return "–";
  if (seconds < 10) return seconds.toFixed(1) + " s";
  if (seconds < 60) return Math.round(seconds) + " s";
  const s = Math.round(seconds);
  if (s < 3600) return Math.floor(s / 60) + " min " + String(s % 60).padStart(2, "0") + " s";
  if (s < 86400) return Math.floor(s / 3600) + " h " + String(Math.floor((s % 3600) / 60)).padStart(2, "0") + " min";
  return Math.floor(s / 86400) + " d " + Math.floor((s % 86400) / 3600) + " h";
}

// Short form for plot axes: 8s, 2m08s, 1h02m.
function formatAxisAge(seconds) {
  if (seconds < 10) return seconds.toFixed(1) + "s";
  const s = Math.round(seconds);
  if (s < 60) return s + "s";
  if (s < 3600) return Math.floor(s / 60) + "m" + String(s % 60).padStart(2, "0") + "s";
  return Math.floor(s / 3600) + "h" + String(Math.floor((s % 3600) / 60)).padStart(2, "0") + "m";
}

function formatCount(n) {
  return n == null ? "–" : n.toLocaleString("en-US");
}

function formatTime(iso) {
  return iso ? new Date(iso).toLocaleTimeString("en-GB", { hour12: false }) : "–";
}

function byId(id) {
  return document.getElementById(id);
}

function cell(row, text, className) {
  const td = document.createElement("td");
  td.textContent = text;
  if (className) td.className = className;
  row.appendChild(td);
  return td;
}

function replaceRows(tbody, rows) {
  tbody.replaceChildren(...rows);
}

function renderBanner(status) {
  const level = status.level || "unknown";
  document.body.dataset.level = level;
  const banner = byId("banner");
  banner.dataset.level = level;
  const row = status.card.find((r) => r.level === level);
  byId("level-name").textContent = LEVEL_NAMES[level] || "no data yet";
  byId("level-meaning").textContent = row ? row.signal : "";
  byId("level-action").textContent = row ? "Action: " + row.action : "";
}

function renderNumbers(status) {
  byId("oldest").textContent = status.sampled ? formatAge(status.oldest_pending_age_seconds) : "–";
  byId("pending").textContent = status.sampled ? formatCount(status.pending) : "–";
  byId("stale").textContent = status.sampled ? formatCount(status.older_than_2s) + " / " + formatCount(status.older_than_60s) : "–";
  const climb = status.climb_per_minute;
  byId("climb").textContent = climb == null ? "measuring…" : (climb >= 0 ? "+" : "") + Math.round(climb).toLocaleString("en-US");
  byId("climb").dataset.climbing = String(status.climbing);
  const unreachable = status.key_shards.filter((s) => !s.reachable).length;
  byId("updated").textContent = status.sampled
    ? "sampled " + formatTime(status.sampled_at) + (unreachable ? " · " + unreachable + " K shard(s) unreachable: their pendings are not counted" : "")
    : "waiting for the first sample…";
}

function renderCard(status) {
  const rows = status.card.map((r) => {
    const tr = document.createElement("tr");
    tr.dataset.level = r.level;
    if (r.level === status.level) {
      tr.className = "current";
      tr.setAttribute("aria-current", "true");
    }
    cell(tr, r.signal);
    cell(tr, r.meaning);
    cell(tr, r.action);
    return tr;
  });
  replaceRows(byId("card").tBodies[0], rows);
}

function renderShards(status) {
  replaceRows(byId("key-shards").tBodies[0], status.key_shards.map((s) => {
    const tr = document.createElement("tr");
    tr.dataset.reachable = String(s.reachable);
    cell(tr, s.address + " · slots " + s.slots);
    cell(tr, s.reachable ? "yes" : "NO", s.reachable ? "ok" : "bad");
    cell(tr, formatCount(s.pending), "num");
    cell(tr, formatCount(s.older_than_2s), "num");
    cell(tr, formatCount(s.older_than_60s), "num");
    cell(tr, formatAge(s.oldest_pending_age_seconds), "num");
    cell(tr, s.level ? LEVEL_NAMES[s.level] : "unknown", "level-" + (s.level || "unknown"));
    return tr;
  }));
  byId("paste-shards").replaceChildren(...status.paste_shards.map((s) => {
    const li = document.createElement("li");
    li.dataset.reachable = String(s.reachable);
    li.className = s.reachable ? "ok" : "bad";
    li.textContent = s.address + " · slots " + s.slots + (s.reachable ? " · reachable" : " · UNREACHABLE — its stale keys stay pending");
    return li;
  }));
  byId("open-reports").textContent = status.open_reports === null
    ? "Open reports: unknown (no paste shard answered)"
    : "Open reports: " + status.open_reports + (status.open_reports > 0 ? " — list them with: pastebin ctl reports" : "");
}

// Every move the shards have recorded, in any step, with its age; one
// that has made no step for longer than its threshold is STALLED, with
// the command that finishes or undoes it.
function renderMoves(status) {
  const moves = status.moving || [];
  document.body.dataset.movesStalled = String(Boolean(status.moves_stalled));
  byId("moves-note").textContent = "Any step, with its age. Stalled: no step for " +
    formatAge(status.move_stalled_after_seconds) + ", or " + formatAge(status.move_unserved_after_seconds) +
    " with its slots frozen (their creates answer 503).";
  byId("moving").replaceChildren(...(moves.length === 0 ? [null] : moves).map((m) => {
    const li = document.createElement("li");
    if (m === null) {
      li.textContent = "none";
      return li;
    }
    li.className = m.stalled ? "bad" : "warn";
    li.dataset.stalled = String(m.stalled);
    li.dataset.steps = m.steps.join(", ");
    let text = "move " + m.move_id + ": " + m.kind + " slots " + m.slots + " from " + m.source + " to " + m.target +
      " · " + m.steps.join(", ") + " · started " + formatAge(m.age_seconds) + " ago, last step " +
      formatAge(m.step_age_seconds) + " ago";
    if (m.frozen) text += " · slots " + m.frozen + " frozen: their creates wait";
    if (m.stalled) {
      text += " · STALLED (no step for over " + formatAge(m.stalled_after_seconds) + "): rerun `pastebin ctl reshard --kind " +
        m.kind + " --from " + m.source + " --to " + m.target + "` to finish it, or the same with --abandon to undo it";
    }
    li.textContent = text;
    return li;
  }));
}

function renderRounds(status) {
  const t = status.decisions;
  byId("decision-totals").textContent = t.rounds === 0
    ? "no sweeper round recorded by this process yet"
    : "last " + t.rounds + (t.rounds === 1 ? " round" : " rounds") + " (latest " + formatTime(status.last_round_at) + "): " + t.marked_done + " marked done, " +
      t.aborted + " aborted after reading P, " + t.already_resolved + " already resolved, " +
      t.skipped_unreachable + " left pending because P was unreachable";
  replaceRows(byId("rounds").tBodies[0], status.rounds.map((r) => {
    const tr = document.createElement("tr");
    cell(tr, formatTime(r.at));
    for (const n of [r.examined, r.marked_done, r.aborted, r.already_resolved, r.skipped_unreachable,
                     r.key_shards_unreachable, r.retired_keys, r.expired_pastes, r.reaped_objects, r.errors]) {
      cell(tr, formatCount(n), "num");
    }
    if (r.skipped_unreachable > 0 || r.key_shards_unreachable > 0 || r.errors > 0) tr.className = "bad";
    return tr;
  }));
}

// What the public listeners turned away, by protocol and reason (docs/security.md#total-bounds).
function renderRefusals(status) {
  const refusals = status.edge_refusals || [];
  if (refusals.length === 0) return;
  replaceRows(byId("edge-refusals").tBodies[0], refusals.map((r) => {
    const tr = document.createElement("tr");
    cell(tr, r.protocol);
    cell(tr, r.reason);
    cell(tr, formatCount(r.count), "num");
    return tr;
  }));
}

function formatBytes(bytes) {
  if (bytes == null) return "–";
  const units = ["B", "KiB", "MiB", "GiB", "TiB"];
  let value = bytes;
  let unit = 0;
  while (value >= 1024 && unit < units.length - 1) {
    value /= 1024;
    unit += 1;
  }
  return (unit === 0 ? String(Math.round(value)) : value.toFixed(1)) + " " + units[unit];
}

// Requests by class over the last minute, and what the storage holds and has left.
function renderTraffic(status) {
  const t = status.traffic;
  if (!t) return;
  const minute = t.last_minute;
  if (!t.serves_http) {
    byId("requests-minute").textContent = "–";
    byId("requests-classes").textContent = "this process answers no HTTP";
  } else if (minute) {
    const all = minute.success + minute.client_error + minute.rate_limited + minute.server_error + minute.storage_full;
    byId("requests-minute").textContent = formatCount(all);
    byId("requests-classes").textContent = formatCount(minute.success) + " ok · " + formatCount(minute.client_error) +
      " 4xx · " + formatCount(minute.server_error) + " 5xx · " + formatCount(t.total.success + t.total.client_error +
      t.total.rate_limited + t.total.server_error + t.total.storage_full) + " since start";
    byId("refused-minute").textContent = formatCount(minute.rate_limited) + " / " + formatCount(minute.storage_full);
  } else {
    byId("requests-minute").textContent = "measuring…";
  }
  const s = t.storage;
  byId("free-space").textContent = formatBytes(s.free_bytes);
  byId("free-space").dataset.low = String(Boolean(t.storage_low));
  byId("free-watermark").textContent = s.min_free_bytes == null ? "no watermark in this process" : "watermark " + formatBytes(s.min_free_bytes);
  byId("live-pastes").textContent = formatCount(s.live_pastes);
  byId("stored-bytes").textContent = s.stored_bytes == null ? "" : formatBytes(s.stored_bytes) + " of content";
}

function svg(name, attributes) {
  const element = document.createElementNS(SVG, name);
  for (const [key, value] of Object.entries(attributes)) element.setAttribute(key, String(value));
  return element;
}

// One time series plot: `series` is [{values, className}], `guides` are
// horizontal dashed lines at fixed values (the card's 2 s and 60 s).
function plot(element, now, history, series, guides, unit) {
  const width = 640, height = 180, left = 56, right = 8, top = 8, bottom = 22;
  let highest = Math.max(...guides, 1);
  for (const s of series) for (const v of s.values) highest = Math.max(highest, v);
  // Counts are whole: an even top tick keeps the three labels whole and distinct.
  if (unit !== "s") highest = Math.max(2, Math.ceil(highest / 2) * 2);
  const max = highest * 1.1;
  const x = (at) => left + ((at - (now - WINDOW_MS)) / WINDOW_MS) * (width - left - right);
  const y = (v) => top + (1 - v / max) * (height - top - bottom);
  const children = [];
  children.push(svg("rect", { x: left, y: top, width: width - left - right, height: height - top - bottom, class: "frame" }));
  for (const tick of [0, highest / 2, highest]) {
    children.push(svg("line", { x1: left, x2: width - right, y1: y(tick), y2: y(tick), class: "grid" }));
    const label = svg("text", { x: left - 6, y: y(tick) + 4, class: "axis", "text-anchor": "end" });
    label.textContent = unit === "s" ? formatAxisAge(tick) : formatCount(Math.round(tick));
    children.push(label);
  }
  for (const g of guides) {
    children.push(svg("line", { x1: left, x2: width - right, y1: y(g), y2: y(g), class: "guide" }));
  }
  for (const [text, at, anchor] of [["−15 min", now - WINDOW_MS, "start"], ["now", now, "end"]]) {
    const label = svg("text", { x: x(at), y: height - 6, class: "axis", "text-anchor": anchor });
    label.textContent = text;
    children.push(label);
  }
  for (const s of series) {
    const points = history.map((h, i) => x(h.at_ms).toFixed(1) + "," + y(s.values[i]).toFixed(1)).join(" ");
    children.push(svg("polyline", { points, class: "series " + s.className }));
    const last = history.length - 1;
    if (last >= 0) children.push(svg("circle", { cx: x(history[last].at_ms), cy: y(s.values[last]), r: 3, class: "dot " + s.className }));
  }
  element.replaceChildren(...children);
}

function renderPlots(status) {
  const now = Date.parse(status.generated_at);
  const history = status.history.filter((h) => h.at_ms >= now - WINDOW_MS);
  plot(byId("plot-age"), now, history, [{ values: history.map((h) => h.oldest_pending_age_seconds), className: "age" }], [2, 60], "s");
  plot(byId("plot-count"), now, history, [
    { values: history.map((h) => h.pending), className: "count" },
    { values: history.map((h) => h.older_than_2s), className: "stale" },
  ], [], "n");
}

async function refresh() {
  try {
    const response = await fetch("/dashboard/status.json", { cache: "no-store" });
    if (!response.ok) throw new Error("HTTP " + response.status);
    const status = await response.json();
    renderBanner(status);
    renderNumbers(status);
    renderCard(status);
    renderShards(status);
    renderMoves(status);
    renderRounds(status);
    renderRefusals(status);
    renderTraffic(status);
    renderPlots(status);
    document.body.dataset.stale = "false";
  } catch (error) {
    document.body.dataset.stale = "true";
    byId("updated").textContent = "cannot reach the admin listener (" + error.message + "); showing the last data";
  }
}

refresh();
setInterval(refresh, REFRESH_MS);
