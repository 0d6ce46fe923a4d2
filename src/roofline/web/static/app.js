// The workshop page. It keeps the view, the controls, the URL and the API request in step, and
// places on the page the numbers and text that /api/layer, /api/model, /api/decode or /api/serving returns. It
// computes nothing: every time, ratio, share, roof, axis range and sentence comes from the library
// through the API.
"use strict";

(() => {
  const COLORS = { memory: "#d62728", compute: "#1f77b4" };
  const BOUNDS = ["memory", "compute"];
  // Query parameter -> the control that types it and, where there is one, its slider.
  const CONTROLS = {
    machine: { input: "machine" },
    model: { input: "model" },
    layer: { input: "layer" },
    phase: { input: "phase" },
    attention: { input: "attention" },
    tokens: { input: "tokens-number", slider: "tokens", stops: true },
    batch: { input: "batch" },
    compute_efficiency: { input: "compute-efficiency-number", slider: "compute-efficiency" },
    memory_efficiency: { input: "memory-efficiency-number", slider: "memory-efficiency" },
    launch_overhead_us: { input: "launch-overhead-number", slider: "launch-overhead" },
    overlap: { input: "overlap-number", slider: "overlap" },
    dtype: { input: "dtype" },
    input_len: { input: "input-len" },
    output_len: { input: "output-len" },
    max_users: { input: "max-users" },
    slo_ttft_ms: { input: "slo-ttft" },
    slo_tpot_ms: { input: "slo-tpot" },
  };
  // API parameters with no control, kept when in the URL
  const PASS_THROUGH = ["context", "tp", "max_seqs", "max_tokens", "memory_fraction", "prefix_hit", "percentile",
    "price_per_gpu_hour"];
  // Parameters whose empty value means "none": left out of the API's query. A target left empty stays
  // in the page's URL as `slo_ttft_ms=` (no target), since an absent one is the page's default.
  const OPTIONAL = new Set(["dtype", "slo_ttft_ms", "slo_tpot_ms"]);
  const EMPTY_IN_URL = new Set(["slo_ttft_ms", "slo_tpot_ms"]);
  // The views: which endpoint each reads and how it is drawn (the draw functions are below).
  const VIEWS = {
    layer: { endpoint: "/api/layer", draw: (data) => drawLayer(data) },
    model: { endpoint: "/api/model", draw: (data) => drawModel(data) },
    decode: { endpoint: "/api/decode", draw: (data) => drawDecode(data) },
    serving: { endpoint: "/api/serving", draw: (data) => drawServing(data) },
  };
  const FONT = { family: "system-ui, sans-serif", size: 12 };
  const SHIFT = { left: 4, right: -4 }; // a label's pixel gap from the mark it is anchored to
  const PLOT_CONFIG = { displaylogo: false, responsive: true, showSendToCloud: false, showEditInChartStudio: false,
    modeBarButtonsToRemove: ["lasso2d", "select2d", "sendDataToCloud"] };

  const $ = (id) => document.getElementById(id);
  let defaults = {};
  let tokenStops = [];
  let state = {};
  let view = "layer";
  let requestSeq = 0;
  let renderCount = 0;
  let inFlight = null;
  let machineDetail = new Map();
  let modelKinds = new Map(); // each model's layer kinds: [{kind, count, first_layer}]
  let machineLaunchUs = new Map(); // each machine's preset launch overhead, the CLI's default
  let viewAttention = {}; // each view's default attention, as its CLI command has it
  let viewParameters = {}; // the query parameters each view's endpoint takes (from /api/options)
  const touched = new Set(); // controls the user set (from the URL or by hand): never re-defaulted

  async function getJSON(url) {
    const resp = await fetch(url);
    if (!resp.ok) throw new Error(`${url}: HTTP ${resp.status}`);
    return resp.json();
  }

  // -- state <-> URL <-> controls ---------------------------------------------------------------

  // The names the shown view's endpoint takes, in the controls' order.
  function viewNames() {
    const takes = new Set(viewParameters[view] || []);
    return [...Object.keys(CONTROLS), ...PASS_THROUGH].filter((name) => takes.has(name));
  }

  // The API's query: the controls' values that the view's endpoint takes (the view is the page's,
  // not the API's); an empty optional value is left out.
  function query() {
    const qs = new URLSearchParams();
    for (const name of viewNames()) {
      const value = state[name];
      if (value === undefined || value === null || (value === "" && OPTIONAL.has(name))) continue;
      qs.set(name, value);
    }
    return qs.toString();
  }

  // The page's URL: the view, the API's query and the targets left empty on purpose.
  function pageQuery(apiQuery) {
    const empty = viewNames().filter((name) => EMPTY_IN_URL.has(name) && state[name] === "");
    return [`view=${view}`, apiQuery, ...empty.map((name) => `${name}=`)].filter((part) => part !== "").join("&");
  }

  function viewFromUrl() {
    const v = new URLSearchParams(window.location.search).get("view");
    return v && VIEWS[v] ? v : "layer";
  }

  function stateFromUrl() {
    const url = new URLSearchParams(window.location.search);
    const out = {};
    for (const [name, value] of Object.entries(defaults)) out[name] = String(value);
    for (const name of [...Object.keys(CONTROLS), ...PASS_THROUGH]) {
      if (url.has(name)) out[name] = url.get(name);
    }
    return out;
  }

  // The slider position of a token count: the first stop at or above it (a look-up, no scale).
  function stopIndex(value) {
    const v = Number(value);
    const i = tokenStops.findIndex((s) => s >= v);
    return i < 0 ? tokenStops.length - 1 : i;
  }

  // The layer choice: one layer of each kind of the chosen model, hidden for a model of one kind.
  function fillLayers() {
    const kinds = modelKinds.get(state.model) || [];
    const select = $("layer");
    select.replaceChildren();
    for (const k of kinds) {
      const option = document.createElement("option");
      option.value = String(k.first_layer);
      option.textContent = `layer ${k.first_layer}: ${k.kind} (${k.count} layers)`;
      select.append(option);
    }
    $("layer-control").hidden = kinds.length < 2 || view === "serving";
    if (kinds.length < 2) {
      delete state.layer;
    } else if (!kinds.some((k) => String(k.first_layer) === state.layer) && !touched.has("layer")) {
      state.layer = String(kinds[0].first_layer);
    }
  }

  function showControls() {
    fillLayers();
    for (const [name, c] of Object.entries(CONTROLS)) {
      const value = state[name] ?? "";
      $(c.input).value = value;
      if (c.slider) $(c.slider).value = c.stops ? stopIndex(value) : value;
    }
    $("machine-detail").textContent = machineDetail.get(state.machine) || "";
    $("tokens-label").textContent = state.phase === "decode" || view === "decode"
      ? "Context, S (tokens already in the KV cache)"
      : "Tokens per sequence, T";
    $("phase").disabled = view === "decode"; // decode versus batch is decode whatever the phase
    $("workload-controls").hidden = view === "serving"; // serving has its own workload: lengths and users
    $("serving-controls").hidden = view !== "serving";
    $("slo-hint").textContent = `at the ${state.percentile ? `p${state.percentile}` : "p90"} of each point; empty: no target`;
  }

  function showView() {
    for (const tab of document.querySelectorAll("[role=tab]")) {
      const on = tab.dataset.view === view;
      tab.setAttribute("aria-selected", on ? "true" : "false");
      tab.tabIndex = on ? 0 : -1;
      $(`panel-${tab.dataset.view}`).hidden = !on;
      if (on) $("scope").textContent = tab.dataset.scope;
    }
    $("download-csv").hidden = view !== "layer";
    document.body.dataset.view = view;
  }

  // What a control the user has not set follows: the machine's launch overhead, the view's attention.
  function followDefaults() {
    if (!touched.has("launch_overhead_us") && machineLaunchUs.has(state.machine)) {
      state.launch_overhead_us = String(machineLaunchUs.get(state.machine));
    }
    if (!touched.has("attention") && viewAttention[view]) state.attention = viewAttention[view];
  }

  function setView(next) {
    if (next === view || !VIEWS[next]) return;
    view = next;
    followDefaults();
    showView();
    showControls();
    update();
  }

  function set(name, value) {
    if (state[name] === String(value)) return; // Enter and change both report a typed value
    state[name] = String(value);
    if (name === "model") touched.delete("layer"); // a new model starts at its first layer kind
    if (name !== "machine" && name !== "model") touched.add(name);
    followDefaults();
    showControls();
    update();
  }

  function bindControls() {
    for (const [name, c] of Object.entries(CONTROLS)) {
      const input = $(c.input);
      input.addEventListener("change", () => set(name, input.value));
      if (input.type === "number") {
        input.addEventListener("keydown", (e) => { if (e.key === "Enter") set(name, input.value); });
      }
      if (c.slider) {
        const slider = $(c.slider);
        slider.addEventListener("input", () => set(name, c.stops ? tokenStops[Number(slider.value)] : slider.value));
      }
    }
    for (const tab of document.querySelectorAll("[role=tab]")) {
      tab.addEventListener("click", () => setView(tab.dataset.view));
      tab.addEventListener("keydown", (e) => {
        const tabs = [...document.querySelectorAll("[role=tab]")];
        const at = tabs.indexOf(tab);
        const to = { ArrowRight: tabs[at + 1] || tabs[0], ArrowLeft: tabs[at - 1] || tabs[tabs.length - 1] }[e.key];
        if (to) { to.focus(); setView(to.dataset.view); }
      });
    }
    $("reset").addEventListener("click", () => {
      state = {};
      touched.clear();
      for (const [name, value] of Object.entries(defaults)) state[name] = String(value);
      followDefaults();
      showControls();
      update();
    });
  }

  function fillSelect(id, items, group) {
    const select = $(id);
    select.replaceChildren();
    const groups = new Map();
    for (const item of items) {
      const key = group ? group(item) : "";
      if (!groups.has(key)) groups.set(key, []);
      groups.get(key).push(item);
    }
    for (const [label, members] of groups) {
      const parent = label ? document.createElement("optgroup") : select;
      if (label) { parent.label = label; select.appendChild(parent); }
      for (const item of members) {
        const opt = document.createElement("option");
        opt.value = item.key;
        opt.textContent = item.label;
        parent.appendChild(opt);
      }
    }
  }

  // -- the request ------------------------------------------------------------------------------

  async function update() {
    const qs = query();
    const shown = view;
    const pageQs = pageQuery(qs);
    window.history.replaceState(null, "", `${window.location.pathname}?${pageQs}`);
    $("download-csv").href = `/api/layer.csv?${qs}`;
    $("download-json").href = shown === "layer" ? `/api/layer.json?${qs}` : `${VIEWS[shown].endpoint}?${qs}`;
    $("download-json").download = shown === "layer" ? "" : `roofline-${shown}.json`;
    const seq = ++requestSeq;
    if (inFlight) inFlight.abort();
    inFlight = new AbortController();
    let resp, body;
    try {
      resp = await fetch(`${VIEWS[shown].endpoint}?${qs}`, { signal: inFlight.signal });
      body = await resp.json();
    } catch (err) {
      if (err.name !== "AbortError" && seq === requestSeq) showError(String(err), null);
      return;
    }
    if (seq !== requestSeq) return; // a newer change is on its way
    if (!resp.ok) {
      const detail = (body.detail || []).map((d) => `${(d.loc || []).slice(-1)[0]}: ${d.msg}`).join("; ");
      showError(detail || `HTTP ${resp.status}`, body.field);
      return;
    }
    showError(null, null);
    await render(shown, body, pageQs);
  }

  function showError(message, field) {
    const box = $("error");
    box.hidden = !message;
    box.textContent = message || "";
    for (const c of Object.values(CONTROLS)) $(c.input).removeAttribute("aria-invalid");
    if (field && CONTROLS[field]) $(CONTROLS[field].input).setAttribute("aria-invalid", "true");
    document.body.dataset.error = message ? "1" : "";
  }

  // -- drawing ----------------------------------------------------------------------------------

  function setText(id, text) { $(id).textContent = text; }

  function showReadouts(data) {
    const t = data.readouts.text;
    setText("total", t.total);
    setText("flops-only", t.flops_only);
    setText("flops-ratio", t.flops_ratio);
    setText("bytes-only", t.bytes_only);
    setText("bytes-ratio", t.bytes_ratio);
    setText("memory-bound", t.memory_bound);
    setText("memory-share", t.memory_share);
    setText("launch-share", t.launch_share);
    setText("launch-total", t.launch);
    setText("sentence", data.sentence);
    setText("config-note", data.caption);
  }

  function pick(series, keep, fields) {
    const idx = series.bound.map((b, i) => (b === keep ? i : -1)).filter((i) => i >= 0);
    const out = {};
    for (const f of fields) out[f] = idx.map((i) => series[f][i]);
    return out;
  }

  function drawLayer(data) {
    showReadouts(data);
    return Promise.all([drawBars(data.chart), drawRoofline(data.roofline)]);
  }

  function drawBars(chart) {
    const traces = BOUNDS.map((bound) => {
      const s = pick(chart, bound, ["labels", "time_us", "time_text", "hover"]);
      return {
        type: "bar", orientation: "h", name: `${bound}-bound`,
        y: s.labels, x: s.time_us, text: s.time_text, textposition: "outside", cliponaxis: false,
        hovertext: s.hover, hovertemplate: "%{hovertext}<extra></extra>",
        marker: { color: COLORS[bound] }, textfont: { size: 11 },
      };
    });
    const layout = {
      barmode: "stack", showlegend: false, bargap: 0.25,
      margin: { l: 8, r: 56, t: 8, b: 44 },
      xaxis: { title: { text: "predicted time (µs)" }, rangemode: "tozero", separatethousands: true, automargin: true },
      yaxis: { type: "category", categoryorder: "array", categoryarray: chart.labels, autorange: "reversed", automargin: true },
      hoverlabel: { align: "left" },
      font: FONT,
    };
    return Plotly.react("chart", traces, layout, PLOT_CONFIG);
  }

  function drawRoofline(roof) {
    const ops = roof.ops;
    const traces = [
      { x: roof.intensity, y: roof.roof_tflops_per_s, mode: "lines", name: `${roof.machine_name} roof`,
        line: { color: "#2b2f36", width: 2.5 }, hoverinfo: "skip" },
      { x: roof.intensity, y: roof.achievable_tflops_per_s, mode: "lines", name: "achievable (e_c, e_m)",
        line: { color: "#8a94a3", width: 1.5, dash: "dash" }, hoverinfo: "skip" },
      { x: [roof.ridge_flop_per_byte], y: [roof.peak_tflops_per_s], mode: "markers", name: "ridge",
        marker: { symbol: "diamond", size: 9, color: "#2b2f36" },
        hovertext: [`${roof.ridge_text}<br>${roof.peak_text}`], hovertemplate: "%{hovertext}<extra></extra>" },
      ...BOUNDS.map((bound) => {
        const s = pick(ops, bound, ["labels", "intensity", "tflops_per_s", "hover"]);
        return {
          x: s.intensity, y: s.tflops_per_s, mode: "markers", name: `${bound}-bound ops`,
          marker: { color: COLORS[bound], size: 9, line: { color: "#fff", width: 1 } },
          hovertext: s.hover, hovertemplate: "%{hovertext}<extra></extra>",
        };
      }),
    ];
    const layout = {
      margin: { l: 8, r: 12, t: 8, b: 44 },
      xaxis: { type: "log", title: { text: "arithmetic intensity (FLOP/byte)" }, automargin: true, dtick: 1, exponentformat: "SI" },
      yaxis: { type: "log", title: { text: "TFLOP/s" }, automargin: true, dtick: 1, exponentformat: "none" },
      legend: { x: 0.01, y: 0.99, xanchor: "left", yanchor: "top", font: { size: 11 },
        bgcolor: "rgba(255,255,255,0.85)", bordercolor: "#dde2e8", borderwidth: 1 },
      shapes: [{ type: "line", xref: "x", yref: "paper", x0: roof.ridge_flop_per_byte, x1: roof.ridge_flop_per_byte,
        y0: 0, y1: 1, line: { color: "#8a94a3", width: 1, dash: "dot" } }],
      annotations: [{ xref: "x", yref: "paper", x: roof.ridge_log10 /* Plotly places log-axis annotations by log10 */, y: 0.02, xanchor: "left",
        yanchor: "bottom", text: roof.ridge_text, showarrow: false, font: { size: 11, color: "#5b6573" } }],
      hoverlabel: { align: "left" },
      font: FONT,
    };
    return Plotly.react("roofline", traces, layout, PLOT_CONFIG);
  }

  // -- the whole model --------------------------------------------------------------------------

  function showCards(prefix, text, names) {
    for (const name of names) {
      const id = `${prefix}-${name.replaceAll("_", "-")}`;
      if (text[name] !== undefined && $(id)) setText(id, text[name]);
    }
  }

  function drawModel(data) {
    const t = data.readouts.text;
    showCards("model", t, ["latency_name", "latency", "latency_sub", "throughput_name", "throughput", "throughput_sub",
      "bound", "bound_sub", "bytes_name", "bytes", "bytes_sub", "memory", "memory_sub"]);
    setText("model-sentence", data.sentence);
    $("model-fit").dataset.state = data.fit.state;
    setText("model-fit-mark", data.fit.mark);
    $("model-fit").title = data.fit.headline;
    setText("model-fit-text", data.fit.text);
    setText("model-limits", data.memory_limits_text);
    setText("model-note", data.caption);
    return Promise.all([drawParts(data.parts_chart), drawMemory(data.memory_chart)]);
  }

  function drawParts(chart) {
    const traces = [["memory", chart.memory_ms], ["compute", chart.compute_ms]].map(([bound, x]) => ({
      type: "bar", orientation: "h", name: `${bound}-bound`, y: chart.labels, x,
      hovertext: chart.hover, hovertemplate: "%{hovertext}<extra></extra>", marker: { color: chart.colors[bound] },
    }));
    const layout = {
      barmode: "stack", showlegend: false, bargap: 0.35,
      margin: { l: 8, r: 16, t: 8, b: 44 },
      xaxis: { title: { text: "predicted time (ms)" }, range: [0, chart.x_max_ms], separatethousands: true, automargin: true },
      yaxis: { type: "category", categoryorder: "array", categoryarray: chart.labels, autorange: "reversed", automargin: true },
      annotations: chart.labels.map((label, i) => ({
        x: chart.total_ms[i], y: label, text: chart.text[i], xanchor: "left", showarrow: false, xshift: 4,
        font: { size: 11 } })),
      hoverlabel: { align: "left" },
      font: FONT,
    };
    return Plotly.react("model-parts", traces, layout, PLOT_CONFIG);
  }

  function drawMemory(chart) {
    const traces = chart.segments.map((seg) => ({
      type: "bar", orientation: "h", name: seg.name, y: [chart.label], x: [seg.gb], marker: { color: seg.color },
      hovertext: [seg.hover], hovertemplate: "%{hovertext}<extra></extra>",
    }));
    const notFit = chart.fits === false;
    const annotations = [{ x: chart.total_gb, y: chart.label, text: chart.total_text, xanchor: "left", xshift: 4,
      showarrow: false, font: { size: 12, color: notFit ? COLORS.memory : "#1d232b" } }];
    const shapes = [];
    if (chart.capacity_gb !== null) {
      shapes.push({ type: "line", xref: "x", yref: "paper", x0: chart.capacity_gb, x1: chart.capacity_gb, y0: 0, y1: 1,
        line: { color: "#1d232b", width: 1.5, dash: "dash" } });
      annotations.push({ x: chart.capacity_gb, y: 1, xref: "x", yref: "paper", text: chart.capacity_text,
        xanchor: chart.capacity_anchor, yanchor: "top", xshift: SHIFT[chart.capacity_anchor], showarrow: false,
        font: { size: 11, color: "#5b6573" } });
    }
    const layout = {
      barmode: "stack", showlegend: false, bargap: 0.45,
      margin: { l: 8, r: 16, t: 8, b: 44 },
      xaxis: { title: { text: "memory per GPU (GB)" }, range: [0, chart.x_max_gb], automargin: true, separatethousands: true },
      yaxis: { automargin: true, showticklabels: false },
      shapes, annotations,
      hoverlabel: { align: "left" },
      font: FONT,
    };
    return Plotly.react("model-memory-chart", traces, layout, PLOT_CONFIG);
  }

  // -- decode versus batch ----------------------------------------------------------------------

  function drawDecode(data) {
    const t = data.readouts.text;
    showCards("decode", t, ["step_name", "step", "step_sub", "throughput_name", "throughput", "throughput_sub",
      "compute_bound", "compute_bound_sub", "max_batch", "max_batch_sub", "kv", "kv_sub"]);
    setText("decode-sentence", data.sentence);
    setText("decode-note", data.caption);
    const c = data.chart;
    return Promise.all([
      drawBatchCurve("decode-throughput-chart", c, "tokens_per_s"),
      drawBatchCurve("decode-latency-chart", c, "step_ms"),
    ]);
  }

  // One quantity against batch on a log-2 axis: the curve, the tabulated batches coloured by the
  // step's bound, the page's batch, the compute-bound batch and the region that does not fit.
  function drawBatchCurve(id, c, field) {
    const axis = c.axes[field];
    const title = axis.title;
    const traces = [
      { x: c.batch, y: c[field], mode: "lines", name: title, line: { color: "#2b2f36", width: 2 },
        hovertext: c.hover, hovertemplate: "%{hovertext}<extra></extra>" },
      ...BOUNDS.map((bound) => {
        const s = pick(c.points, bound, ["batch", field, "hover"]);
        return { x: s.batch, y: s[field], mode: "markers", name: `${bound}-bound step`,
          marker: { color: c.colors[bound], size: 8, line: { color: "#fff", width: 1 } },
          hovertext: s.hover, hovertemplate: "%{hovertext}<extra></extra>" };
      }),
      { x: [c.here.batch], y: [c.here[field]], mode: "markers+text", name: "this batch", text: [c.here.text],
        textposition: c.here.textposition, marker: { symbol: "circle-open", size: 16, color: "#2b2f36", line: { width: 2 } },
        hovertext: [c.here.hover], hovertemplate: "%{hovertext}<extra></extra>", cliponaxis: false },
    ];
    const shapes = [];
    const annotations = [];
    if (c.no_fit_from !== null) {
      shapes.push({ type: "rect", xref: "x", yref: "paper", x0: c.no_fit_from, x1: c.x_end, y0: 0, y1: 1,
        fillcolor: "#d9d9d9", opacity: 0.55, line: { width: 0 }, layer: "below" });
      annotations.push({ xref: "x", yref: "paper", x: c.no_fit_log10, y: axis.note_y, yanchor: axis.note_yanchor,
        xanchor: c.no_fit_anchor,
        xshift: SHIFT[c.no_fit_anchor],
        text: c.no_fit_text, showarrow: false, align: "left", font: { size: 11, color: "#4d4d4d" } });
    }
    if (c.compute_bound_batch !== null) {
      shapes.push({ type: "line", xref: "x", yref: "paper", x0: c.compute_bound_batch, x1: c.compute_bound_batch, y0: 0, y1: 1,
        line: { color: c.colors.compute, width: 1.5, dash: "dash" } });
      annotations.push({ xref: "x", yref: "paper", x: c.compute_bound_log10, y: 0.03, xanchor: c.compute_bound_anchor,
        yanchor: "bottom", xshift: SHIFT[c.compute_bound_anchor], text: c.compute_bound_text, showarrow: false,
        align: c.compute_bound_anchor,
        font: { size: 11, color: c.colors.compute } });
    }
    const layout = {
      showlegend: false,
      margin: { l: 8, r: 16, t: 12, b: 44 },
      xaxis: { type: "log", range: c.x_range_log10, tickvals: c.ticks.values, ticktext: c.ticks.text,
        title: { text: "batch (sequences decoding together)" }, automargin: true },
      yaxis: { type: axis.type, title: { text: title }, automargin: true, separatethousands: true,
        range: axis.range, tickvals: axis.tickvals, ticktext: axis.ticktext },
      shapes, annotations,
      hoverlabel: { align: "left" },
      font: FONT,
    };
    return Plotly.react(id, traces, layout, PLOT_CONFIG);
  }

  // -- serving ---------------------------------------------------------------------------------

  // The entries of each field of ``series`` where ``keep(i)`` holds.
  function where(series, keep, fields) {
    const idx = series.users.map((_, i) => (keep(i) ? i : -1)).filter((i) => i >= 0);
    const out = {};
    for (const f of fields) out[f] = idx.map((i) => series[f][i]);
    return out;
  }

  function drawServing(data) {
    const t = data.readouts.text;
    showCards("serving", t, ["best_name", "best", "best_sub", "gpu", "gpu_sub", "user", "user_sub", "ttft_name", "ttft",
      "ttft_sub", "tpot_name", "tpot", "tpot_sub"]);
    setText("serving-sentence", data.sentence);
    $("serving-verdict").dataset.state = data.verdict.state;
    $("serving-verdict").title = data.verdict.headline;
    setText("serving-verdict-mark", data.verdict.mark);
    setText("serving-verdict-text", data.verdict.text);
    $("serving-curve-key").hidden = data.verdict.state === "none"; // no targets: nothing met or missed
    setText("serving-note", data.caption);
    const notes = $("serving-notes");
    notes.replaceChildren(...data.notes.map((n) => { const li = document.createElement("li"); li.textContent = n; return li; }));
    drawBreakdown(data.breakdown);
    return Promise.all([drawServingCurve(data.chart), drawServingLatency(data.latency_chart)]);
  }

  function drawBreakdown(b) {
    setText("serving-breakdown-title", b.title);
    const body = $("serving-breakdown").tBodies[0];
    body.replaceChildren(...b.table.map((row) => {
      const tr = document.createElement("tr");
      for (const [field, cls] of [["name", ""], ["runs", "num"], ["time", "num"], ["share", "num"], ["bound", row.bound]]) {
        const td = document.createElement("td");
        td.textContent = row[field];
        if (cls) td.className = cls;
        tr.append(td);
      }
      return tr;
    }));
  }

  // Throughput per GPU against the speed each user sees: a point per concurrency, labelled by its
  // users, filled where it meets the targets, the best one ringed.
  function drawServingCurve(c) {
    const fields = ["per_user_tokens_per_s", "output_tokens_per_s_per_gpu", "text", "hover"];
    const group = (keep, name, marker) => {
      const s = where(c, keep, fields);
      return { x: s.per_user_tokens_per_s, y: s.output_tokens_per_s_per_gpu, text: s.text, mode: "markers+text", name,
        textposition: "top right", textfont: { size: 11, color: "#4d4d4d" }, marker, cliponaxis: false,
        hovertext: s.hover, hovertemplate: "%{hovertext}<extra></extra>" };
    };
    const traces = [
      { x: c.per_user_tokens_per_s, y: c.output_tokens_per_s_per_gpu, mode: "lines", name: "the sweep",
        line: { color: c.colors.line, width: 1.5 }, hoverinfo: "skip" },
      group((i) => c.meets_slo[i], "meets the targets", { color: c.colors.meets, size: 10, line: { color: "#fff", width: 1 } }),
      group((i) => !c.meets_slo[i], "misses the targets",
        { symbol: "circle-open", color: c.colors.misses, size: 10, line: { width: 2 } }),
    ];
    if (c.best !== null) {
      traces.push({ x: [c.per_user_tokens_per_s[c.best]], y: [c.output_tokens_per_s_per_gpu[c.best]], mode: "markers",
        name: "best within the targets", marker: { symbol: "circle-open", size: 20, color: "#2b2f36", line: { width: 2 } },
        hovertext: [c.hover[c.best]], hovertemplate: "%{hovertext}<extra></extra>" });
    }
    const annotations = c.empty_text === null ? [] : [{ xref: "paper", yref: "paper", x: 0.5, y: 0.5, text: c.empty_text,
      showarrow: false, font: { size: 12, color: "#5b6573" } }];
    const layout = {
      showlegend: false,
      margin: { l: 8, r: 24, t: 12, b: 44 },
      xaxis: { title: { text: c.x_title }, range: c.x_range, automargin: true, separatethousands: true },
      yaxis: { title: { text: c.y_title }, range: c.y_range, automargin: true, separatethousands: true },
      annotations,
      hoverlabel: { align: "left" },
      font: FONT,
    };
    return Plotly.react("serving-curve-chart", traces, layout, PLOT_CONFIG);
  }

  // TTFT p50 and p99 and TPOT p50 against users on log axes, the targets as dotted lines.
  function drawServingLatency(c) {
    const line = (field, name, color, dash) => ({ x: c.users, y: c[field], mode: "lines+markers", name,
      line: { color, width: 2, dash }, marker: { color, size: 6 },
      hovertext: c.hover[field], hovertemplate: "%{hovertext}<extra></extra>" });
    const traces = [
      line("ttft_p50_ms", "TTFT p50", c.colors.ttft, "solid"),
      line("ttft_p99_ms", "TTFT p99", c.colors.ttft, "dash"),
      line("tpot_p50_ms", "TPOT p50", c.colors.tpot, "solid"),
    ];
    const shapes = c.targets.map((target) => ({ type: "line", xref: "paper", yref: "y", x0: 0, x1: 1, y0: target.ms,
      y1: target.ms, line: { color: target.color, width: 1.5, dash: "dot" } }));
    const annotations = c.targets.map((target) => ({ xref: "paper", yref: "y", x: 0.99, y: target.ms_log10, xanchor: "right",
      yanchor: "bottom", text: target.text, showarrow: false, font: { size: 11, color: target.color } }));
    const layout = {
      margin: { l: 8, r: 16, t: 12, b: 44 },
      legend: { x: 0.01, y: 0.99, xanchor: "left", yanchor: "top", font: { size: 11 },
        bgcolor: "rgba(255,255,255,0.85)", bordercolor: "#dde2e8", borderwidth: 1 },
      xaxis: { type: "log", range: c.x_range_log10, tickvals: c.ticks.values, ticktext: c.ticks.text,
        title: { text: "concurrent users (closed loop)" }, automargin: true },
      yaxis: { type: "log", range: c.y_range_log10, tickvals: c.y_ticks.values, ticktext: c.y_ticks.text,
        title: { text: "ms" }, automargin: true },
      shapes, annotations,
      hoverlabel: { align: "left" },
      font: FONT,
    };
    return Plotly.react("serving-latency-chart", traces, layout, PLOT_CONFIG);
  }

  // -- after each draw --------------------------------------------------------------------------

  async function render(shown, data, pageQs) {
    await VIEWS[shown].draw(data);
    renderCount += 1;
    document.body.dataset.renderCount = String(renderCount);
    document.body.dataset.query = pageQs;
    document.body.dataset.renderedView = shown;
    document.dispatchEvent(new CustomEvent("roofline:rendered", { detail: { count: renderCount, query: pageQs, view: shown } }));
  }

  // -- start ------------------------------------------------------------------------------------

  async function start() {
    try {
      const [machines, models, options] = await Promise.all(
        ["/api/machines", "/api/models", "/api/options"].map(getJSON));
      defaults = { ...options.defaults, ...(options.serving_defaults || {}) };
      viewParameters = options.view_parameters || {};
      tokenStops = options.token_stops;
      fillSelect("dtype", [{ key: "", label: "the machine's default" },
        ...(options.plan_dtypes || []).map((d) => ({ key: d, label: d }))]);
      $("tokens").max = String(tokenStops.length - 1);
      fillSelect("machine", machines, (m) => (m.origin === "preset" ? "Presets" : `From ${m.origin}`));
      fillSelect("model", models);
      machineDetail = new Map(machines.map((m) => [m.key, m.detail]));
      modelKinds = new Map(models.map((m) => [m.key, m.layer_kinds]));
      machineLaunchUs = new Map(machines.map((m) => [m.key, m.launch_overhead_us]));
      viewAttention = options.view_attention || {};
      state = stateFromUrl();
      const url = new URLSearchParams(window.location.search);
      for (const name of ["launch_overhead_us", "attention", "layer"]) if (url.has(name)) touched.add(name);
      view = viewFromUrl();
      followDefaults();
      showView();
      showControls();
      bindControls();
      await update();
    } catch (err) {
      showError(`Could not start: ${err}`, null);
    }
  }

  if (document.readyState === "loading") document.addEventListener("DOMContentLoaded", start);
  else start();
})();
