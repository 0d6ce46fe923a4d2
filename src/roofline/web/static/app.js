// The workshop page. It keeps the view, the controls, the URL and the API request in step, and
// places on the page the numbers and text that /api/layer, /api/model, /api/decode or /api/serving returns. It
// computes nothing: every time, ratio, share, roof, axis range and sentence comes from the library
// through the API.
"use strict";

(() => {
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
    step_overhead_ms: { input: "step-overhead" },
    weights: { input: "weights" },
    kv_cache: { input: "kv-cache" },
    tp: { input: "tp" },
    cuda_graph: { input: "cuda-graph", check: true }, // a checkbox: "true" when ticked, "" (left out) when not
    kernels: { input: "kernels" }, // an engine's measured kernels (the empty choice: the cost model alone)
  };
  // API parameters with no control, kept when in the URL (the serving view's are made from /api/options:
  // buildServingControls)
  const PASS_THROUGH = ["context"];
  // Parameters whose empty value means "none": left out of the API's query. A target left empty stays
  // in the page's URL as `slo_ttft_ms=` (no target), since an absent one is the page's default.
  const OPTIONAL = new Set(["dtype", "slo_ttft_ms", "slo_tpot_ms", "weights", "kv_cache", "tp", "cuda_graph", "kernels"]);
  const EMPTY_IN_URL = new Set(["slo_ttft_ms", "slo_tpot_ms"]);
  // The views: which endpoint each reads and how it is drawn (the draw functions are below).
  const VIEWS = {
    layer: { endpoint: "/api/layer", draw: (data) => drawLayer(data) },
    model: { endpoint: "/api/model", draw: (data) => drawModel(data) },
    decode: { endpoint: "/api/decode", draw: (data) => drawDecode(data) },
    serving: { endpoint: "/api/serving", draw: (data) => drawServing(data) },
    learn: { endpoint: null, draw: () => (window.rooflineLearn ? window.rooflineLearn.show() : null) },
    machine: { endpoint: null, draw: () => drawMachine() },
  };
  const FONT = { family: "system-ui, sans-serif", size: 12 };
  const PATTERN = { memory: "/", compute: "" }; // memory-bound bars hatched: the bound is not told by colour alone
  const SYMBOL = { memory: "triangle-up", compute: "circle" }; // and the roofline's points by shape (▲ ● in the table)
  const SHIFT = { left: 4, right: -4 }; // a label's pixel gap from the mark it is anchored to
  // The memory bar's band: the bar's one category at y = 0, 0.55 thick (bargap 0.45), in a y range
  // that puts it at 0.46 to 0.54 of the plot's height; the capacity line from 0.44 up, the total's
  // label hanging from 0.4, under both.
  const MEMORY_BAND = { range: [-1.15, 0.75], line: 0.44, label: 0.4 };
  // No mode bar (nothing over the data, no cloud or export buttons) and no "double-click" tip;
  // zoom by dragging and reset by double-clicking stay.
  const PLOT_CONFIG = { displayModeBar: false, displaylogo: false, showTips: false, responsive: true };

  const PHONE = "(max-width: 760px)"; // style.css's phone layout
  const $ = (id) => document.getElementById(id);
  let defaults = {};
  let tokenStops = [];
  let state = {};
  let view = "layer";
  let renderCount = 0;
  let running = false; // a request is on its way: a newer change waits for it, then asks for the latest
  let pending = false;
  let asked = 0; // requests sent, counted
  let refusedAt = -1; // the request count when a typed value was last refused: an answer sent before it may not clear it
  let limits = {}; // each number control's [min, max], as the API checks them (from /api/options)
  let pin = null; // the pinned baseline: {view, qs (its API query), state}
  let shownBase = null; // the baseline's body while the view it was pinned in is drawn
  const baseCache = new Map(); // the baseline's body, fetched once
  let machineDetail = new Map();
  let machinesByKey = new Map(); // /api/machines' entries: precisions, figures and their sources
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

  // Controls whose value follows the view or the machine until set by hand: the URL keeps them for
  // another view only when set by hand (else a link would pin the shown view's attention on the next).
  const FOLLOWING = new Set(["attention", "launch_overhead_us", "layer"]);

  // The settings the shown view's endpoint does not take but another view does (T set in the layer
  // view, the lengths of the serving view), where they differ from the defaults: the URL keeps them,
  // so Back, Forward and a shared link carry every view's state across views.
  function otherViewsQuery() {
    const own = new Set(viewNames());
    const qs = new URLSearchParams();
    for (const name of [...Object.keys(CONTROLS), ...PASS_THROUGH]) {
      const value = state[name];
      if (own.has(name) || value === undefined || value === null) continue;
      if (FOLLOWING.has(name) && !touched.has(name)) continue;
      const base = defaults[name] === undefined ? "" : String(defaults[name]);
      if (value === base || (value !== "" && base !== "" && Number(value) === Number(base))) continue;
      if (value === "" && !EMPTY_IN_URL.has(name)) continue;
      qs.set(name, value);
    }
    return qs.toString().replace(/=(&|$)/g, "=$1");
  }

  // The page's URL: the view, the API's query, the targets left empty on purpose and the other
  // views' settings.
  function pageQuery(apiQuery) {
    const empty = viewNames().filter((name) => EMPTY_IN_URL.has(name) && state[name] === "");
    const pinned = pin ? [`pin=${encodeURIComponent(`view=${pin.view}&${pin.qs}`)}`] : [];
    return [`view=${view}`, apiQuery, ...empty.map((name) => `${name}=`), otherViewsQuery(), ...pinned]
      .filter((part) => part !== "").join("&");
  }

  function viewFromUrl() {
    const v = new URLSearchParams(window.location.search).get("view");
    return v && VIEWS[v] ? v : "layer";
  }

  // The page's state from its URL. A value no control can show (an unknown machine, batch=-5, a
  // typo) falls back to its default, and the notice says which and why: a bad link never leaves a
  // broken page.
  function stateFromUrl() {
    const url = new URLSearchParams(window.location.search);
    const out = {};
    const notices = [];
    for (const [name, value] of Object.entries(defaults)) out[name] = String(value);
    if ((url.get("machine") || "").startsWith(CUSTOM)) registerCustom(url.get("machine")); // a machine by its figures
    const v = url.get("view");
    if (v !== null && !VIEWS[v]) notices.push(`view=${v} is not a view of this page; showing ${viewLabel("layer")}`);
    for (const name of [...Object.keys(CONTROLS), ...PASS_THROUGH]) {
      if (name === "dtype") fillPrecisions(out.machine); // the link's machine's precisions
      if (!url.has(name)) continue;
      const value = url.get(name);
      const problem = CONTROLS[name] ? invalid(name, value, out.machine) : null;
      if (problem === null) { out[name] = value; continue; }
      const fallback = out[name] === undefined || out[name] === "" ? "its default" : shownValue(name, out[name]);
      notices.push(`${problem}; using ${fallback}`);
    }
    pin = null;
    if (url.has("pin")) {
      const p = new URLSearchParams(url.get("pin"));
      const pv = p.get("view");
      if (pv && VIEWS[pv] && VIEWS[pv].endpoint) {
        p.delete("view");
        const pinState = {};
        for (const [name, value] of p) pinState[name] = value;
        pin = { view: pv, qs: p.toString(), state: pinState };
      } else {
        notices.push("the pinned baseline names no view with results; nothing is pinned");
      }
    }
    return { state: out, notices };
  }

  function viewLabel(key) {
    const tab = document.querySelector(`[role=tab][data-view="${key}"]`);
    return tab ? `"${tab.textContent.trim()}"` : key;
  }

  // The words a person reads for a control: its label's text.
  function labelOf(name) {
    const c = CONTROLS[name];
    const label = c && (document.querySelector(`label[for="${c.slider || c.input}"]`) ||
      document.querySelector(`label[for="${c.input}"]`));
    return label ? label.textContent.replace(/\s+/g, " ").trim() : name;
  }

  const countFormat = new Intl.NumberFormat("en-US", { maximumSignificantDigits: 6 });

  // Why ``value`` cannot be this control's value, in words naming the control and its range, or null.
  function invalid(name, value, machineKey = state.machine) {
    const c = CONTROLS[name];
    const el = $(c.input);
    const label = labelOf(name);
    const shown = value.length > 24 ? `${value.slice(0, 24)}…` : value;
    if (c.check) return ["", "true", "false"].includes(value) ? null : `${label}: "${shown}" is not true or false`;
    if (el.tagName === "SELECT") {
      if ([...el.options].some((o) => o.value === value)) return null;
      const m = machinesByKey.get(machineKey);
      if (name === "dtype" && m) return `${label}: the ${m.name} has no ${shown} peak; it computes ${m.precisions.join(", ")}`;
      return `${label}: "${shown}" is not one of the choices`;
    }
    if (value.trim() === "" && OPTIONAL.has(name)) return null;
    const range = limits[name];
    const whole = el.step === "1";
    const wanted = range
      ? `a ${whole ? "whole number" : "number"} from ${countFormat.format(range[0])} to ${countFormat.format(range[1])}`
      : `a ${whole ? "whole number" : "number"}${el.min !== "" ? ` of at least ${countFormat.format(Number(el.min))}` : ""}`;
    const x = Number(value);
    const ok = value.trim() !== "" && /^[-+]?(\d+\.?\d*|\.\d+)([eE][-+]?\d+)?$/.test(value.trim()) && Number.isFinite(x) &&
      (!whole || Number.isInteger(x)) && (range ? x >= range[0] && x <= range[1] : (el.min === "" || x >= Number(el.min)));
    return ok ? null : `${label}: ${shown ? `"${shown}" is` : "an empty box is"} not ${wanted}`;
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
      option.title = option.textContent;
      select.append(option);
    }

    $("layer-control").hidden = kinds.length < 2 || view !== "layer"; // only the layer view draws one layer
    if (kinds.length < 2) {
      delete state.layer;
    } else if (!kinds.some((k) => String(k.first_layer) === state.layer) && !touched.has("layer")) {
      state.layer = String(kinds[0].first_layer);
    }
  }

  // The precision menu: only what the machine computes (the planner's precisions it has a peak for).
  function fillPrecisions(key) {
    const m = machinesByKey.get(key);
    if (!m) return;
    fillSelect("dtype", [{ key: "", label: `the machine's default (${m.default_dtype})` },
      ...m.precisions.map((d) => ({ key: d, label: d }))]);
  }

  function showControls() {
    fillLayers();
    fillPrecisions(state.machine);
    for (const [name, c] of Object.entries(CONTROLS)) {
      const value = state[name] ?? "";
      if (c.check) $(c.input).checked = value === "true";
      else $(c.input).value = value;
      if (c.slider) $(c.slider).value = c.stops ? stopIndex(value) : value;
      if (c.slider) $(c.slider).setAttribute("aria-valuetext", c.stops ? `${countFormat.format(Number(value))} tokens` : value);
    }
    // a closed select shows what fits of a long choice ("layer 0: latent attention (MLA) + gated MLP
    // 18432 (3 layers)"): its title, shown on hover, is the whole of it
    for (const id of ["layer", "model", "machine"]) {
      const sel = $(id);
      if (sel && sel.selectedOptions) sel.title = sel.selectedOptions[0] ? sel.selectedOptions[0].textContent : "";
    }
    $("machine-detail").textContent = machineDetail.get(state.machine) || "";
    $("tokens-label").textContent = state.phase === "decode" || view === "decode"
      ? "Context, S (tokens already in the KV cache)"
      : "Tokens per sequence, T";
    $("phase").disabled = view === "decode"; // decode versus batch is decode whatever the phase
    if (view === "decode") $("phase").value = "decode"; // and says so (the state keeps the other views' phase)
    $("workload-controls").hidden = view === "serving" || view === "machine"; // serving has its own workload; the machine none
    $("serving-controls").hidden = view !== "serving";
    const takes = new Set(viewParameters[view] || []); // a control the view's endpoint does not take is hidden
    for (const el of document.querySelectorAll("#controls [data-param]")) {
      el.hidden = !el.dataset.param.split(" ").some((name) => takes.has(name));
    }
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
    $("pin").hidden = !VIEWS[view].endpoint; // a view without results has nothing to compare
    document.body.dataset.view = view;
  }

  // What a control the user has not set follows: the machine's launch overhead, the view's attention.
  function followDefaults() {
    if (!touched.has("launch_overhead_us") && machineLaunchUs.has(state.machine)) {
      state.launch_overhead_us = String(machineLaunchUs.get(state.machine));
    }
    // a custom machine's launch is its own (left out of the query, the API takes it) unless set by hand
    const custom = (state.machine || "").startsWith(CUSTOM);
    OPTIONAL[custom ? "add" : "delete"]("launch_overhead_us");
    if (custom && !touched.has("launch_overhead_us")) state.launch_overhead_us = "";
    if (!touched.has("attention") && viewAttention[view]) state.attention = viewAttention[view];
  }

  function setView(next) {
    if (next === view || !VIEWS[next]) return;
    view = next;
    followDefaults();
    showView();
    showControls();
    update("push");
  }

  // A control's new value. "push" makes a history entry (Back undoes it); "live" (a slider being
  // dragged) redraws and rewrites the current entry, and the drag's end pushes one entry.
  function set(name, value, mode = "push") {
    const text = String(value);
    const problem = invalid(name, text);
    if (problem !== null) { refusedAt = asked; showStale(problem, name); return; }
    if (state[name] === text && !document.body.dataset.stale) {
      if (mode === "push") writeUrl("push");
      return; // Enter and change both report a typed value
    }
    state[name] = text;
    const m = machinesByKey.get(state.machine);
    if (name === "machine" && m && state.dtype && !m.precisions.includes(state.dtype)) {
      showNotice([], `The ${m.name} has no ${state.dtype} peak: the precision is its default, ${m.default_dtype}.`);
      state.dtype = "";
    } else if (name === "machine") {
      showNotice([]);
    }
    if (name === "model") touched.delete("layer"); // a new model starts at its first layer kind
    if (name !== "machine" && name !== "model") touched.add(name);
    followDefaults();
    showControls();
    update(mode);
  }

  function bindControls() {
    for (const [name, c] of Object.entries(CONTROLS)) {
      const input = $(c.input);
      input.addEventListener("change", () => set(name, c.check ? (input.checked ? "true" : "") : input.value));
      if (input.type === "number") {
        input.addEventListener("keydown", (e) => { if (e.key === "Enter") set(name, input.value); });
      }
      if (c.slider) {
        const slider = $(c.slider);
        const value = () => (c.stops ? tokenStops[Number(slider.value)] : slider.value);
        let dragging = false; // a drag's first move makes the history entry, the rest rewrite it
        slider.addEventListener("input", () => { set(name, value(), dragging ? "live" : "push"); dragging = true; });
        slider.addEventListener("change", () => { dragging = false; set(name, value(), "live"); });
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
    $("pin").addEventListener("click", pinNow);
    $("unpin").addEventListener("click", unpin);
    $("reset").addEventListener("click", () => {
      state = {};
      touched.clear();
      for (const [name, value] of Object.entries(defaults)) state[name] = String(value);
      followDefaults();
      showControls();
      update("push");
    });
    // Back and Forward: the entry's URL is the whole state
    window.addEventListener("popstate", () => {
      loadUrl();
      update("none");
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

  // The page's URL for the shown state: "push" a new history entry, "replace" the current one, or
  // "none" (Back and Forward, which already moved to it).
  function writeUrl(mode) {
    const qs = query();
    const url = `${window.location.pathname}?${pageQuery(qs)}`;
    if (mode === "push" && url !== `${window.location.pathname}${window.location.search}`) {
      window.history.pushState(null, "", url);
    } else if (mode !== "none") {
      window.history.replaceState(null, "", url);
    }
    return qs;
  }

  function setDownloads(qs) {
    const shown = view;
    const json = $("download-json");
    $("download-csv").href = `/api/layer.csv?${qs}`;
    const endpoint = VIEWS[shown].endpoint || "/api/machines"; // the machine view: every machine and its sources
    json.href = shown === "layer" ? `/api/layer.json?${qs}` : VIEWS[shown].endpoint ? `${endpoint}?${qs}` : endpoint;
    json.download = shown === "layer" ? "" : `roofline-${shown}.json`;
  }

  // Ask for the shown state and draw it. One request at a time: changes made meanwhile (a slider
  // dragged) wait for it, then the latest is asked for, so the charts follow the drag live and end
  // on its last value.
  async function update(mode = "replace") {
    writeUrl(mode);
    if (running) { pending = true; return; }
    running = true;
    try {
      do {
        pending = false;
        await fetchAndDraw();
      } while (pending);
    } finally {
      running = false;
    }
  }

  async function fetchAndDraw() {
    document.body.dataset.busy = "1";
    $("results").setAttribute("aria-busy", "true");
    try {
      await fetchAndDrawNow();
    } finally {
      delete document.body.dataset.busy;
      $("results").removeAttribute("aria-busy");
    }
  }

  async function fetchAndDrawNow() {
    const qs = query();
    const shown = view;
    const pageQs = pageQuery(qs);
    if (!VIEWS[shown].endpoint) { // a view with nothing to fetch (the exercises)
      showError(null, null);
      await render(shown, null, pageQs);
      return;
    }
    setDownloads(qs);
    let resp, body;
    const sent = ++asked;
    try {
      resp = await fetch(`${VIEWS[shown].endpoint}?${qs}`);
      body = await resp.json();
    } catch (err) {
      showStale(`The server did not answer (${err.message || err}); the results shown are from before.`, null);
      return;
    }
    if (pending) return; // a newer state is asked for next; this one is already stale
    if (!resp.ok) {
      const field = body && body.field;
      // an optional control's own default: tp 1, the machine's dtype (the empty choice)
      const fallback = defaults[field] !== undefined ? String(defaults[field]) : (field === "tp" ? "1" : OPTIONAL.has(field) ? "" : undefined);
      if (renderCount === 0 && field && fallback !== undefined && fallback !== (state[field] || "")) {
        // nothing drawn yet (a link): the refused value goes back to its default, and the notice says so
        showNotice([`${apiMessage(body, resp.status)}; using ${CONTROLS[field] ? labelOf(field) : field} ${fallback || "its default"}`]);
        if (fallback === "") delete state[field]; else state[field] = fallback;
        showControls();
        writeUrl("replace");
        pending = true;
        return;
      }
      if (renderCount === 0 && Object.keys(state).some((k) => defaults[k] !== undefined && String(defaults[k]) !== state[k])) {
        // still nothing drawn, and the refused field is already at its default: the page's defaults, said
        showNotice([`${apiMessage(body, resp.status)}; using the page's defaults`]);
        const keep = view;
        state = {};
        for (const [name, value] of Object.entries(defaults)) state[name] = String(value);
        view = keep;
        followDefaults();
        showControls();
        writeUrl("replace");
        pending = true;
        return;
      }
      showStale(apiMessage(body, resp.status), field);
      return;
    }
    if (refusedAt >= sent) { // a value typed while this was on its way was refused: draw, but keep the refusal
      await render(shown, body, pageQs, await baselineFor(shown));
      document.body.dataset.stale = "1";
      return;
    }
    showError(null, null);
    await render(shown, body, pageQs, await baselineFor(shown));
  }

  // The pinned baseline's body when it was pinned in the shown view (fetched once), else null.
  async function baselineFor(shown) {
    if (!pin || pin.view !== shown) return null;
    const key = `${shown}?${pin.qs}`;
    if (!baseCache.has(key)) {
      try {
        const resp = await fetch(`${VIEWS[shown].endpoint}?${pin.qs}`);
        if (!resp.ok) return { refused: apiMessage(await resp.json(), resp.status) };
        baseCache.clear();
        baseCache.set(key, await resp.json());
      } catch (err) {
        return { refused: String(err.message || err) };
      }
    }
    return baseCache.get(key);
  }

  // The API's refusal in the page's words: each field named by its control's label.
  function apiMessage(body, status) {
    const byField = (field) => (CONTROLS[field] ? labelOf(field) : field);
    // only the API's own spellings (input_len, max_users) are renamed, never a plain word like "tokens"
    const named = (text) => text.replace(/\b[a-z]+(?:_[a-z]+)+\b/g, (word) => (CONTROLS[word] ? `"${labelOf(word)}"` : word));
    const detail = body && Array.isArray(body.detail) ? body.detail : [];
    const parts = detail.map((d) => {
      const field = (d.loc || []).slice(-1)[0];
      const range = limits[field];
      const hint = range && /greater|less|valid/.test(d.msg || "")
        ? ` (from ${countFormat.format(range[0])} to ${countFormat.format(range[1])})` : "";
      return `${byField(field)}: ${named(String(d.msg || ""))}${hint}`;
    });
    if (!parts.length && body && typeof body.detail === "string") parts.push(named(body.detail));
    return parts.length ? parts.join("; ") : `The server refused the request (HTTP ${status}).`;
  }

  // A message that the results shown are not those of the controls: the message names the control,
  // the results are greyed and the downloads are off until a good value is given.
  function showStale(message, field) {
    showError(`${message}. The results below are for the last settings that worked.`.replace(/\.\. /, ". "), field);
    document.body.dataset.stale = "1";
    for (const id of ["download-csv", "download-json"]) {
      const a = $(id);
      a.setAttribute("aria-disabled", "true");
      a.removeAttribute("href");
      a.tabIndex = -1;
    }
  }

  function showError(message, field) {
    const box = $("error");
    box.hidden = !message;
    putText(box, message || "");
    for (const c of Object.values(CONTROLS)) $(c.input).removeAttribute("aria-invalid");
    if (field && CONTROLS[field]) $(CONTROLS[field].input).setAttribute("aria-invalid", "true");
    document.body.dataset.error = message ? "1" : "";
    if (!message) {
      delete document.body.dataset.stale;
      for (const id of ["download-csv", "download-json"]) {
        $(id).removeAttribute("aria-disabled");
        $(id).tabIndex = 0;
      }
      setDownloads(query());
    }
  }

  // What the page changed in a link it could not use (bad values fall back to defaults).
  function showNotice(notices, sentence = "") {
    const box = $("notice");
    box.hidden = !notices.length && !sentence;
    putText(box, notices.length ? `This link had values the page cannot use: ${notices.join("; ")}.` : sentence);
  }

  // -- drawing ----------------------------------------------------------------------------------

  function setText(id, text) { putText($(id), text); }

  // Text with each command-line flag and its number ("--tp 2", "--tp-link") in a span kept on one
  // line: on a phone "(--tp 2: 73 GB each)" broke between its hyphens (issue 38). The span copies as
  // the same ASCII text, so a flag pasted into a shell still works.
  const FLAG = /(?<![\w-])--[a-z][a-z0-9]*(?:-[a-z0-9]+)*(?: [0-9][^\s,;:)]*)?/gi;
  function putText(el, text) {
    const s = text == null ? "" : String(text), parts = [];
    let at = 0;
    for (const m of s.matchAll(FLAG)) {
      const span = document.createElement("span");
      span.className = "flag";
      span.textContent = m[0];
      parts.push(s.slice(at, m.index), span);
      at = m.index + m[0].length;
    }
    el.replaceChildren(...parts, s.slice(at));
  }

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

  // What cannot run as one kernel on this machine (an op whose working set exceeds its memory): a
  // short list above the charts, hidden when there is none.
  function showWarnings(id, warnings) {
    const list = $(id);
    if (!list) return;
    const items = warnings || [];
    list.replaceChildren(...items.map((w) => { const li = document.createElement("li"); putText(li, w.text); return li; }));
    list.hidden = items.length === 0;
  }

  function drawLayer(data) {
    showReadouts(data);
    showWarnings("layer-warnings", data.warnings);
    return Promise.all([drawBars(data.chart, shownBase && shownBase.chart), drawRoofline(data.roofline)]);
  }

  // Each op's bar, memory-bound ones hatched as well as red; with a pinned baseline its bars (grey)
  // beside them, in the shown chart's unit.
  function drawBars(chart, base = null) {
    const traces = BOUNDS.map((bound) => {
      const s = pick(chart, bound, ["labels", "time", "time_text", "hover"]);
      return {
        type: "bar", orientation: "h", name: `${bound}-bound`, offsetgroup: "now",
        y: s.labels, x: s.time, text: s.time_text, textposition: "outside", cliponaxis: false,
        hovertext: s.hover, hovertemplate: "%{hovertext}<extra></extra>",
        marker: { color: chart.colors[bound], pattern: { shape: PATTERN[bound], fillmode: "overlay", fgcolor: "#ffffff", size: 6, solidity: 0.3 } },
        textfont: { size: 11 },
      };
    });
    if (base) {
      traces.push({
        type: "bar", orientation: "h", name: "baseline", offsetgroup: "base", y: base.labels,
        x: rescale(base.time, base.axis.seconds_per_unit, chart.axis.seconds_per_unit), text: base.time_text,
        textposition: "outside", cliponaxis: false, textfont: { size: 10, color: "#5b6573" },
        hovertext: base.hover.map((h) => `baseline: ${h}`), hovertemplate: "%{hovertext}<extra></extra>",
        marker: { color: "#b9c0c9" },
      });
    }
    const layout = {
      barmode: base ? "group" : "stack", showlegend: false, bargap: base ? 0.2 : 0.25, bargroupgap: 0.05,
      margin: { l: 8, r: 56, t: 8, b: 44 },
      // the payload sends the times in the unit of the largest bar and names it in the title
      xaxis: { title: { text: chart.axis.title }, rangemode: "tozero", separatethousands: true, exponentformat: "none",
        automargin: true },
      yaxis: { type: "category", categoryorder: "array", categoryarray: chart.labels, autorange: "reversed", automargin: true },
      hoverlabel: { align: "left" },
      font: FONT,
    };
    return Plotly.react("chart", traces, layout, PLOT_CONFIG);
  }

  function drawRoofline(roof) {
    shownRoof = roof;
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
        const s = pick(ops, bound, ["labels", "intensity", "tflops_per_s", "hover", "number", "text_position"]);
        return {
          x: s.intensity, y: s.tflops_per_s, mode: "markers+text", name: `${bound}-bound ops`,
          text: s.number, textposition: s.text_position, cliponaxis: false,
          textfont: { size: 10, color: roof.colors[bound] },
          marker: { color: roof.colors[bound], symbol: SYMBOL[bound], size: 10, line: { color: "#fff", width: 1 } },
          hovertext: s.hover, hovertemplate: "%{hovertext}<extra></extra>",
        };
      }),
    ];
    const layout = {
      margin: { l: 8, r: 12, t: 8, b: 44 },
      xaxis: { type: "log", title: { text: "arithmetic intensity (FLOP/byte)" }, automargin: true, dtick: 1, exponentformat: "none",
        separatethousands: true },
      yaxis: { type: "log", title: { text: "TFLOP/s" }, automargin: true, dtick: 1, exponentformat: "none", separatethousands: true },
      // below the chart, in a row: inside it the legend covered the ridge and the compute-bound ops
      legend: { orientation: "h", x: 0, xanchor: "left", y: 0, yref: "container", yanchor: "bottom", font: { size: 11 } },
      shapes: [{ type: "line", xref: "x", yref: "paper", x0: roof.ridge_flop_per_byte, x1: roof.ridge_flop_per_byte,
        y0: 0, y1: 1, line: { color: "#8a94a3", width: 1, dash: "dot" } }],
      annotations: [{ xref: "x", yref: "paper", x: roof.ridge_log10 /* Plotly places log-axis annotations by log10 */, y: 0.02, xanchor: "left",
        yanchor: "bottom", text: roof.ridge_text, showarrow: false, font: { size: 11, color: "#5b6573" } }],
      hoverlabel: { align: "left" },
      font: FONT,
    };
    return Plotly.react("roofline", traces, layout, PLOT_CONFIG).then((gd) => clearLabels(gd, [3, 4]));
  }

  // Each op's number moved, where it must, to the first spot around its marker where the drawn label
  // touches neither roof (the machine's line and the dashed achievable one), no other marker, no tick
  // label and no label placed before it. Only the browser knows the pixels: the payload's spot is the
  // first guess (issue 38: a "10" on the slope sat on the roof line, a "2" above a matmul on its flat).
  // A new width (a phone turned, a window resized) moves the markers: the labels are laid out again
  // once it settles, and the chart says for which width they were (data-labels-width).
  let shownRoof = null, resizing = null;
  window.addEventListener("resize", () => {
    clearTimeout(resizing);
    // not while another view shows (its chart is not laid out)
    resizing = setTimeout(() => { if (shownRoof && $("roofline").offsetParent !== null) drawRoofline(shownRoof); }, 300);
  });
  const SPOTS = ["top left", "bottom right", "top right", "bottom left", "bottom center", "top center", "middle left", "middle right"];
  function clearLabels(gd, traceIndices) {
    const boxOf = (el) => { const r = el.getBoundingClientRect(); return [r.left, r.top, r.right, r.bottom]; };
    const overlap = (a, b) => a[0] < b[2] && b[0] < a[2] && a[1] < b[3] && b[1] < a[3];
    const apart = (b) => [b[0] - 4, b[1] - 1, b[2] + 4, b[3] + 1]; // two labels side by side read as one ("29, 11")
    const traces = {}; // by the trace's index in the data (Plotly draws no group for an empty trace)
    for (const g of gd.querySelectorAll(".scatterlayer .trace")) traces[g.__data__[0].trace.index] = g;
    const lines = [traces[0], traces[1]].filter(Boolean).flatMap((t) => { // the roofs, sampled every half pixel
      const path = t.querySelector("path.js-line");
      if (!path) return [];
      const m = path.getScreenCTM(), out = [], n = path.getTotalLength();
      for (let s = 0; s <= n; s += 0.5) {
        const q = path.getPointAtLength(s);
        out.push([m.a * q.x + m.c * q.y + m.e, m.b * q.x + m.d * q.y + m.f]);
      }
      return out;
    });
    traceIndices = traceIndices.filter((ti) => traces[ti]);
    const markers = traceIndices.flatMap((ti) => [...traces[ti].querySelectorAll(".points path.point")]
      .map((el) => ({ ti, i: el.__data__.i, box: boxOf(el) })));
    const fixed = [...gd.querySelectorAll(".xtick text, .ytick text, .annotation-text-g")].map(boxOf);
    const area = boxOf(gd);
    const placed = []; // { k, i, box, spot }
    const positions = traceIndices.map((ti) => [...gd.data[ti].textposition]);
    const texts = traceIndices.map((ti) => [...gd.data[ti].text]);
    let moved = false;
    traceIndices.forEach((ti, k) => traces[ti].querySelectorAll(".textpoint").forEach((g) => {
      const i = g.__data__.i, text = g.querySelector("text");
      const own = markers.find((m) => m.ti === ti && m.i === i);
      if (!text || !text.textContent || !own) return;
      const [l, t, r, b] = boxOf(text), w = r - l, h = b - t;
      const cx = (own.box[0] + own.box[2]) / 2, cy = (own.box[1] + own.box[3]) / 2;
      const [v0, h0] = positions[k][i].split(" ");
      const gx = h0 === "left" ? cx - r : l - cx, gy = v0 === "top" ? cy - b : t - cy; // the drawn gap
      const boxAt = (spot) => {
        const [v, hp] = spot.split(" ");
        const x0 = hp === "left" ? cx - gx - w : hp === "right" ? cx + gx : cx - w / 2;
        const y0 = v === "top" ? cy - gy - h : v === "bottom" ? cy + gy : cy - h / 2;
        return [x0, y0, x0 + w, y0 + h];
      };
      const cost = (box) => {
        const wide = [box[0] - 1, box[1] - 1, box[2] + 1, box[3] + 1];
        const onLine = lines.some(([x, y]) => x >= wide[0] && x <= wide[2] && y >= wide[1] && y <= wide[3]);
        const outside = box[0] < area[0] || box[2] > area[2] || box[1] < area[1] || box[3] > area[3];
        const hits = markers.filter((m) => m !== own && overlap(box, m.box)).length
          + fixed.filter((f) => overlap(box, f)).length + placed.filter((p) => overlap(apart(box), p.box)).length;
        return (onLine || outside ? 1000 : 0) + hits;
      };
      const first = positions[k][i];
      const best = [first, ...SPOTS.filter((s) => s !== first)].map((spot) => [cost(boxAt(spot)), spot])
        .reduce((a, c) => (c[0] < a[0] ? c : a));
      const box = boxAt(best[1]);
      const host = best[0] < 1000 && placed.find((p) => p.k === k && overlap(apart(box), p.box));
      if (host) { // no free spot: the number joins the label it would cover, "2, 6" as coinciding points do
        texts[k][host.i] = [...texts[k][host.i].split(", "), ...texts[k][i].split(", ")].sort((a, c) => a - c).join(", ");
        texts[k][i] = "";
        const grow = w + 5; // the joined text's width and its ", "
        const side = host.spot.split(" ")[1];
        if (side !== "right") host.box[0] -= side === "left" ? grow : grow / 2;
        if (side !== "left") host.box[2] += side === "right" ? grow : grow / 2;
        moved = true;
        return;
      }
      if (best[1] !== first) { positions[k][i] = best[1]; moved = true; }
      placed.push({ k, i, box, spot: best[1] });
    }));
    gd.dataset.labelsWidth = String(gd.clientWidth);
    return moved ? Plotly.restyle(gd, { textposition: positions, text: texts }, traceIndices) : gd;
  } // end clearLabels

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
    setText("model-attention", data.attention_note.text);
    $("model-attention").dataset.attention = data.attention_note.attention;
    $("model-fit").dataset.state = data.fit.state;
    setText("model-fit-mark", data.fit.mark);
    $("model-fit").title = data.fit.headline;
    setText("model-fit-text", data.fit.text);
    setText("model-limits", data.memory_limits_text);
    setText("model-note", data.caption);
    showWarnings("model-warnings", data.warnings);
    return Promise.all([drawParts(data.parts_chart), drawMemory(data.memory_chart)]);
  }

  function drawParts(chart) {
    const traces = [["memory", chart.memory], ["compute", chart.compute]].map(([bound, x]) => ({
      type: "bar", orientation: "h", name: `${bound}-bound`, y: chart.labels, x,
      hovertext: chart.hover, hovertemplate: "%{hovertext}<extra></extra>",
      marker: { color: chart.colors[bound], pattern: { shape: PATTERN[bound], fillmode: "overlay", fgcolor: "#ffffff", size: 6, solidity: 0.3 } },
    }));
    const layout = {
      barmode: "stack", showlegend: false, bargap: 0.35,
      margin: { l: 8, r: 16, t: 8, b: 44 },
      // times in the unit of the largest part, named in the payload's title
      xaxis: { title: { text: chart.axis.title }, range: [0, chart.x_max], separatethousands: true, exponentformat: "none",
        automargin: true },
      // each part's time under its name, beside the axis: at the bar's end it ran off a phone's chart
      // ("207 ms (10")
      yaxis: { type: "category", categoryorder: "array", categoryarray: chart.labels, autorange: "reversed", automargin: true,
        tickmode: "array", tickvals: chart.labels,
        ticktext: chart.labels.map((label, i) => `${label}<br><span style="font-size:11px">${chart.text[i]}</span>`) },
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
    // The bar in the band between the capacity's label (top) and the total's (under the bar, from the
    // left): the capacity line stops above the total's label, which at the bar's end ran off a phone's
    // chart ("144 GB does not") or crossed the line ("67.1 GB fits").
    const annotations = [{ x: 0, xref: "paper", y: MEMORY_BAND.label, yref: "paper", yanchor: "top", xanchor: "left",
      text: chart.total_text, showarrow: false, font: { size: 12, color: notFit ? chart.colors.not_fit : "#1d232b" } }];
    const shapes = [];
    if (chart.capacity_gb !== null) {
      shapes.push({ type: "line", xref: "x", yref: "paper", x0: chart.capacity_gb, x1: chart.capacity_gb, y0: MEMORY_BAND.line, y1: 1,
        line: { color: "#1d232b", width: 1.5, dash: "dash" } });
      annotations.push({ x: chart.capacity_gb, y: 1, xref: "x", yref: "paper", text: chart.capacity_text,
        xanchor: chart.capacity_anchor, yanchor: "top", xshift: SHIFT[chart.capacity_anchor], showarrow: false,
        font: { size: 11, color: "#5b6573" } });
    }
    const layout = {
      barmode: "stack", showlegend: false, bargap: 0.45,
      margin: { l: 8, r: 16, t: 8, b: 44 },
      xaxis: { title: { text: "memory per GPU (GB)" }, range: [0, chart.x_max_gb], automargin: true, separatethousands: true,
        exponentformat: "none" },
      yaxis: { automargin: true, showticklabels: false, range: MEMORY_BAND.range, fixedrange: true },
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
    setText("decode-attention", data.attention_note.text);
    $("decode-attention").dataset.attention = data.attention_note.attention;
    setText("decode-note", data.caption);
    showNotes("decode-notes", data.notes || []);
    const c = data.chart;
    return Promise.all([
      drawBatchCurve("decode-throughput-chart", c, "tokens_per_s"),
      drawBatchCurve("decode-latency-chart", c, "step_time"),
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
          marker: { color: c.colors[bound], symbol: SYMBOL[bound], size: 9, line: { color: "#fff", width: 1 } },
          hovertext: s.hover, hovertemplate: "%{hovertext}<extra></extra>" };
      }),
      { x: [c.here.batch], y: [c.here[field]], mode: "markers+text", name: "this batch", text: [c.here.text],
        textposition: c.here.textposition, marker: { symbol: "circle-open", size: 16, color: "#2b2f36", line: { width: 2 } },
        hovertext: [c.here.hover], hovertemplate: "%{hovertext}<extra></extra>", cliponaxis: false },
    ];
    const shapes = [];
    // the marks' words in a list under the chart: inside it they crossed the curve and the other
    // mark's line on a phone (issue 38)
    const marks = [];
    if (c.no_fit_from !== null) {
      shapes.push({ type: "rect", xref: "x", yref: "paper", x0: c.no_fit_from, x1: c.x_end, y0: 0, y1: 1,
        fillcolor: "#d9d9d9", opacity: 0.55, line: { width: 0 }, layer: "below" });
      if (c.no_fit_text) marks.push(["nofit", c.no_fit_text]);
    }
    if (c.compute_bound_batch !== null) {
      shapes.push({ type: "line", xref: "x", yref: "paper", x0: c.compute_bound_batch, x1: c.compute_bound_batch, y0: 0, y1: 1,
        line: { color: c.colors.compute, width: 1.5, dash: "dash" } });
      marks.push(["compute", c.compute_bound_text]);
    }
    $(`${id}-marks`).replaceChildren(...marks.map(([kind, words]) => {
      const li = document.createElement("li");
      li.className = kind;
      putText(li, words);
      return li;
    }));
    const layout = {
      showlegend: false,
      margin: { l: 8, r: 16, t: 12, b: 44 },
      xaxis: { type: "log", range: c.x_range_log10, tickvals: c.ticks.values, ticktext: c.ticks.text,
        title: { text: "batch (sequences decoding together)" }, automargin: true },
      yaxis: { type: axis.type, title: { text: title }, automargin: true, separatethousands: true, exponentformat: "none",
        range: axis.range, tickvals: axis.tickvals, ticktext: axis.ticktext },
      shapes,
      hoverlabel: { align: "left" },
      font: FONT,
    };
    return Plotly.react(id, traces, layout, PLOT_CONFIG);
  }

  // -- serving ---------------------------------------------------------------------------------

  // The serving view's controls from /api/options' declarations (serving.parameters, the CLI's too): a
  // control the page lacks is made here (a number box, or the engine's choice), each takes its range and
  // help, and an empty one is left out of the query: the API's default, an engine setting the engine's own.
  function buildServingControls(declared) {
    const box = $("serving-controls");
    for (const d of declared || []) {
      if (d.name === "tp") continue; // the plan views' control, shared
      let el = CONTROLS[d.name] ? $(CONTROLS[d.name].input) : null;
      if (!el) {
        const id = `serving-${d.name.replace(/_/g, "-")}`;
        const label = document.createElement("label");
        label.htmlFor = id;
        label.textContent = d.label;
        el = document.createElement(d.choices ? "select" : "input");
        el.id = id;
        el.name = d.name;
        if (d.choices) {
          for (const key of ["", ...d.choices]) {
            const opt = document.createElement("option");
            opt.value = key;
            opt.textContent = key || "none: the simulator's own settings";
            el.append(opt);
          }
        } else {
          el.type = "number";
          el.step = d.integer ? "1" : "any";
          el.inputMode = d.integer ? "numeric" : "decimal";
        }
        box.append(label, el);
        CONTROLS[d.name] = { input: id };
      }
      el.title = d.help;
      if (!d.choices) {
        el.placeholder = d.engine_setting ? `the engine's (${countFormat.format(d.engine_default)} without one)`
          : d.default === null ? "none" : String(d.default);
      }
      if (defaults[d.name] === "") OPTIONAL.add(d.name); // empty: left out, the API's own default
    }
  }

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
    showNotes("serving-notes", data.notes);
    drawBreakdown(data.breakdown);
    return Promise.all([drawServingCurve(data.chart), drawServingLatency(data.latency_chart)]);
  }

  // A view's notes (the library's: a context past the model's trained length, what memory leaves out), one item each.
  function showNotes(id, notes) {
    $(id).replaceChildren(...notes.map((n) => { const li = document.createElement("li"); putText(li, n); return li; }));
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
      xaxis: { title: { text: c.x_title }, range: c.x_range, automargin: true, separatethousands: true, exponentformat: "none" },
      yaxis: { title: { text: c.y_title }, range: c.y_range, automargin: true, separatethousands: true, exponentformat: "none" },
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
      line("ttft_p50", "TTFT p50", c.colors.ttft, "solid"),
      line("ttft_at", `TTFT ${c.percentile_name}`, c.colors.ttft, "dash"),
      line("ttft_p99", "TTFT p99", c.colors.ttft, "dot"),
      line("tpot_p50", "TPOT p50", c.colors.tpot, "solid"),
      line("tpot_at", `TPOT ${c.percentile_name}`, c.colors.tpot, "dash"),
    ];
    // latencies and targets come in the unit of the slowest (c.axis), named in its title
    const shapes = c.targets.map((target) => ({ type: "line", xref: "paper", yref: "y", x0: 0, x1: 1, y0: target.value,
      y1: target.value, line: { color: target.color, width: 1.5, dash: "dot" } }));
    // each target named in the legend below the chart, beside the curves' names: a label on the chart sat on
    // whichever curve crossed its line there (the p99's, rising steeply past the knee, at either end)
    for (const target of c.targets) {
      traces.push({ x: [null], y: [null], mode: "lines", name: target.text.replace(" target ", " ≤ "), hoverinfo: "skip",
        line: { color: target.color, width: 1.5, dash: "dot" } });
    }
    const layout = {
      margin: { l: 8, r: 16, t: 12, b: 44 },
      // below the chart, in a row, as the roofline's: inside it the legend sat on the curves
      // entries in columns as wide as the targets' names, two or three a row (a phone's width: one a row)
      legend: { orientation: "h", x: 0, xref: "container", xanchor: "left", y: 0, yref: "container", yanchor: "bottom",
        font: { size: 11 }, entrywidthmode: "pixels", entrywidth: 104 },
      xaxis: { type: "log", range: c.x_range_log10, tickvals: c.ticks.values, ticktext: c.ticks.text,
        title: { text: "concurrent users (closed loop)" }, automargin: true },
      yaxis: { type: "log", range: c.y_range_log10, tickvals: c.y_ticks.values, ticktext: c.y_ticks.text,
        title: { text: c.axis.title }, automargin: true },
      shapes,
      hoverlabel: { align: "left" },
      font: FONT,
    };
    return Plotly.react("serving-latency-chart", traces, layout, PLOT_CONFIG);
  }

  // -- the machine: every figure and its source ------------------------------------------------

  // A citation as text, its URLs as links.
  function citation(textValue) {
    const span = document.createElement("span");
    for (const part of textValue.split(/(https?:\/\/[^\s;,]+)/)) {
      if (/^https?:\/\//.test(part)) {
        const a = document.createElement("a");
        a.href = part;
        a.textContent = part;
        a.rel = "noopener";
        span.append(a);
      } else if (part) {
        span.append(part);
      }
    }
    return span;
  }

  // The machine view: a row per figure naming its sources' keys, each key linked to its citation,
  // listed once below the table.
  function drawMachine() {
    const m = machinesByKey.get(state.machine);
    if (!m) return;
    const where = m.origin === "preset" ? "the presets (data/machines.toml)" : m.origin === "custom" ? "your URL" : m.origin;
    setText("machine-sentence", `The ${m.name} as ${where} gives it: each figure the predictions use, with its ` +
      `source and the file's note. The precision menu offers what it computes: ${m.precisions.join(", ")}.`);
    fillCustomForm(m);
    const cited = new Map();
    const rows = m.figures.map((f) => {
      const tr = document.createElement("tr");
      const name = cell("th", f.name);
      name.scope = "row";
      const src = document.createElement("td");
      f.sources.forEach((s, i) => {
        cited.set(s.key, s.citation);
        const a = document.createElement("a");
        a.href = `#source-${s.key}`;
        a.textContent = s.key;
        src.append(...(i ? [", ", a] : [a]));
      });
      tr.append(name, cell("td", f.text, "num"), src, cell("td", f.note));
      return tr;
    });
    $("machine-table").tBodies[0].replaceChildren(...rows);
    $("machine-sources").replaceChildren(...[...cited].flatMap(([key, text]) => {
      const dt = cell("dt", key);
      dt.id = `source-${key}`;
      const dd = document.createElement("dd");
      dd.append(citation(text));
      return [dt, dd];
    }));
  }

  // -- a machine given by its figures, in the URL ---------------------------------------------------

  // machine=custom:bf16=989TFLOP/s,bw=3.35TB/s,mem=80GB,launch=3µs,nvlink=450GB/s: the API reads and checks it
  // (web.catalog.custom_machine; a bad figure is a 422 naming it). The page lists it in the machine menu and the
  // machine view with each figure as given, its source the user's: none; the page computes nothing from it.
  const CUSTOM = "custom:";
  const CUSTOM_NAME = "Custom machine (your figures, no source)";
  const CUSTOM_LINKS = ["nvlink", "xgmi", "ici", "roce", "pcie", "infiniband"];
  const CUSTOM_FIELDS = [ // the form's boxes: [name, label, the URL's key (a peak's: its dtype; a link's: its name), figure]
    ["peak", "Peak", null, "peak_flops_per_s."], ["bw", "Memory bandwidth", "bw", "memory_bytes_per_s"],
    ["mem", "Memory", "mem", "memory_bytes"], ["launch", "Launch overhead", "launch", "launch_overhead_s"],
    ["link", "Link per direction", null, "links."]];
  const CUSTOM_NAMES = { bw: "memory bandwidth", mem: "memory (datasheet)", launch: "launch overhead per kernel" };
  let planDtypes = [];

  // A custom key's figures as given: [[key, text], ...].
  const customPairs = (key) => key.slice(CUSTOM.length).split(",").filter(Boolean).map((t) => t.split("="));

  // The machine of a custom key as the page lists machines, and its option in the machine menu.
  function registerCustom(key) {
    if (machinesByKey.has(key)) return;
    const pairs = customPairs(key);
    const source = [{ key: "user", citation: "your figure, given in the URL: no source" }];
    const figures = pairs.map(([k, v]) => ({
      name: CUSTOM_NAMES[k] || (CUSTOM_LINKS.includes(k) ? `${k} link (per direction)` : `peak ${k}`),
      text: v, note: "as you gave it", sources: source }));
    const dtypes = pairs.map(([k]) => k).filter((k) => !CUSTOM_NAMES[k] && !CUSTOM_LINKS.includes(k));
    const dtype = dtypes.includes("bf16") ? "bf16" : dtypes[0] || "bf16";
    const given = Object.fromEntries(pairs);
    const m = { key, name: CUSTOM_NAME, label: CUSTOM_NAME, origin: "custom", default_dtype: dtype, figures,
      precisions: planDtypes.filter((d) => dtypes.includes(d)), detail: `${given[dtype]} ${dtype} · ${given.bw} · your figures, no source` };
    machinesByKey.set(key, m);
    machineDetail.set(key, m.detail);
    let group = $("machine").querySelector("optgroup[data-custom]");
    if (!group) {
      group = document.createElement("optgroup");
      group.label = "Your figures";
      group.dataset.custom = "";
      $("machine").append(group);
    }
    const option = document.createElement("option");
    option.value = key;
    option.textContent = `Custom: ${given[dtype]} ${dtype}, ${given.bw}`;
    group.append(option);
  }

  // The form starts from the machine shown: its figures as the view lists them (a preset's, to change one for a
  // what-if; a custom machine's as given), without spaces.
  function fillCustomForm(m) {
    const form = $("custom-machine");
    const custom = m.origin === "custom" ? Object.fromEntries(customPairs(m.key)) : null;
    const figure = (prefix) => m.figures.find((f) => (f.key || "").startsWith(prefix));
    const link = custom ? CUSTOM_LINKS.find((l) => custom[l] !== undefined) : (figure("links.") || { key: "links.nvlink" }).key.slice(6);
    form.elements.dtype.value = m.default_dtype;
    form.elements.link_name.value = link || "nvlink";
    for (const [name, , key, prefix] of CUSTOM_FIELDS) {
      const k = key || (name === "peak" ? m.default_dtype : link);
      const f = figure(name === "peak" ? `${prefix}${m.default_dtype}` : name === "link" ? `${prefix}${link}` : prefix);
      form.elements[name].value = custom ? custom[k] || "" : f ? f.text.replace(/\s+/g, "") : "";
    }
  }

  // The form's figures as a machine key, or a message naming the first bad box.
  function customKey(form) {
    const parts = [];
    for (const [name, label, key] of CUSTOM_FIELDS) {
      const text = form.elements[name].value.replace(/\s+/g, "");
      if (text === "" && name !== "peak" && name !== "bw") continue;
      if (text === "" || /[,=]/.test(text)) return { error: `${label}: "${text}" is not a figure like 989TFLOP/s, 3.35TB/s, 80GB or 3µs` };
      parts.push(`${key || (name === "peak" ? form.elements.dtype.value : form.elements.link_name.value)}=${text}`);
    }
    return { key: CUSTOM + parts.join(",") };
  }

  function buildCustomForm() {
    const form = document.createElement("form");
    form.id = "custom-machine";
    form.className = "custom-machine";
    const title = document.createElement("h2");
    title.className = "sources-title";
    title.textContent = "A machine of your own: its figures travel in the URL (no source)";
    const row = document.createElement("div");
    row.className = "custom-row";
    const select = (name, label, items) => {
      const el = document.createElement("select");
      el.name = name;
      el.setAttribute("aria-label", label);
      for (const v of items) el.append(new Option(v, v));
      return el;
    };
    row.append(select("dtype", "Precision of the peak", planDtypes));
    for (const [name, label] of CUSTOM_FIELDS) {
      if (name === "link") row.append(select("link_name", "Link", CUSTOM_LINKS));
      const box = document.createElement("label");
      const input = document.createElement("input");
      input.name = name;
      input.type = "text";
      input.size = 10;
      input.placeholder = { peak: "989TFLOP/s", bw: "3.35TB/s", mem: "80GB", launch: "3µs", link: "450GB/s" }[name];
      box.append(`${label} `, input);
      row.append(box);
    }
    const button = document.createElement("button");
    button.type = "submit";
    button.textContent = "Use these figures";
    row.append(button);
    form.append(title, row);
    form.addEventListener("submit", async (e) => {
      e.preventDefault();
      const { key, error } = customKey(form);
      if (error) { showStale(error, "machine"); return; }
      // the API checks the figures (the machine view draws none of its own): one token of the seed's layer
      const resp = await fetch(`/api/layer?${new URLSearchParams({ machine: key, tokens: "1" })}`);
      if (resp.status === 422) {
        const body = await resp.json();
        showStale((body.detail && body.detail[0] && body.detail[0].msg) || "the machine's figures were refused", "machine");
        return;
      }
      registerCustom(key);
      set("machine", key);
    });
    $("panel-machine").insertBefore(form, $("machine-sources-title")); // below the figures, above their sources
  }

  // -- why each op sits where it does ------------------------------------------------------------

  function cell(tag, textValue, cls) {
    const el = document.createElement(tag);
    el.textContent = textValue;
    if (cls) el.className = cls;
    return el;
  }

  // The "fix this first" line and the op table (the charts' text alternative), as the API words them.
  function drawExplain(data) {
    setText("fix-first", data.fix_first ? data.fix_first.text : "");
    const rows = (data.ops_table || []).map((r) => {
      const tr = document.createElement("tr");
      const name = cell("th", r.name);
      name.scope = "row";
      tr.append(cell("td", String(r.index), "num"), name, cell("td", r.time, "num"), cell("td", r.share, "num"),
        cell("td", r.flops, "num"), cell("td", r.bytes, "num"), cell("td", r.intensity, "num"),
        cell("td", `${r.bound === "memory" ? "▲" : "●"} ${r.bound}`, `bound ${r.bound}`), cell("td", r.why),
        cell("td", r.helps), cell("td", r.cannot));
      return tr;
    });
    $("ops-table").tBodies[0].replaceChildren(...rows);
    const f = data.fixes;
    if (!f) return;
    const items = [cell("p", f.ridge)];
    for (const [bound, title] of [["memory", "▲ Memory-bound ops"], ["compute", "● Compute-bound ops"]]) {
      const dl = document.createElement("dl");
      dl.append(cell("dt", `${title}: what can shorten them`), ...f[bound].helps.map((t) => cell("dd", t)),
        cell("dt", "what cannot"), ...f[bound].cannot.map((t) => cell("dd", t)));
      items.push(dl);
    }
    $("ops-fixes").replaceChildren(...items);
  }

  // -- compare with a pinned baseline ------------------------------------------------------------

  // What each view compares: [name (or "@key" of the shown readouts' text), number field, text field].
  // The ratio is the shown configuration's number over the baseline's.
  const COMPARE = {
    layer: [["Predicted layer time", "total_us", "total"], ["FLOPs-only estimate", "flops_only_us", "flops_only"],
      ["Bytes-only estimate", "bytes_only_us", "bytes_only"], ["Launch overhead", "launch_us", "launch"]],
    model: [["@latency_name", "latency_s", "latency"], ["@throughput_name", "tokens_per_s", "throughput"],
      ["Weights + KV cache held", "memory_total_bytes", "memory"]],
    decode: [["@step_name", "step_s", "step"], ["@throughput_name", "tokens_per_s", "throughput"],
      ["Largest batch in memory", "max_batch_in_memory", "max_batch"]],
    serving: [["@best_name", "users", "best"], ["Output tokens/s per GPU", "output_tokens_per_s_per_gpu", "gpu"],
      ["Tokens/s per user", "per_user_tokens_per_s", "user"],
      ["@ttft_name", "ttft_s", "ttft"], ["@tpot_name", "tpot_s", "tpot"]],
  };
  const ratioFormat = new Intl.NumberFormat("en-US", { minimumSignificantDigits: 3, maximumSignificantDigits: 3 });

  // The one sum this page does: now ÷ baseline of a figure both API answers give (two payloads
  // no single request holds), at 3 significant figures.
  function ratioOf(now, base) {
    if (typeof now !== "number" || typeof base !== "number" || !(base > 0)) return "—";
    return `${ratioFormat.format(now / base)}×`;
  } // end ratioOf

  // The baseline's bar lengths in the shown chart's unit (each payload picks its own: µs, ms or s).
  function rescale(values, fromSecondsPerUnit, toSecondsPerUnit) {
    return values.map((v) => (v === null ? null : v * fromSecondsPerUnit / toSecondsPerUnit));
  } // end rescale

  // A control's value as its control shows it (a select's option text).
  function shownValue(name, value) {
    const c = CONTROLS[name];
    const el = c && $(c.input);
    if (el && el.tagName === "SELECT") {
      const option = [...el.options].find((o) => o.value === value);
      if (option) return option.textContent;
    }
    return value === undefined || value === "" ? "default" : value;
  }

  function pinNow() {
    const qs = query();
    const pinState = {};
    for (const [name, value] of new URLSearchParams(qs)) pinState[name] = value;
    pin = { view, qs, state: pinState };
    update("push");
  }

  function unpin() {
    pin = null;
    $("pin").focus(); // the Unpin button hides: focus stays in the controls
    update("push");
  }

  function drawCompare(shown, data, base) {
    const box = $("compare");
    $("unpin").hidden = !pin;
    $("base-key").hidden = !(pin && pin.view === "layer" && shown === "layer" && shownBase);
    box.hidden = !pin;
    if (!pin) return;
    const note = $("compare-note");
    const table = $("compare-table");
    if (pin.view !== shown) {
      note.textContent = `The baseline was pinned in the ${viewLabel(pin.view)} view: open it to compare, or pin this one.`;
      table.hidden = true;
      return;
    }
    if (base === null || base.refused) {
      note.textContent = `The baseline could not be drawn: ${base ? base.refused : "no answer"}.`;
      table.hidden = true;
      return;
    }
    const names = new Set([...Object.keys(pin.state), ...new URLSearchParams(query()).keys()]);
    const differs = [...names].filter((n) => (pin.state[n] ?? "") !== (state[n] ?? "") && (viewParameters[shown] || []).includes(n))
      .map((n) => `${CONTROLS[n] ? labelOf(n) : n}: ${shownValue(n, pin.state[n])} → ${shownValue(n, state[n])}`);
    note.textContent = differs.length ? `Baseline against now. What differs: ${differs.join("; ")}.`
      : "Baseline against now: the same settings (change a control to compare).";
    const now = data.readouts;
    const was = base.readouts;
    const rows = COMPARE[shown].map(([name, field, textField]) => {
      const tr = document.createElement("tr");
      const label = name.startsWith("@") ? now.text[name.slice(1)] : name;
      const a = was[field], b = now[field];
      const ratio = ratioOf(b, a);
      for (const [cell, cls] of [[label, ""], [was.text[textField] ?? "—", "num"], [now.text[textField] ?? "—", "num"], [ratio, "num"]]) {
        const td = document.createElement(cls ? "td" : "th");
        if (!cls) td.scope = "row";
        td.textContent = cell;
        if (cls) td.className = cls;
        tr.append(td);
      }
      return tr;
    });
    table.tBodies[0].replaceChildren(...rows);
    table.hidden = false;
  }

  // -- after each draw --------------------------------------------------------------------------

  async function render(shown, data, pageQs, base = null) {
    shownBase = base && !base.refused ? base : null;
    await VIEWS[shown].draw(data);
    if (shown !== view) return; // the view changed while it drew: the next draw is the one shown
    if (VIEWS[shown].endpoint) await drawCompare(shown, data, base);
    if (shown === "layer") drawExplain(data);
    renderCount += 1;
    document.body.dataset.renderCount = String(renderCount);
    document.body.dataset.query = pageQs;
    document.body.dataset.renderedView = shown;
    document.dispatchEvent(new CustomEvent("roofline:rendered", { detail: { count: renderCount, query: pageQs, view: shown, data } }));
  }

  // The page as its URL has it (at the start, and on Back and Forward): the state, the view, what
  // the link set by hand (never re-defaulted) and a notice of what it could not use.
  function loadUrl() {
    const { state: fromUrl, notices } = stateFromUrl();
    state = fromUrl;
    touched.clear();
    view = viewFromUrl();
    // a linked value counts as set by hand only where it differs from the default the page would
    // give it (the view's attention, the machine's launch): the page writes every value in its URL
    const url = new URLSearchParams(window.location.search);
    if (url.has("layer")) touched.add("layer");
    if (url.has("attention") && state.attention !== viewAttention[view]) touched.add("attention");
    if (url.has("launch_overhead_us") && machineLaunchUs.has(state.machine) &&
        Number(state.launch_overhead_us) !== Number(machineLaunchUs.get(state.machine))) touched.add("launch_overhead_us");
    followDefaults();
    showView();
    showControls();
    showNotice(notices);
  }

  // Each number box takes the range the API checks, and a name: its label's, or its slider's.
  function applyLimits() {
    for (const [name, c] of Object.entries(CONTROLS)) {
      const el = $(c.input);
      if (limits[name] && el.type === "number") { el.min = String(limits[name][0]); el.max = String(limits[name][1]); }
      if (c.slider) {
        const label = document.querySelector(`label[for="${c.slider}"]`);
        if (label) {
          if (!label.id) label.id = `${c.slider}-label`;
          el.setAttribute("aria-labelledby", label.id);
        }
      }
    }
  }

  // -- start ------------------------------------------------------------------------------------

  // On a phone, what is marked data-phone="closed" starts closed (open on a desktop).
  function closeOnPhone() {
    if (!window.matchMedia(PHONE).matches) return;
    for (const el of document.querySelectorAll('details[data-phone="closed"]')) el.open = false;
  }

  async function start() {
    closeOnPhone();
    try {
      const [machines, models, options] = await Promise.all(
        ["/api/machines", "/api/models", "/api/options"].map(getJSON));
      defaults = { ...options.defaults, ...(options.serving_defaults || {}) };
      viewParameters = options.view_parameters || {};
      tokenStops = options.token_stops;
      for (const id of ["weights", "kv-cache"]) {
        fillSelect(id, [{ key: "", label: "same as the precision" }, ...(options.plan_dtypes || []).map((d) => ({ key: d, label: d }))]);
      }
      $("tokens").max = String(tokenStops.length - 1);
      fillSelect("machine", machines, (m) => (m.origin === "preset" ? "Presets" : `From ${m.origin}`));
      fillSelect("model", models);
      machineDetail = new Map(machines.map((m) => [m.key, m.detail]));
      machinesByKey = new Map(machines.map((m) => [m.key, m]));
      modelKinds = new Map(models.map((m) => [m.key, m.layer_kinds]));
      machineLaunchUs = new Map(machines.map((m) => [m.key, m.launch_overhead_us]));
      viewAttention = options.view_attention || {};
      limits = options.limits || {};
      planDtypes = options.plan_dtypes || [];
      buildCustomForm();
      buildServingControls(options.serving_controls);
      applyLimits();
      loadUrl();
      bindControls();
      await update("replace");
    } catch (err) {
      showError(`Could not start: ${err}`, null);
    }
  }

  if (document.readyState === "loading") document.addEventListener("DOMContentLoaded", start);
  else start();
})();
