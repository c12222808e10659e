// rocescope HTML report: draws the figures of the JSON in #data with uPlot.
// When every chart has drawn, body[data-status] is "ok" (and
// body[data-render-ms] how long it took); on any error it is "error: ...".
//
// The page is a list of sections (header, events, traffic, flows,
// congestion, latency, operations, flow table), each a function that appends its cards
// to the page: a new section is one more function in `sections`. Every
// chart is made by chart(), which gives it a 24-hour UTC time axis whose
// labels never overlap, value axes sized to their labels, a legend, and the
// data-series attribute (label, scale and colour of each series) the tests
// read.
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
  const prefixes = [[1e12, "T"], [1e9, "G"], [1e6, "M"], [1e3, "k"], [1, ""]];
  // prefixOf returns the SI multiple a value is best shown in.
  const prefixOf = (v) => prefixes.find(([m]) => Math.abs(v) >= 0.9995 * m) || prefixes[prefixes.length - 1];
  // sig3 writes v with three significant digits, no exponent.
  function sig3(v) {
    const a = Math.abs(v);
    if (a === 0) return "0";
    const digits = a >= 99.95 ? 0 : a >= 9.995 ? 1 : a >= 0.9995 ? 2 : Math.min(6, 2 - Math.floor(Math.log10(a)));
    return v.toFixed(digits);
  }
  // si writes v in unit with an SI prefix and three significant digits.
  function si(v, unit) {
    if (v == null) return "–";
    const [m, p] = prefixOf(v);
    return sig3(v / m) + " " + p + unit;
  }
  const fmtBytes = (n) => (n != null && n < 1000 ? fmtInt(n) + " B" : si(n, "B"));
  const fmtRate = (bps) => si(bps, "b/s");
  const fmtCount = (n) => (n == null ? "–" : Math.abs(n) < 1e4 ? fmtInt(+n.toFixed(2)) : si(n, ""));
  function fmtNs(ns) {
    if (ns == null) return "–";
    for (const [div, unit] of [[1e9, " s"], [1e6, " ms"], [1e3, " µs"]]) {
      if (ns >= 0.9995 * div) return sig3(ns / div) + unit;
    }
    return sig3(ns) + " ns";
  }
  const hex = (q) => "0x" + q.toString(16).padStart(6, "0");
  D.flows.forEach((f, i) => { f.rank = i; }); // by bytes, largest first
  const total = (name) => (S[name] || []).reduce((a, v) => a + (v || 0), 0);
  const maxOf = (name) => (S[name] || []).reduce((a, v) => (v != null && v > a ? v : a), 0);
  const flowName = (f) => `${f.src} → ${f.dst} ${hex(f.dqp)}`;

  // Twenty colours that stay apart on white, the first ten the most; grey
  // is kept for flows beyond them.
  const palette = ["#1f6feb", "#e8590c", "#2f9e44", "#c92a2a", "#7048e8", "#0c8599", "#d6336c", "#8f6b00",
    "#5c940d", "#862e9c", "#1864ab", "#f59f00", "#087f5b", "#a61e4d", "#74b816", "#495057", "#ff8787",
    "#4dabf7", "#b197fc", "#8c564b"];
  const grey = "rgba(120,130,145,0.45)";

  // ---- text measure -----------------------------------------------------

  // Axis labels are drawn on a canvas in this font (uPlot's); their width,
  // measured here, sizes the axes and spaces the time ticks.
  const FONT = '12px system-ui, -apple-system, "Segoe UI", Roboto, "Helvetica Neue", Arial, "Noto Sans", sans-serif';
  const measure = (() => {
    const ctx = document.createElement("canvas").getContext("2d");
    ctx.font = FONT;
    const cache = new Map();
    return (text) => {
      let w = cache.get(text);
      if (w == null) {
        w = Math.max(...String(text).split("\n").map((l) => ctx.measureText(l).width));
        cache.set(text, w);
      }
      return w;
    };
  })();

  // ---- time axis ---------------------------------------------------------

  // Times are UTC, in 24-hour ISO form. A tick shows the time to the
  // precision its step needs; the first tick, and a tick where the day
  // changes, also show the date below it.
  const two = (n) => String(n).padStart(2, "0");
  const isoDate = (d) => `${d.getUTCFullYear()}-${two(d.getUTCMonth() + 1)}-${two(d.getUTCDate())}`;
  function clock(d, step) {
    let s = two(d.getUTCHours()) + ":" + two(d.getUTCMinutes());
    if (step < 60) s += ":" + two(d.getUTCSeconds());
    if (step < 1) s += "." + String(d.getUTCMilliseconds()).padStart(3, "0").slice(0, Math.min(3, Math.ceil(-Math.log10(step) - 1e-9)));
    return s;
  }
  const DAY = 86400;
  const timeSteps = [0.001, 0.002, 0.005, 0.01, 0.02, 0.05, 0.1, 0.2, 0.5, 1, 2, 5, 10, 15, 30,
    60, 120, 300, 600, 900, 1800, 3600, 7200, 10800, 14400, 21600, 43200, DAY, 2 * DAY, 7 * DAY, 14 * DAY];
  const tickGap = 16; // least room between two time labels, px
  // stepFor returns the smallest step whose ticks leave room for their
  // labels, on an axis from min to max seconds over dim pixels: a time
  // beside a time, or beside a date that shares its tick.
  // No step is shorter than a point: the page has no time between them.
  const pointSecs = D.window_ns * Math.max(1, D.point_windows) / 1e9;
  function stepFor(min, max, dim) {
    const span = max - min;
    if (!(span > 0) || !(dim > 0)) return 1;
    const date = measure("0000-00-00");
    for (const step of timeSteps) {
      if (step < pointSecs * (1 - 1e-9)) continue;
      const t = Math.max(measure(clock(new Date(min * 1e3), step)), measure(clock(new Date(max * 1e3), step)));
      const need = step < DAY ? Math.max(t, (t + date) / 2) : date;
      if (step * dim / span >= need + tickGap) return step;
    }
    return timeSteps[timeSteps.length - 1] * Math.ceil(span / dim);
  }
  function timeLabels(u, splits, axisIdx, space, step) {
    let day = null;
    return splits.map((ts) => {
      const d = new Date(ts * 1e3);
      if (step >= DAY) return isoDate(d);
      const today = isoDate(d);
      const label = day === today ? clock(d, step) : clock(d, step) + "\n" + today;
      day = today;
      return label;
    });
  }
  const timeAxis = () => ({
    space: () => 1,
    incrs: (u, axisIdx, min, max, dim) => [stepFor(min, max, dim)],
    values: timeLabels,
    size: 50, // two lines of labels
    label: "time (UTC)",
    labelSize: 18,
    labelFont: FONT,
    font: FONT,
  });
  // A time label at either end of the plot hangs past it by up to half a
  // date: the axis on that side, or padding, makes room for it.
  const hang = Math.ceil(measure("0000-00-00") / 2) + 2;
  const sidePad = (u, side) => Math.max(0, hang - u.axes.reduce((n, a) => n + (a.side === side && a._show !== false ? a._size || 0 : 0), 0));

  // ---- value axes --------------------------------------------------------

  // axisSize fits an axis to its widest label.
  function axisSize(u, values, axisIdx, cycle) {
    const axis = u.axes[axisIdx];
    if (cycle > 1) return axis._size; // settle: uPlot iterates while sizes change
    const widest = (values || []).reduce((w, v) => (v == null ? w : Math.max(w, measure(v))), 0);
    return Math.ceil(axis.ticks.size + axis.gap + widest + 4);
  }
  // decimals returns the decimals that tell the ticks of a step apart.
  function decimals(step) {
    let d = 0;
    while (d < 6 && Math.abs(Math.round(step * 10 ** d) - step * 10 ** d) > 1e-6 * 10 ** d) d++;
    return d;
  }
  // unitAxis labels a linear axis in unit, every tick but 0 with the one SI
  // prefix its largest tick needs ("0, 20 kb/s ... 80 kb/s"). A count axis
  // (no unit) steps by whole numbers, and takes a prefix from 10 000 on.
  const wholeSteps = [1, 2, 5].flatMap((m) => Array.from({ length: 16 }, (_, e) => m * 10 ** e)).sort((a, b) => a - b);
  const unitAxis = (unit, extra) => Object.assign(unit ? {} : { incrs: wholeSteps }, {
    font: FONT,
    size: axisSize,
    values: (u, splits, axisIdx, space, step) => {
      const most = splits.reduce((a, v) => Math.max(a, Math.abs(v)), 0) || 1;
      if (!unit && most < 1e4) return splits.map((v) => (v == null ? null : fmtInt(v))); // counts: 0 ... 9,000
      const [m, p] = prefixOf(most);
      const d = decimals(step / m);
      return splits.map((v) => (v == null ? null : v === 0 ? "0" : (v / m).toFixed(d) + (unit || p ? " " + p + unit : "")));
    },
  }, extra || {});
  // logAxis labels a log axis, each decade in its own unit, without
  // trailing zeros ("10 kb/s", "1 Mb/s").
  const logAxis = (fmt) => ({
    font: FONT,
    size: axisSize,
    values: (u, splits) => splits.map((v) => (v == null ? null : fmt(v).replace(/\.0+(?= )|(\.[0-9]*[1-9])0+(?= )/, "$1"))),
  });

  // ---- charts ------------------------------------------------------------

  const charts = []; // {id, div, u}
  const x = D.x;

  function cardFor(parent, title, caption) {
    const card = el("section", { class: "card" }, el("h2", {}, title), el("p", { class: "caption" }, caption));
    parent.append(card);
    return card;
  }

  // fromZero ranges a scale from zero, so that a dip shows as one.
  const fromZero = (u, min, max) => uPlot.rangeNum(0, max > 0 ? max : 1, 0.1, true);

  // chart draws series [{label, data, stroke, scale, ...}] over time in a
  // card. opt: axes (beyond the time axis; default one count axis), scales,
  // fmt (legend values), focus (many lines: no legend table, the nearest
  // line is named above the chart, keys below), keys, height, draw (a
  // function of the plot and the chart's div, called after each drawing).
  function chart(parent, id, title, caption, series, opt) {
    opt = opt || {};
    const card = cardFor(parent, title, caption);
    const div = el("div", { class: "chart", "data-chart": id });
    card.append(div);
    if (opt.keys) card.append(opt.keys);
    const focus = opt.focus ? el("div", { class: "focus" }) : null;
    if (focus) card.insertBefore(focus, div);
    const fmt = opt.fmt || fmtCount;
    let focused = null;
    const name = (u) => {
      const i = focused, xi = u.cursor.idx;
      if (i == null) { focus.textContent = ""; return; }
      const v = xi == null ? null : u.data[i][xi];
      focus.textContent = u.series[i].label + (v == null ? "" : ":  " + (u.series[i]._fmt || fmt)(v));
    };
    const width = Math.max(300, div.clientWidth || card.clientWidth - 32);
    const axes = [timeAxis()].concat(opt.axes || [unitAxis("")]);
    const scales = Object.assign({ x: { time: true }, y: { range: fromZero } }, opt.scales || {});
    const o = {
      width,
      height: opt.height || 240,
      tzDate: (ts) => uPlot.tzDate(new Date(ts * 1e3), "Etc/UTC"),
      padding: [12, sidePad, 0, sidePad],
      cursor: { sync: { key: "rocescope" }, focus: { prox: opt.focus ? 12 : -1 } },
      focus: { alpha: opt.focus ? 0.25 : 1 },
      legend: { show: !opt.focus },
      scales,
      series: [{ label: "time (UTC)", value: (u, ts) => (ts == null ? "–" : isoDate(new Date(ts * 1e3)) + " " + clock(new Date(ts * 1e3), D.window_ns < 1e9 ? 0.001 : 1)) }]
        .concat(series.map((s) => Object.assign({
          width: 1.5,
          spanGaps: false,
          value: (u, v) => (v == null ? "–" : (s.fmt || fmt)(v)),
        }, s, { data: undefined, fmt: undefined, _fmt: s.fmt }))),
      axes,
      hooks: {
        draw: [(u) => { if (opt.draw) opt.draw(u, div); div.dataset.drawn = String(u.series.length - 1); }],
        setSeries: focus ? [(u, i) => { focused = i; name(u); }] : [],
        setCursor: focus ? [name] : [],
      },
    };
    const u = new uPlot(o, [x].concat(series.map((s) => s.data)), div);
    div.dataset.series = JSON.stringify(series.map((s) => ({ label: s.label, scale: s.scale || "y", stroke: s.stroke })));
    charts.push({ id, div, u });
    return u;
  }

  const colour = (i) => palette[i % palette.length];
  const countSeries = (names, labels) => names.filter((n) => S[n]).map((n, i) => ({
    label: labels[n] || n, data: S[n], stroke: colour(i),
  }));
  const keysOf = (prefix, suffix) => Object.keys(S).filter((k) => k.startsWith(prefix) && k.endsWith(suffix))
    .sort((a, b) => parseInt(a.slice(prefix.length), 10) - parseInt(b.slice(prefix.length), 10));
  const perPoint = D.point_windows > 1 ? " per point (summed over its windows)" : " per window";
  const scaled = (name, k) => (S[name] || []).map((v) => (v == null ? null : v * k));
  // rightAxis is a second count axis, on the right, for the small counts
  // of a chart whose other counts are large.
  const rightAxis = (scale) => unitAxis("", { scale, side: 1, grid: { show: false } });

  function traffic(parent) {
    const down = D.point_windows > 1;
    const tput = [
      { label: down ? "bits/s (highest)" : "bits/s", data: scaled("gbps", 1e9), stroke: palette[0], scale: "bps", fmt: fmtRate, fill: "rgba(31,111,235,0.08)" },
      { label: down ? "frames/s (highest)" : "frames/s", data: scaled("mpps", 1e6), stroke: palette[1], scale: "pps", fmt: (v) => si(v, "pps") },
    ];
    if (down) {
      tput.push({ label: "bits/s (lowest)", data: scaled("gbps_min", 1e9), stroke: palette[0], dash: [4, 3], width: 1, scale: "bps", fmt: fmtRate },
        { label: "frames/s (lowest)", data: scaled("mpps_min", 1e6), stroke: palette[1], dash: [4, 3], width: 1, scale: "pps", fmt: (v) => si(v, "pps") });
    }
    chart(parent, "throughput", "Throughput",
      "On-wire bits and frames per second of each window" +
      (down ? ": the highest and (dashed) the lowest window of each point, so that dips survive downsampling." : "."),
      tput,
      { scales: { bps: { range: fromZero }, pps: { range: fromZero } },
        axes: [unitAxis("b/s", { scale: "bps", stroke: palette[0] }),
          unitAxis("pps", { scale: "pps", side: 1, grid: { show: false }, stroke: palette[1] })] });
    const grid = el("div", { class: "grid2" });
    parent.append(grid);
    const frames = countSeries(["roce_packets", "other_packets"], { roce_packets: "RoCE", other_packets: "other" });
    const bad = countSeries(["malformed_packets", "truncated_packets", "kernel_drops"],
      { malformed_packets: "malformed (right axis)", truncated_packets: "truncated (right axis)", kernel_drops: "kernel drops (right axis)" });
    bad.forEach((s, i) => Object.assign(s, { scale: "bad", stroke: colour(frames.length + i) }));
    chart(grid, "frames", "Frames",
      "Frames" + perPoint + ": RoCE and other on the left axis; malformed, truncated, and frames the kernel dropped (live capture) on the right.",
      frames.concat(bad), { scales: { bad: { range: fromZero } }, axes: [unitAxis(""), rightAxis("bad")] });
    const counts = countSeries(["elephants", "jitter"], { elephants: "elephants (right axis)", jitter: "jitter flows (right axis)" });
    counts.forEach((s, i) => Object.assign(s, { scale: "n", stroke: colour(1 + i) }));
    chart(grid, "flowcount", "Flows", "Distinct flows (estimated) on the left axis; elephants and jitter flows on the right" +
      (D.point_windows > 1 ? " (largest window of each point)." : "."),
      countSeries(["flows"], { flows: "distinct flows (est.)" }).concat(counts),
      { scales: { n: { range: fromZero } }, axes: [unitAxis(""), rightAxis("n")] });
  }

  // flowSeries turns the charted flows' samples into series of field k
  // (1 rate, 2 rate change, 3 CNPs); zeros are left out on a log scale.
  function flowSeries(flows, k, log) {
    return flows.map((f) => {
      const data = new Array(nPoints).fill(null);
      const marks = [];
      for (const s of f.samples) {
        if (s[k] > 0 || (!log && s[k] != null)) data[s[0]] = s[k];
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

  // flowKeys is the legend of a chart of flows: the coloured ones by name,
  // the rest as a count, and what the line styles mean.
  function flowKeys(flows, extra) {
    const keys = el("p", { class: "keys" });
    flows.filter((f) => f.rank < palette.length).forEach((f) => {
      keys.append(el("span", {}, el("i", { class: "swatch", style: "background:" + palette[f.rank] }), flowName(f)));
    });
    const more = flows.filter((f) => f.rank >= palette.length).length;
    if (more) keys.append(el("span", {}, el("i", { class: "swatch", style: "background:" + grey }), `${more} more flows`));
    for (const [label, color] of extra || []) keys.append(el("span", {}, el("i", { class: "swatch dashed", style: "border-color:" + color }), label));
    keys.append(el("span", {}, "thick: elephant · dashed: jitter flow · dot: a jitter window of a coloured flow · hover a line to name it"));
    return keys;
  }

  function flowCharts(parent) {
    const flows = D.flows; // by bytes, largest first
    const log = { y: { distr: 3 } };
    const rates = flowSeries(flows, 1, true);
    const elephant = D.elephant_rate_bps ? [["elephant rate " + fmtRate(D.elephant_rate_bps), "#c2410c"]] : [];
    if (D.elephant_rate_bps) rates.push(threshold("elephant threshold", D.elephant_rate_bps, "#c2410c"));
    chart(parent, "flowrates", "Top flows: rate",
      `Rate of every flow of the top lists (${fmtInt(flows.length)} flows), log scale; the dotted line is the elephant rate (${fmtRate(D.elephant_rate_bps)}).`,
      rates, { focus: true, fmt: fmtRate, keys: flowKeys(flows, elephant), height: 320, scales: log, axes: [logAxis(fmtRate)] });

    const jumpy = flows.filter((f) => f.elephant_windows > 0 || f.jitter_windows > 0);
    const deltas = flowSeries(jumpy, 2, true);
    const jitter = D.jitter_rate_bps ? [["jitter rate " + fmtRate(D.jitter_rate_bps), "#7c3aed"]] : [];
    if (D.jitter_rate_bps) deltas.push(threshold("jitter threshold", D.jitter_rate_bps, "#7c3aed"));
    chart(parent, "flowjitter", "Elephants: rate change",
      `Rate change from the previous window of the ${fmtInt(jumpy.length)} flows that were elephants or jitter flows, log scale (none in a window without a previous one); the dotted line is the jitter rate (${fmtRate(D.jitter_rate_bps)}).` +
      (jumpy.length ? "" : " No flow reached the elephant rate."),
      deltas, { focus: true, fmt: fmtRate, keys: flowKeys(jumpy, jitter), scales: log, axes: [logAxis(fmtRate)] });

    const cnpFlows = flows.filter((f) => f.cnp > 0);
    chart(parent, "flowcnp", "Top flows: CNPs",
      `CNPs${perPoint} against each of the ${fmtInt(cnpFlows.length)} top flows that were throttled.` + (cnpFlows.length ? "" : " None was."),
      flowSeries(cnpFlows, 3, false), { focus: true, keys: flowKeys(cnpFlows) });
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
      transport.map((s, i) => Object.assign(s, { stroke: colour(i) })));
    const pfcFrames = keysOf("pfc.", ".frames").map((k) => ({ label: "priority " + k.split(".")[1], data: S[k] }));
    pfcFrames.push({ label: "802.3x pause", data: S.pause_frames });
    chart(grid, "pfcframes", "PFC pause frames", "PFC frames that paused each priority, and 802.3x pause frames," + perPoint + ".",
      pfcFrames.map((s, i) => Object.assign(s, { stroke: colour(i) })));
    const pfcQuanta = keysOf("pfc.", ".quanta").map((k) => ({ label: "priority " + k.split(".")[1], data: S[k] }));
    pfcQuanta.push({ label: "802.3x pause", data: S.pause_quanta });
    chart(grid, "pfcquanta", "PFC pause quanta", "Pause quanta (512 bit times each) per priority" + perPoint + ".",
      pfcQuanta.map((s, i) => Object.assign(s, { stroke: colour(i) })));
  }

  function latency(parent) {
    const grid = el("div", { class: "grid2" });
    parent.append(grid);
    for (const [id, key, title, what] of [["readlat", "read_latency_ns", "READ latency", "READ request to its first response"],
      ["acklat", "ack_latency_ns", "ACK latency", "request to its ACK"]]) {
      const qs = ["p50", "p90", "p99", "max"].map((q, i) => ({
        label: q, data: S[`${key}.${q}`].map((v) => (v > 0 ? v : null)), stroke: colour(i), fmt: fmtNs,
      }));
      const n = total(`${key}.count`);
      chart(grid, id, title, `${what}, seen at the mirror, log scale; ${fmtInt(n)} latencies matched` +
        (D.point_windows > 1 ? "; each point shows the largest quantile of its windows." : "."), qs,
        { fmt: fmtNs, scales: { y: { distr: 3 } }, axes: [logAxis(fmtNs)] });
    }
  }

  // operation names the kind of RDMA operation of an opcode's name.
  function operation(name) {
    for (const [re, op] of [[/SEND/, "SEND"], [/RDMA WRITE/, "WRITE"], [/READ Request/i, "READ request"],
      [/READ response/i, "READ response"], [/Atomic Acknowledge/i, "atomic ACK"], [/Acknowledge/, "ACK"],
      [/CmpSwap|FetchAdd|Atomic/i, "atomic"], [/CNP/, "CNP"]]) {
      if (re.test(name)) return op;
    }
    return "other";
  }

  function opcodeMix(parent) {
    // The chart groups the opcodes by operation (a transport's SEND First,
    // Middle, Last ... are one SEND line); the table below has each.
    const groups = new Map();
    for (const k of keysOf("opcodes.", "")) {
      const op = operation(D.opcode_names[k.split(".")[1]] || "");
      const g = groups.get(op) || new Array(nPoints).fill(null);
      S[k].forEach((v, i) => { if (v != null) g[i] = (g[i] || 0) + v; });
      groups.set(op, g);
    }
    const opSeries = [...groups].map(([op, data], i) => ({ label: op, data, stroke: colour(i) }));
    chart(parent, "opcodes", "RDMA operations", "Packets per operation" + perPoint + " (SEND, WRITE and READ responses of every transport and position in the message together; the table below has each opcode).", opSeries);
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

  // ---- events ------------------------------------------------------------

  // The events of every window, each once (the page merged the windows an
  // event spans by its id), drawn as bars on a timeline with a lane per
  // kind, and listed in a table whose flows link to their rows in the flow
  // table.
  const kindColour = { incast: palette[3], pfc_storm: palette[4], retransmission: palette[1], ce_without_cnp: palette[5] };
  let pickFlow = null; // set by the flow table: marks and shows a flow's row
  const flowAt = new Map(D.flows.map((f) => [`${f.src} ${f.dst} ${f.dqp}`, f]));
  // eventFlows are the flows an event names: an incast's senders (those
  // the page kept), or the flow of the others.
  const eventFlows = (e) => (e.kind === "incast" ? e.senders : e.src != null ? [e] : []);
  // eventWhat says who an event is about and what happened, in a line.
  function eventWhat(e) {
    switch (e.kind) {
      case "incast":
        return `→ ${e.dst}: ${fmtInt(e.sender_count)} senders from ${fmtInt(e.sources)} addresses, peak ${fmtRate(e.peak_bps)}, ` +
          `${fmtBytes(e.bytes)}, CE ${fmtInt(e.ecn_ce)}, CNP ${fmtInt(e.cnp)}`;
      case "pfc_storm":
        return `${e.mac} priority ${e.priority}: paused ${fmtNs(e.paused_ns)} (${(100 * e.paused_fraction).toFixed(0)} %), ${fmtInt(e.frames)} frames`;
      case "retransmission": {
        const code = e.nak_code != null ? ` (NAK code ${e.nak_code})` : e.rnr_timer != null ? ` (RNR timer ${e.rnr_timer})` : "";
        return `${e.src} → ${e.dst} QP ${hex(e.dqp)}: ${e.cause}${code}, ${fmtInt(e.resent)} resent after ${fmtNs(e.stall_ns)} stall from PSN ${e.first_psn}`;
      }
      case "ce_without_cnp":
        return `${e.src} → ${e.dst} QP ${hex(e.dqp)}: ${fmtInt(e.ecn_ce)} CE marks and no CNP back; ${fmtInt(e.packets)} packets, ${fmtInt(e.reverse_packets)} back`;
    }
    return e.kind;
  }
  const eventClock = (ns) => { const d = new Date(Math.floor(ns / 1e6)); return isoDate(d) + " " + clock(d, 0.001); };

  function events(parent) {
    const kinds = D.event_kinds;
    const lanes = new Map(kinds.map((k, i) => [k, kinds.length - 1 - i])); // the first kind on top
    const evs = D.events;
    const counts = kinds.map((k) => `${fmtInt(evs.filter((e) => e.kind === k).length)} ${k}`).join(", ");
    const bars = []; // {e, x0, x1, y0, y1} in canvas pixels, as drawn last
    const first = x[0], last = x[nPoints - 1] + pointSecs; // the last point shown whole
    const focus = el("div", { class: "focus" });
    const u = chart(parent, "timeline", "Events",
      `Every event of the run, each once however many windows it spans, as a bar from its start to its end (at least 3 px wide; the time axis runs to the end of the last window): ${counts}.` +
      " Hover a bar to name it, click it to find it in the table below.",
      kinds.map((k) => ({ label: k, data: new Array(nPoints).fill(null), stroke: kindColour[k] || grey, points: { show: false } })),
      {
        height: 40 + 28 * kinds.length,
        scales: Object.assign({ y: { range: () => [0, kinds.length] } }, nPoints ? { x: { time: true, range: () => [first, last] } } : {}),
        axes: [{
          font: FONT, size: axisSize, grid: { show: false },
          splits: () => kinds.map((k, i) => i + 0.5),
          values: (u, splits) => splits.map((v) => kinds[kinds.length - 1 - Math.floor(v)] || ""),
        }],
        draw: (u, div) => {
          const ctx = u.ctx, b = u.bbox, px = uPlot.pxRatio;
          const drawn = {};
          bars.length = 0;
          ctx.save();
          ctx.beginPath();
          ctx.rect(b.left, b.top, b.width, b.height);
          ctx.clip();
          for (const e of evs) {
            let x0 = u.valToPos(e.start_ns / 1e9, "x", true), x1 = u.valToPos(e.end_ns / 1e9, "x", true);
            if (x1 - x0 < 3 * px) { const c = (x0 + x1) / 2; x0 = c - 1.5 * px; x1 = c + 1.5 * px; }
            const lane = lanes.get(e.kind);
            const y0 = u.valToPos(lane + 0.85, "y", true), y1 = u.valToPos(lane + 0.15, "y", true);
            ctx.fillStyle = kindColour[e.kind] || grey;
            ctx.fillRect(x0, y0, x1 - x0, y1 - y0);
            bars.push({ e, x0, x1, y0, y1 });
            drawn[e.kind] = (drawn[e.kind] || 0) + 1;
          }
          ctx.restore();
          div.dataset.bars = JSON.stringify(drawn);
        },
      });
    u.root.parentNode.parentNode.insertBefore(focus, u.root.parentNode);
    const at = (ev) => {
      const r = u.over.getBoundingClientRect(), px = uPlot.pxRatio;
      const cx = (ev.clientX - r.left) * px + u.bbox.left, cy = (ev.clientY - r.top) * px + u.bbox.top;
      return bars.find((b) => cx >= b.x0 - 2 * px && cx <= b.x1 + 2 * px && cy >= b.y0 && cy <= b.y1);
    };
    u.over.addEventListener("mousemove", (ev) => {
      const b = at(ev);
      focus.textContent = b ? `${b.e.kind} from ${eventClock(b.e.start_ns)} for ${fmtNs(b.e.end_ns - b.e.start_ns)}: ${eventWhat(b.e)}` : "";
    });
    u.over.addEventListener("click", (ev) => {
      const b = at(ev);
      const row = b && document.getElementById("event-" + b.e.id);
      if (!row) return;
      document.querySelectorAll("tr.picked[data-event]").forEach((r) => r.classList.remove("picked"));
      row.classList.add("picked");
      row.scrollIntoView({ behavior: "smooth", block: "center" });
    });

    const card = cardFor(parent, "Event list",
      "The events by start (UTC). An event's figures add up the windows it spans; the flows it names link to their rows in the flow table." +
      (D.events_refused ? ` The page keeps ${fmtInt(D.max_events)} events: ${fmtInt(D.events_refused)} more were left out.` : "") +
      (Object.keys(D.events_omitted).length ? " The reports did not list " +
        Object.entries(D.events_omitted).map(([k, n]) => `${fmtInt(n)} ${k}`).join(", ") + " (--max-events)." : ""));
    if (!evs.length) {
      card.append(el("p", { class: "empty", "data-table": "events" }, D.windows ? "No event: nothing went wrong by the rules." : "No window was reported."));
      return;
    }
    const tb = el("tbody");
    for (const e of evs.slice().sort((a, b) => a.start_ns - b.start_ns || (a.kind < b.kind ? -1 : 1))) {
      const links = el("td", { class: "text wrap" });
      const named = eventFlows(e);
      named.forEach((n, i) => {
        const f = flowAt.get(`${n.src} ${n.dst} ${n.dqp}`);
        const name = e.kind === "incast" ? `${n.src} ${hex(n.dqp)}` : hex(n.dqp);
        if (i > 0) links.append(" ");
        links.append(f ? el("a", { href: "#flow-" + f.rank, "data-flow": f.rank,
          onclick: (ev) => { ev.preventDefault(); if (pickFlow) pickFlow(f); } }, name) : el("span", { title: "not among the charted flows" }, name));
      });
      if (e.kind === "incast" && e.sender_count > named.length) links.append(` and ${fmtInt(e.sender_count - named.length)} more`);
      tb.append(el("tr", { id: "event-" + e.id, "data-event": e.id, "data-kind": e.kind },
        el("td", { class: "text" }, eventClock(e.start_ns)),
        el("td", {}, fmtNs(e.end_ns - e.start_ns)),
        el("td", { class: "text" }, el("i", { class: "swatch", style: "background:" + (kindColour[e.kind] || grey) }), e.kind),
        el("td", { class: "text wrap" }, eventWhat(e) + (e.ongoing ? " — going on at the end of the last window" : "")),
        el("td", {}, fmtInt(e.windows)),
        links));
    }
    card.append(el("div", { class: "tablewrap" }, el("table", { "data-table": "events" },
      el("thead", {}, el("tr", {}, ...["start (UTC)", "for", "kind", "what", "windows", "flows"].map((h, i) =>
        el("th", { class: i === 0 || i === 2 || i >= 3 && i !== 4 ? "text" : "" }, h)))), tb)));
  }

  // ---- flow table --------------------------------------------------------

  // parseQP reads a QP as an operator types it: hex with 0x (as Wireshark
  // and this page show it) or decimal (as the JSON and CSV reports hold
  // it); null if it is neither.
  function parseQP(s) {
    const t = s.trim().toLowerCase();
    const v = /^0x[0-9a-f]{1,6}$/.test(t) ? parseInt(t.slice(2), 16) : /^[0-9]{1,8}$/.test(t) ? parseInt(t, 10) : NaN;
    return v >= 0 && v < 1 << 24 ? v : null;
  }

  function flowTable(parent) {
    const card = cardFor(parent, "Flows",
      "Every charted flow; figures add up the windows that listed the flow (in the top list, or named by an event). Click a column to sort, a row to pick its line in the charts.");
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
    const search = el("input", { type: "search", class: "filter", placeholder: "QP (0x4bdaaf or 4971183) or address", "aria-label": "filter flows by QP or address",
      oninput: (e) => { filter = e.target.value; render(); } });
    const heads = cols.map(([name, key, , text], i) => el("th", {
      class: text ? "text" : "",
      onclick: () => sortBy(i),
    }, name));
    let sortCol = 5, asc = false, filter = "";
    // A filter keeps the flows whose QP (either end) is the one typed, in
    // hex or decimal, or whose address holds the text typed.
    const keep = (f) => {
      if (!filter) return true;
      const q = parseQP(filter);
      return q != null && (f.dqp === q || f.sqp === q) || f.src.includes(filter.trim()) || f.dst.includes(filter.trim());
    };
    function render() {
      tb.textContent = "";
      const frag = document.createDocumentFragment();
      for (const f of rows) {
        if (!keep(f)) continue;
        frag.append(el("tr", { id: "flow-" + f.rank, "data-rank": f.rank, onclick: () => pick(f) },
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
    // pick marks a flow's row and its line in the rate chart, and shows
    // the one or the other (scroll: "row" or "chart").
    function pick(f, scroll) {
      tb.querySelectorAll("tr.picked").forEach((r) => r.classList.remove("picked"));
      const row = tb.querySelector(`tr[data-rank="${f.rank}"]`);
      if (row) row.classList.add("picked");
      const rc = charts.find((c) => c.id === "flowrates");
      if (rc) rc.u.setSeries(f.rank + 1, { focus: true });
      const show = scroll === "row" ? row : rc && rc.div;
      if (show) show.scrollIntoView({ behavior: "smooth", block: "center" });
    }
    pickFlow = (f) => {
      if (!keep(f)) { filter = ""; search.value = ""; render(); }
      pick(f, "row");
    };
    render();
    if (!D.flows.length) {
      card.append(el("p", { class: "empty" }, "No flow made a top list."));
      return;
    }
    card.append(el("p", { class: "filterbar" }, el("label", {}, "Filter ", search)),
      el("div", { class: "tablewrap" }, el("table", { "data-table": "flows" }, el("thead", {}, el("tr", {}, ...heads)), tb)));
  }

  // ---- main --------------------------------------------------------------

  function empty(parent) {
    if (!D.windows) parent.append(el("p", { class: "card empty" }, "No window was reported: the input held no frames."));
  }

  // The sections of the page, in order.
  const sections = [header, empty, events, traffic, flowCharts, congestion, latency, opcodeMix, flowTable];
  for (const section of sections) section(root);

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

  // ---- header ------------------------------------------------------------

  function header(parent) {
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
    fact("Peak throughput", fmtRate(maxOf("gbps") * 1e9) + " · " + si(maxOf("mpps") * 1e6, "pps"));
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
    note("Times are UTC, in 24-hour time.");
    note("Exact: every frame, byte and event counter (frames, RoCE/other/malformed/truncated, CNP, ECN-CE, FECN/BECN, PFC, NAK, retransmits, PSN gaps, opcodes); nothing is skipped silently.");
    note(`Estimated: distinct flows per window (${D.flows_method || "sketch"}, stated error up to ±${(100 * D.flows_rel_err).toPrecision(2)}%), and the latency quantiles (quantile sketch).`);
    const est = D.windows - D.exact_windows;
    if (est > 0) note(`Per-flow figures are exact in ${fmtInt(D.exact_windows)} of ${fmtInt(D.windows)} windows; in ${fmtInt(est)} the QP tables overflowed and top lists include sketch estimates (marked est.).`, true);
    else if (D.windows) note("Per-flow figures are exact in every window: the QP tables held every flow.");
    if (D.point_windows > 1) note(`Downsampled: ${fmtInt(nPoints)} points of ${fmtInt(D.point_windows)} windows each (at most ${fmtInt(D.max_points)} per series). Counts are summed over a point's windows; rates, flow counts and latency quantiles show the largest window of the point, and throughput its smallest too.`, true);
    else note("One point per window: nothing is downsampled.");
    note(`Flows charted: the union of every window's top list and of the flows its events name, ${fmtInt(D.flows.length)} flows (at most ${fmtInt(D.max_flows)}). A flow's table figures add up the windows that listed it.`);
    if (D.flows_evicted || D.flows_refused) note(`The flow cap was reached: ${fmtInt(D.flows_evicted)} times a charted flow made room for a larger one, and ${fmtInt(D.flows_refused)} top-list entries of smaller flows were left out.`, true);
    card.append(notes);
    parent.append(card);
  }
})();
