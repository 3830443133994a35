// Runnel console: live charts on the overview and the live tail of the messages page. Every
// page works without this file; it only adds what needs updating in place.
"use strict";

(function () {
  function el(tag, text) {
    const e = document.createElement(tag);
    if (text !== undefined) e.textContent = text;
    return e;
  }

  // Charts of the overview and topic pages: /api/v1/metrics every 2 s (?topic=NAME for a
  // topic's produce stages).
  const stageNames = { stages: ["read", "handle", "commit", "queue", "write"], object: ["buffer", "put", "commit", "get"] };
  const colors = ["#5b6470", "#0b63c5", "#b3261e", "#8a5a00", "#1f7a3a"];
  const charts = [];
  let topic = "";
  document.querySelectorAll("[data-chart]").forEach(function (div) {
    const kind = div.dataset.chart;
    if (div.dataset.topic) topic = div.dataset.topic;
    const series = kind === "throughput"
      ? [{}, { label: "produce MB/s", stroke: "#0b63c5" }, { label: "fetch MB/s", stroke: "#1f7a3a" }]
      : stageNames[kind]
        ? [{}].concat(stageNames[kind].map(function (s, i) { return { label: s, stroke: colors[i] }; }))
        : [{}, { label: "produce p99 ms", stroke: "#b3261e" }, { label: "fetch p99 ms", stroke: "#8a5a00" }];
    const width = Math.max(300, div.clientWidth || 480);
    const fmt = function (u, vals) { return vals.map(function (v) { return v === null ? "" : String(+v.toPrecision(3)); }); };
    const plot = new uPlot({ width: width, height: 220, series: series, axes: [{}, { values: fmt, size: 60 }] },
      series.map(function () { return []; }), div);
    charts.push({ kind: kind, plot: plot });
  });
  function refreshCharts() {
    fetch("/api/v1/metrics" + (topic ? "?topic=" + encodeURIComponent(topic) : "")).then(function (r) { return r.json(); }).then(function (d) {
      const t = d.samples.map(function (s) { return s.t; });
      charts.forEach(function (c) {
        if (stageNames[c.kind]) {
          const field = c.kind === "object" ? "object_stages" : "stages";
          c.plot.setData([t].concat(stageNames[c.kind].map(function (st) {
            return d.samples.map(function (s) { return s[field] && s[field][st] ? s[field][st][1] : null; });
          })));
        } else if (c.kind === "throughput") {
          c.plot.setData([t, d.samples.map(function (s) { return s.produce_mbps; }), d.samples.map(function (s) { return s.fetch_mbps; })]);
        } else {
          c.plot.setData([t, d.samples.map(function (s) { return s.produce_p99_ms; }), d.samples.map(function (s) { return s.fetch_p99_ms; })]);
        }
      });
    }).catch(function () {});
  }
  if (charts.length) {
    refreshCharts();
    setInterval(refreshCharts, 2000);
  }

  // A group's total lag: /api/v1/groups/NAME/lag every 5 s, charted while the page is open.
  const lagDiv = document.querySelector("[data-lag-group]");
  if (lagDiv) {
    const fmt = function (u, vals) { return vals.map(function (v) { return v === null ? "" : String(+v.toPrecision(4)); }); };
    const lagPlot = new uPlot({ width: Math.max(300, lagDiv.clientWidth || 480), height: 200,
      series: [{}, { label: "total lag", stroke: "#8a5a00" }], axes: [{}, { values: fmt, size: 60 }] }, [[], []], lagDiv);
    const ts = [], lags = [];
    function pollLag() {
      fetch("/api/v1/groups/" + encodeURIComponent(lagDiv.dataset.lagGroup) + "/lag").then(function (r) { return r.json(); }).then(function (d) {
        if (d.error) return;
        ts.push(d.t); lags.push(d.total);
        if (ts.length > 360) { ts.shift(); lags.shift(); }
        lagPlot.setData([ts, lags]);
      }).catch(function () {});
    }
    pollLag();
    setInterval(pollLag, 5000);
  }

  // Live tail: poll for records after the last one shown, per partition.
  const tail = document.getElementById("tail");
  if (tail) {
    const body = document.querySelector("#messages tbody");
    let next = null; // partition -> next offset
    let timer = null;
    function row(m) {
      const tr = el("tr");
      tr.appendChild(el("td", String(m.partition)));
      tr.appendChild(el("td", String(m.offset)));
      tr.appendChild(el("td", new Date(m.timestamp).toISOString().replace("T", " ").replace("Z", "")));
      const k = el("td"); k.appendChild(el("pre", m.key)); tr.appendChild(k);
      const v = el("td"); v.appendChild(el("pre", m.value)); tr.appendChild(v);
      const h = el("td");
      (m.headers || []).forEach(function (hd) { const d = el("div"); d.appendChild(el("code", hd.key)); d.appendChild(document.createTextNode("=" + hd.value)); h.appendChild(d); });
      tr.appendChild(h);
      return tr;
    }
    function poll() {
      const q = new URLSearchParams({ decode: tail.dataset.decode, filter: tail.dataset.filter, limit: "200" });
      if (tail.dataset.partition !== "-1") q.set("partition", tail.dataset.partition);
      if (next) q.set("next", Object.keys(next).map(function (p) { return p + ":" + next[p]; }).join(","));
      else q.set("next", "");
      fetch("/api/v1/topics/" + encodeURIComponent(tail.dataset.topic) + "/records?" + q.toString())
        .then(function (r) { return r.json(); })
        .then(function (d) {
          if (d.error) return;
          if (!next) { next = {}; Object.keys(d.ends || {}).forEach(function (p) { next[p] = d.ends[p]; }); }
          (d.records || []).forEach(function (m) {
            const empty = body.querySelector("tr.empty");
            if (empty) empty.remove();
            body.insertBefore(row(m), body.firstChild);
            next[m.partition] = Math.max(next[m.partition] || 0, m.offset + 1);
          });
          while (body.children.length > 1000) body.removeChild(body.lastChild);
        })
        .catch(function () {})
        .finally(function () { if (timer !== null) timer = setTimeout(poll, 1000); });
    }
    tail.addEventListener("click", function () {
      if (timer === null) {
        tail.setAttribute("aria-pressed", "true");
        tail.textContent = "Stop tail";
        timer = 0;
        poll();
      } else {
        clearTimeout(timer);
        timer = null;
        tail.setAttribute("aria-pressed", "false");
        tail.textContent = "Live tail";
      }
    });
  }
})();
