// The workshop page. It keeps the controls, the URL and the API request in step, and places on
// the page the numbers and text that /api/layer returns. It computes nothing: every time, ratio,
// share, roof and sentence comes from the library through the API.
"use strict";

(() => {
  const COLORS = { memory: "#d62728", compute: "#1f77b4" };
  const BOUNDS = ["memory", "compute"];
  // Query parameter -> the control that types it and, where there is one, its slider.
  const CONTROLS = {
    machine: { input: "machine" },
    model: { input: "model" },
    phase: { input: "phase" },
    attention: { input: "attention" },
    tokens: { input: "tokens-number", slider: "tokens", stops: true },
    batch: { input: "batch" },
    compute_efficiency: { input: "compute-efficiency-number", slider: "compute-efficiency" },
    memory_efficiency: { input: "memory-efficiency-number", slider: "memory-efficiency" },
    launch_overhead_us: { input: "launch-overhead-number", slider: "launch-overhead" },
    overlap: { input: "overlap-number", slider: "overlap" },
  };
  const PASS_THROUGH = ["context", "dtype"]; // API parameters with no control, kept when in the URL
  const PLOT_CONFIG = { displaylogo: false, responsive: true, modeBarButtonsToRemove: ["lasso2d", "select2d"] };

  const $ = (id) => document.getElementById(id);
  let defaults = {};
  let tokenStops = [];
  let state = {};
  let requestSeq = 0;
  let renderCount = 0;
  let inFlight = null;
  let machineDetail = new Map();

  async function getJSON(url) {
    const resp = await fetch(url);
    if (!resp.ok) throw new Error(`${url}: HTTP ${resp.status}`);
    return resp.json();
  }

  // -- state <-> URL <-> controls ---------------------------------------------------------------

  function query() {
    const qs = new URLSearchParams();
    for (const name of [...Object.keys(CONTROLS), ...PASS_THROUGH]) {
      if (state[name] !== undefined && state[name] !== null) qs.set(name, state[name]);
    }
    return qs.toString();
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

  function showControls() {
    for (const [name, c] of Object.entries(CONTROLS)) {
      const value = state[name] ?? "";
      $(c.input).value = value;
      if (c.slider) $(c.slider).value = c.stops ? stopIndex(value) : value;
    }
    $("machine-detail").textContent = machineDetail.get(state.machine) || "";
    $("tokens-label").textContent = state.phase === "decode"
      ? "Context, S (tokens already in the KV cache)"
      : "Tokens per sequence, T";
  }

  function set(name, value) {
    if (state[name] === String(value)) return; // Enter and change both report a typed value
    state[name] = String(value);
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
    $("reset").addEventListener("click", () => {
      state = {};
      for (const [name, value] of Object.entries(defaults)) state[name] = String(value);
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
    window.history.replaceState(null, "", `${window.location.pathname}?${qs}`);
    $("download-csv").href = `/api/layer.csv?${qs}`;
    $("download-json").href = `/api/layer.json?${qs}`;
    const seq = ++requestSeq;
    if (inFlight) inFlight.abort();
    inFlight = new AbortController();
    let resp, body;
    try {
      resp = await fetch(`/api/layer?${qs}`, { signal: inFlight.signal });
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
    await render(body, qs);
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
      font: { family: "system-ui, sans-serif", size: 12 },
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
      font: { family: "system-ui, sans-serif", size: 12 },
    };
    return Plotly.react("roofline", traces, layout, PLOT_CONFIG);
  }

  async function render(data, qs) {
    showReadouts(data);
    await Promise.all([drawBars(data.chart), drawRoofline(data.roofline)]);
    renderCount += 1;
    document.body.dataset.renderCount = String(renderCount);
    document.body.dataset.query = qs;
    document.dispatchEvent(new CustomEvent("roofline:rendered", { detail: { count: renderCount, query: qs } }));
  }

  // -- start ------------------------------------------------------------------------------------

  async function start() {
    try {
      const [machines, models, options] = await Promise.all(
        ["/api/machines", "/api/models", "/api/options"].map(getJSON));
      defaults = options.defaults;
      tokenStops = options.token_stops;
      $("tokens").max = String(tokenStops.length - 1);
      fillSelect("machine", machines, (m) => (m.origin === "preset" ? "Presets" : `From ${m.origin}`));
      fillSelect("model", models);
      machineDetail = new Map(machines.map((m) => [m.key, m.detail]));
      state = stateFromUrl();
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
