// rocescope HTML report: draws the figures of the JSON in #data with uPlot.
// When every chart has drawn, body[data-status] is "ok" (and
// body[data-render-ms] how long it took); on any error it is "error: ...".
(function () {
  "use strict";
  const started = performance.now();
  const body = document.body;
  function fail(msg) {
    if (body.dataset.status !== "loading") return;
    body.dataset.status = "error: " + msg;
    document.title = "error: " + msg;
  }
  window.addEventListener("error", (e) => fail(e.message || String(e.error)));
  window.addEventListener("unhandledrejection", (e) => fail(String(e.reason)));

  const D = JSON.parse(document.getElementById("data").textContent);
  const S = D.series;
  const root = document.getElementById("report");
  const nPoints = D.x.length;

  // ---- formatting -------------------------------------------------------

  function el(tag, attrs, ...kids) {
    const e = document.createElement(tag);
    for (const [k, v] of Object.entries(attrs || {})) {
      if (k === "class") e.className = v;
      else if (k === "style") e.style.cssText = v;
      else if (k.startsWith("on")) e.addEventListener(k.slice(2), v);
      else e.setAttribute(k, v);
    }
    for (const k of kids) if (k != null) e.append(k instanceof Node ? k : String(k));
    return e;
  }
  const nf = new Intl.NumberFormat("en-US");
  const fmtInt = (n) => (n == null ? "–" : nf.format(n));
  function si(v, unit, base) {
    if (v == null) return "–";
    const units = ["", "k", "M", "G", "T", "P"];
    let i = 0;
    while (Math.abs(v) >= base && i < units.length - 1) { v /= base; i++; }
    const digits = i === 0 || Math.abs(v) >= 100 ? 0 : Math.abs(v) >= 10 ? 1 : 2;
    return v.toFixed(digits) + " " + units[i] + unit;
  }
  const fmtBytes = (n) => si(n, "B", 1000);
  const fmtRate = (bps) => si(bps, "b/s", 1000);
  function fmtNs(ns) {
    if (ns == null) return "–";
    for (const [div, unit] of [[1e9, " s"], [1e6, " ms"], [1e3, " µs"]]) {
      if (ns >= div) {
        const v = ns / div;
        return v.toFixed(v >= 100 ? 0 : v >= 10 ? 1 : 2) + unit;
      }
    }
    return ns.toFixed(0) + " ns";
  }
  const hex = (q) => "0x" + q.toString(16).padStart(6, "0");
  const total = (name) => (S[name] || []).reduce((a, v) => a + (v || 0), 0);
  const maxOf = (name) => (S[name] || []).reduce((a, v) => (v != null && v > a ? v : a), 0);
  const flowName = (f) => `${f.src} → ${f.dst} ${hex(f.dqp)}`;

  const palette = ["#1f6feb", "#d9480f", "#2f9e44", "#ae3ec9", "#f08c00", "#0c8599",
    "#e03131", "#5c940d", "#6741d9", "#c2255c"];
  const grey = "rgba(120,130,145,0.45)";

  // ---- header ------------------------------------------------------------

  function header() {
    const card = el("section", { class: "card" });
    card.append(el("h1", {}, D.title));
    const what = D.inputs.length ? D.inputs.join(", ") : "no inputs named";
    card.append(el("p", { class: "sub" }, what));
    const facts = el("dl", { class: "facts" });
    const fact = (k, v) => facts.append(el("div", {}, el("dt", {}, k), el("dd", {}, v)));
    const win = D.window_ns ? fmtNs(D.window_ns) : "–";
    fact("Windows", D.windows ? `${fmtInt(D.windows)} × ${win}` : "none");
    fact("First window (UTC)", D.first_window || "–");
    fact("Last window (UTC)", D.last_window || "–");
    fact("Hosts", D.hosts.length ? D.hosts.join(", ") : "–");
    fact("Elephant at", D.elephant_rate_bps ? "≥ " + fmtRate(D.elephant_rate_bps) : "–");
    fact("Jitter at", D.jitter_rate_bps ? "Δ ≥ " + fmtRate(D.jitter_rate_bps) : "–");
    fact("Frames", fmtInt(total("packets")));
    fact("Bytes (on wire)", fmtBytes(total("bytes")));
    fact("Peak throughput", fmtRate(maxOf("gbps") * 1e9) + " · " + maxOf("mpps").toFixed(3) + " Mpps");
    fact("RoCE frames", fmtInt(total("roce_packets")));
    fact("Other frames", fmtInt(total("other_packets")));
    fact("Malformed / truncated", fmtInt(total("malformed_packets")) + " / " + fmtInt(total("truncated_packets")));
    fact("Kernel drops", fmtInt(total("kernel_drops")));
    fact("Late frames", fmtInt(total("late_packets")));
    fact("Messages", fmtInt(total("messages")));
    fact("CNP (unattributed)", fmtInt(total("cnp")) + " (" + fmtInt(total("cnp_unattributed")) + ")");
    fact("ECN-CE", fmtInt(total("ecn_ce")));
    fact("FECN / BECN", fmtInt(total("fecn")) + " / " + fmtInt(total("becn")));
    let pfc = 0;
    for (let p = 0; p < 8; p++) pfc += total(`pfc.${p}.frames`);
    fact("PFC / 802.3x pause frames", fmtInt(pfc) + " / " + fmtInt(total("pause_frames")));
    fact("NAK / RNR NAK", fmtInt(total("naks")) + " / " + fmtInt(total("rnr_naks")));
    fact("Retransmits / PSN gaps", fmtInt(total("retransmits")) + " / " + fmtInt(total("psn_gaps")));
    fact("Distinct flows (peak window)", "~" + fmtInt(maxOf("flows")));
    card.append(facts);

    const notes = el("ul", { class: "notes" });
    const note = (text, warn) => notes.append(el("li", warn ? { class: "warn" } : {}, text));
    note("Exact: every frame, byte and event counter (frames, RoCE/other/malformed/truncated, CNP, ECN-CE, FECN/BECN, PFC, NAK, retransmits, PSN gaps, opcodes); nothing is skipped silently.");
    note(`Estimated: distinct flows per window (${D.flows_method || "sketch"}, stated error up to ±${(100 * D.flows_rel_err).toPrecision(2)}%), and the latency quantiles (quantile sketch).`);
    const est = D.windows - D.exact_windows;
    if (est > 0) note(`Per-flow figures are exact in ${fmtInt(D.exact_windows)} of ${fmtInt(D.windows)} windows; in ${fmtInt(est)} the QP tables overflowed and top lists include sketch estimates (marked est.).`, true);
    else if (D.windows) note("Per-flow figures are exact in every window: the QP tables held every flow.");
    if (D.point_windows > 1) note(`Downsampled: ${fmtInt(nPoints)} points of ${fmtInt(D.point_windows)} windows each (at most ${fmtInt(D.max_points)} per series). Counts are summed over a point's windows; rates, flow counts and latency quantiles show the largest window of the point, and throughput its smallest too.`, true);
    else note("One point per window: nothing is downsampled.");
    let flows = `Flows charted: the union of every window's top list, ${fmtInt(D.flows.length)} flows (at most ${fmtInt(D.max_flows)}). A flow's table figures add up the windows in which it made the top list.`;
    note(flows);
    if (D.flows_evicted || D.flows_refused) note(`The flow cap was reached: ${fmtInt(D.flows_evicted)} times a charted flow made room for a larger one, and ${fmtInt(D.flows_refused)} top-list entries of smaller flows were left out.`, true);
    card.append(notes);
    root.append(card);
  }

  // ---- charts ------------------------------------------------------------

  const charts = []; // {id, el, u}
  const x = D.x;

  function cardFor(parent, title, caption) {
    const card = el("section", { class: "card" }, el("h2", {}, title), el("p", { class: "caption" }, caption));
    parent.append(card);
    return card;
  }

  // chart draws series [{label, data, stroke, ...}] over time in a card.
  function chart(parent, id, title, caption, series, opt) {
    opt = opt || {};
    const card = cardFor(parent, title, caption);
    const div = el("div", { class: "chart", "data-chart": id });
    card.append(div);
    if (opt.keys) card.append(opt.keys);
    const focus = opt.focus ? el("div", { class: "focus" }) : null;
    if (focus) card.insertBefore(focus, div);
    const fmt = opt.fmt || fmtInt;
    // With many lines there is no legend: the line nearest the cursor is
    // named above the chart, with its value there.
    let focused = null;
    const name = (u) => {
      const i = focused, x = u.cursor.idx;
      if (i == null) { focus.textContent = ""; return; }
      const v = x == null ? null : u.data[i][x];
      focus.textContent = u.series[i].label + (v == null ? "" : ":  " + fmt(v));
    };
    const width = Math.max(300, div.clientWidth || card.clientWidth - 32);
    const o = {
      width,
      height: opt.height || 240,
      tzDate: (ts) => uPlot.tzDate(new Date(ts * 1e3), "Etc/UTC"),
      cursor: { sync: { key: "rocescope" }, focus: { prox: opt.focus ? 12 : -1 } },
      focus: { alpha: opt.focus ? 0.25 : 1 },
      legend: { show: !opt.focus },
      scales: Object.assign({ x: { time: true }, y: { range: fromZero } }, opt.scales || {}),
      series: [{ label: "UTC", value: "{YYYY}-{MM}-{DD} {HH}:{mm}:{ss}.{fff}" }].concat(series.map((s) => Object.assign({
        width: 1.5,
        spanGaps: false,
        value: (u, v) => (v == null ? "–" : (s.fmt || fmt)(v)),
      }, s, { data: undefined, fmt: undefined }))),
      axes: opt.axes || [{}, axis(fmt, 70)],
      hooks: {
        draw: [(u) => { div.dataset.drawn = String(u.series.length - 1); }],
        setSeries: focus ? [(u, i) => { focused = i; name(u); }] : [],
        setCursor: focus ? [name] : [],
      },
    };
    const u = new uPlot(o, [x].concat(series.map((s) => s.data)), div);
    charts.push({ id, div, u });
    return u;
  }

  // axis labels a y axis with fmt; uPlot passes null for the ticks it
  // leaves unlabelled (the minor ticks of a log scale).
  const axis = (fmt, size) => ({ values: (u, vals) => vals.map((v) => (v == null ? "" : fmt(v))), size });
  const short = (v) => String(+v.toPrecision(6));

  // fromZero ranges a scale from zero, so that a dip shows as one.
  const fromZero = (u, min, max) => uPlot.rangeNum(0, max > 0 ? max : 1, 0.1, true);
  const rateAxis = axis(fmtRate, 80);

  const countSeries = (names, labels) => names.filter((n) => S[n]).map((n, i) => ({
    label: labels[n] || n, data: S[n], stroke: palette[i % palette.length],
  }));
  const keysOf = (prefix, suffix) => Object.keys(S).filter((k) => k.startsWith(prefix) && k.endsWith(suffix))
    .sort((a, b) => parseInt(a.slice(prefix.length), 10) - parseInt(b.slice(prefix.length), 10));
  const perPoint = D.point_windows > 1 ? " per point (summed over its windows)" : " per window";

  function traffic(parent) {
    const down = D.point_windows > 1;
    const gbps = (v) => v.toFixed(3) + " Gb/s";
    const mpps = (v) => v.toFixed(4) + " Mpps";
    const tput = [
      { label: down ? "Gb/s (highest)" : "Gb/s", data: S.gbps, stroke: palette[0], scale: "gbps", fmt: gbps, fill: "rgba(31,111,235,0.08)" },
      { label: down ? "Mpps (highest)" : "Mpps", data: S.mpps, stroke: palette[1], scale: "mpps", fmt: mpps },
    ];
    if (down) {
      tput.push({ label: "Gb/s (lowest)", data: S.gbps_min, stroke: palette[0], dash: [4, 3], width: 1, scale: "gbps", fmt: gbps },
        { label: "Mpps (lowest)", data: S.mpps_min, stroke: palette[1], dash: [4, 3], width: 1, scale: "mpps", fmt: mpps });
    }
    chart(parent, "throughput", "Throughput",
      "On-wire bits and frames per second of each window" +
      (down ? ": the highest and (dashed) the lowest window of each point, so that dips survive downsampling." : "."),
      tput,
      { scales: { gbps: { range: fromZero }, mpps: { range: fromZero } },
        axes: [{}, Object.assign(axis(short, 60), { scale: "gbps", label: "Gb/s" }),
          Object.assign(axis(short, 70), { scale: "mpps", label: "Mpps", side: 1, grid: { show: false } })] });
    const grid = el("div", { class: "grid2" });
    parent.append(grid);
    chart(grid, "frames", "Frames",
      "Frames" + perPoint + ": RoCE, other, malformed, truncated, and frames the kernel dropped (live capture).",
      countSeries(["roce_packets", "other_packets", "malformed_packets", "truncated_packets", "kernel_drops"],
        { roce_packets: "RoCE", other_packets: "other", malformed_packets: "malformed", truncated_packets: "truncated", kernel_drops: "kernel drops" }));
    chart(grid, "flowcount", "Flows", "Distinct flows (estimated), elephants and jitter flows in each window" +
      (D.point_windows > 1 ? " (largest window of each point)." : "."),
      countSeries(["flows", "elephants", "jitter"], { flows: "distinct flows (est.)", elephants: "elephants", jitter: "jitter flows" }));
  }

  // flowSeries turns the charted flows' samples into series of field k
  // (1 rate, 2 rate change, 3 CNPs); zeros are left out on a log scale.
  function flowSeries(flows, k, log) {
    return flows.map((f) => {
      const data = new Array(nPoints).fill(null);
      const marks = [];
      for (const s of f.samples) {
        if (s[k] > 0 || !log) data[s[0]] = s[k];
        if (s[4] & 2) marks.push(s[0]);
      }
      const top = f.rank < palette.length;
      return {
        label: flowName(f),
        data,
        stroke: top ? palette[f.rank] : grey,
        width: f.elephant_windows > 0 ? 2.2 : 1.2,
        dash: f.jitter_windows > 0 ? [6, 3] : undefined,
        // Dots mark the jitter windows of the coloured flows; the grey ones
        // would bury them.
        points: { show: false, filter: () => (top && marks.length ? marks : null), size: 6, fill: top ? palette[f.rank] : grey },
      };
    });
  }

  function threshold(label, value, color) {
    return { label, data: new Array(nPoints).fill(value), stroke: color, width: 1.5, dash: [2, 4] };
  }

  function flowKeys(flows) {
    const keys = el("p", { class: "keys" });
    flows.slice(0, palette.length).forEach((f) => {
      keys.append(el("span", {}, el("i", { class: "swatch", style: "background:" + palette[f.rank] }), flowName(f)));
    });
    if (flows.length > palette.length) keys.append(el("span", {}, el("i", { class: "swatch", style: "background:" + grey }), `${flows.length - palette.length} more flows`));
    keys.append(el("span", {}, "thick: elephant · dashed: jitter flow · dot: a jitter window of a coloured flow · hover a line to name it"));
    return keys;
  }

  function flowCharts(parent) {
    const flows = D.flows; // by bytes, largest first
    flows.forEach((f, i) => { f.rank = i; });
    const log = { y: { distr: 3 } };
    const rates = flowSeries(flows, 1, true);
    if (D.elephant_rate_bps) rates.push(threshold("elephant threshold", D.elephant_rate_bps, "#c2410c"));
    chart(parent, "flowrates", "Top flows: rate",
      `Rate of every flow of the top lists (${fmtInt(flows.length)} flows), log scale; the dotted line is the elephant rate (${fmtRate(D.elephant_rate_bps)}).`,
      rates, { focus: true, fmt: fmtRate, keys: flowKeys(flows), height: 320, scales: log, axes: [{}, rateAxis] });

    const jumpy = flows.filter((f) => f.elephant_windows > 0 || f.jitter_windows > 0);
    const deltas = flowSeries(jumpy, 2, true);
    if (D.jitter_rate_bps) deltas.push(threshold("jitter threshold", D.jitter_rate_bps, "#7c3aed"));
    chart(parent, "flowjitter", "Elephants: rate change",
      `Rate change from the previous window of the ${fmtInt(jumpy.length)} flows that were elephants or jitter flows, log scale; the dotted line is the jitter rate (${fmtRate(D.jitter_rate_bps)}).` +
      (jumpy.length ? "" : " No flow reached the elephant rate."),
      deltas, { focus: true, fmt: fmtRate, scales: log, axes: [{}, rateAxis] });

    const cnpFlows = flows.filter((f) => f.cnp > 0);
    chart(parent, "flowcnp", "Top flows: CNPs",
      `CNPs${perPoint} against each of the ${fmtInt(cnpFlows.length)} top flows that were throttled.` + (cnpFlows.length ? "" : " None was."),
      flowSeries(cnpFlows, 3, false), { focus: true });
  }

  function congestion(parent) {
    const grid = el("div", { class: "grid2" });
    parent.append(grid);
    chart(grid, "congestion", "Congestion signals", "CNP, ECN-CE, FECN and BECN" + perPoint + ".",
      countSeries(["cnp", "ecn_ce", "fecn", "becn", "cnp_unattributed"],
        { cnp: "CNP", ecn_ce: "ECN-CE", fecn: "FECN", becn: "BECN", cnp_unattributed: "CNP unattributed" }));
    const naks = keysOf("nak_codes.", "").map((k) => ({ label: "NAK " + (D.nak_names[k.split(".")[1]] || k), data: S[k] }));
    const transport = naks.concat(countSeries(["rnr_naks", "retransmits", "psn_gaps", "out_of_order"],
      { rnr_naks: "RNR NAK", retransmits: "retransmits", psn_gaps: "PSN gaps", out_of_order: "out of order" }));
    chart(grid, "transport", "Transport trouble", "NAKs by code, RNR NAKs, retransmissions and PSN gaps" + perPoint + ".",
      transport.map((s, i) => Object.assign(s, { stroke: palette[i % palette.length] })));
    const pfcFrames = keysOf("pfc.", ".frames").map((k) => ({ label: "priority " + k.split(".")[1], data: S[k] }));
    pfcFrames.push({ label: "802.3x pause", data: S.pause_frames });
    chart(grid, "pfcframes", "PFC pause frames", "PFC frames that paused each priority, and 802.3x pause frames," + perPoint + ".",
      pfcFrames.map((s, i) => Object.assign(s, { stroke: palette[i % palette.length] })));
    const pfcQuanta = keysOf("pfc.", ".quanta").map((k) => ({ label: "priority " + k.split(".")[1], data: S[k] }));
    pfcQuanta.push({ label: "802.3x pause", data: S.pause_quanta });
    chart(grid, "pfcquanta", "PFC pause quanta", "Pause quanta (512 bit times each) per priority" + perPoint + ".",
      pfcQuanta.map((s, i) => Object.assign(s, { stroke: palette[i % palette.length] })));
  }

  function latency(parent) {
    const grid = el("div", { class: "grid2" });
    parent.append(grid);
    for (const [id, key, title, what] of [["readlat", "read_latency_ns", "READ latency", "READ request to its first response"],
      ["acklat", "ack_latency_ns", "ACK latency", "request to its ACK"]]) {
      const qs = ["p50", "p90", "p99", "max"].map((q, i) => ({
        label: q, data: S[`${key}.${q}`].map((v) => (v > 0 ? v / 1e3 : null)), stroke: palette[i],
        fmt: (v) => fmtNs(v * 1e3),
      }));
      const n = total(`${key}.count`);
      chart(grid, id, title, `${what}, seen at the mirror, log scale; ${fmtInt(n)} latencies matched` +
        (D.point_windows > 1 ? "; each point shows the largest quantile of its windows." : "."), qs,
        { fmt: (v) => fmtNs(v * 1e3), scales: { y: { distr: 3 } }, axes: [{}, axis((v) => fmtNs(v * 1e3), 80)] });
    }
  }

  function opcodeMix(parent) {
    const opSeries = keysOf("opcodes.", "").map((k, i) => ({
      label: D.opcode_names[k.split(".")[1]] || k, data: S[k], stroke: palette[i % palette.length],
    }));
    chart(parent, "opcodes", "RDMA operations", "Packets per BTH opcode" + perPoint + ".", opSeries);
    const card = cardFor(parent, "Operation mix", "Packets per BTH opcode over the whole run.");
    const ops = Object.keys(D.opcode_names).map((k) => ({ name: D.opcode_names[k], code: +k, n: total("opcodes." + k) }))
      .sort((a, b) => b.n - a.n || a.code - b.code);
    const all = ops.reduce((a, o) => a + o.n, 0);
    const tb = el("tbody");
    for (const o of ops) {
      tb.append(el("tr", {}, el("td", { class: "text" }, o.name), el("td", {}, o.code), el("td", {}, fmtInt(o.n)),
        el("td", {}, (100 * o.n / all).toFixed(1) + "%"),
        el("td", { class: "bar" }, el("span", { class: "fill", style: `width:${(100 * o.n / ops[0].n).toFixed(2)}%` }))));
    }
    const div = el("div", { class: "bars", "data-chart": "opcodemix" },
      ops.length ? el("table", {}, el("thead", {}, el("tr", {}, el("th", { class: "text" }, "opcode"), el("th", {}, "code"),
        el("th", {}, "packets"), el("th", {}, "share"), el("th", { class: "text" }, ""))), tb) : el("p", { class: "empty" }, "No RoCE packets."));
    div.dataset.drawn = String(ops.length);
    card.append(div);
  }

  // ---- flow table --------------------------------------------------------

  function flowTable(parent) {
    const card = cardFor(parent, "Flows",
      "Every charted flow; figures add up the windows in which the flow made the top list. Click a column to sort, a row to pick its line in the charts.");
    const cols = [
      ["", (f) => f.rank, (f) => (f.rank < palette.length ? el("i", { class: "swatch", style: "background:" + palette[f.rank] }) : "")],
      ["src", (f) => f.src, null, true],
      ["dst", (f) => f.dst, null, true],
      ["dqp", (f) => f.dqp, (f) => hex(f.dqp)],
      ["sqp", (f) => (f.sqp == null ? -1 : f.sqp), (f) => (f.sqp == null ? "–" : hex(f.sqp))],
      ["bytes", (f) => f.bytes, (f) => fmtBytes(f.bytes)],
      ["packets", (f) => f.packets, (f) => fmtInt(f.packets)],
      ["peak rate", (f) => f.peak_bps, (f) => fmtRate(f.peak_bps)],
      ["CNP", (f) => f.cnp, (f) => fmtInt(f.cnp)],
      ["ECN-CE", (f) => f.ecn_ce, (f) => fmtInt(f.ecn_ce)],
      ["retransmits", (f) => f.retransmits, (f) => fmtInt(f.retransmits)],
      ["top windows", (f) => f.windows, (f) => fmtInt(f.windows)],
      ["marks", (f) => f.elephant_windows * 1e6 + f.jitter_windows, (f) => {
        const s = el("span");
        if (f.elephant_windows) s.append(el("span", { class: "tag el", title: `elephant in ${f.elephant_windows} windows` }, "elephant " + f.elephant_windows));
        if (f.jitter_windows) s.append(el("span", { class: "tag ji", title: `jitter in ${f.jitter_windows} windows` }, "jitter " + f.jitter_windows));
        if (f.estimated_windows) s.append(el("span", { class: "tag es", title: "figures from the sketches" }, "est. " + f.estimated_windows));
        return s;
      }, true],
    ];
    const rows = D.flows.slice();
    const tb = el("tbody");
    const heads = cols.map(([name, key, , text], i) => el("th", {
      class: text ? "text" : "",
      onclick: () => sortBy(i),
    }, name));
    let sortCol = 5, asc = false;
    function render() {
      tb.textContent = "";
      const frag = document.createDocumentFragment();
      for (const f of rows) {
        frag.append(el("tr", { "data-rank": f.rank, onclick: () => pick(f) },
          ...cols.map(([, key, show, text]) => el("td", { class: text ? "text" : "" }, show ? show(f) : key(f)))));
      }
      tb.append(frag);
      heads.forEach((h, i) => { h.classList.toggle("sorted", i === sortCol); h.classList.toggle("asc", i === sortCol && asc); });
    }
    function sortBy(i) {
      asc = sortCol === i ? !asc : cols[i][3] === true;
      sortCol = i;
      const key = cols[i][1];
      rows.sort((a, b) => {
        const ka = key(a), kb = key(b);
        const c = ka < kb ? -1 : ka > kb ? 1 : 0;
        return (asc ? c : -c) || a.rank - b.rank;
      });
      render();
    }
    function pick(f) {
      tb.querySelectorAll("tr.picked").forEach((r) => r.classList.remove("picked"));
      const row = tb.querySelector(`tr[data-rank="${f.rank}"]`);
      if (row) row.classList.add("picked");
      const rc = charts.find((c) => c.id === "flowrates");
      if (rc) {
        rc.u.setSeries(f.rank + 1, { focus: true });
        rc.div.scrollIntoView({ behavior: "smooth", block: "center" });
      }
    }
    render();
    card.append(D.flows.length
      ? el("div", { class: "tablewrap" }, el("table", { "data-table": "flows" }, el("thead", {}, el("tr", {}, ...heads)), tb))
      : el("p", { class: "empty" }, "No flow made a top list."));
  }

  // ---- main --------------------------------------------------------------

  header();
  if (!D.windows) root.append(el("p", { class: "card empty" }, "No window was reported: the input held no frames."));
  traffic(root);
  flowCharts(root);
  congestion(root);
  latency(root);
  opcodeMix(root);
  flowTable(root);

  window.addEventListener("resize", () => {
    for (const c of charts) c.u.setSize({ width: Math.max(300, c.div.clientWidth), height: c.u.height });
  });

  // uPlot draws on a microtask; check that every chart did.
  setTimeout(() => {
    const missing = charts.filter((c) => c.div.dataset.drawn == null).map((c) => c.id);
    if (missing.length) { fail("charts not drawn: " + missing.join(", ")); return; }
    body.dataset.renderMs = String(Math.round(performance.now() - started));
    body.dataset.charts = String(charts.length);
    body.dataset.status = "ok";
  }, 0);
})();
