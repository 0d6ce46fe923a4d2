// Teaching mode: the "Exercises" view. It asks /api/exercise for a question (kind and seed, kept
// in the URL so a link reproduces it), sends the learner's answer to /api/exercise/check and shows
// the verdict and the library's derivation. It computes nothing: every number, verdict and step of
// the derivation comes from the server. The score (each exercise's first readable answer) is kept
// in localStorage. app.js calls window.rooflineLearn.show() when the view is drawn.
"use strict";

(() => {
  const STORE = "roofline.learn.v1";
  const $ = (id) => document.getElementById(id);
  let current = null; // { kind, seed } shown
  let exercise = null; // /api/exercise's body for it
  let bound = false;
  let seq = 0;

  // -- the URL: view=learn&kind=...&seed=... beside whatever app.js keeps there ------------------

  function fromUrl() {
    const url = new URLSearchParams(window.location.search);
    const kind = url.get("kind");
    const seed = url.get("seed");
    return kind !== null && seed !== null ? { kind, seed } : null;
  }
  const initial = fromUrl(); // read before app.js first rewrites the URL

  function writeUrl(which, mode) {
    const url = new URLSearchParams(window.location.search);
    if (url.get("kind") === which.kind && url.get("seed") === which.seed) return;
    url.set("view", "learn");
    url.set("kind", which.kind);
    url.set("seed", which.seed);
    const next = `${window.location.pathname}?${url.toString()}`;
    if (mode === "push") window.history.pushState(null, "", next);
    else window.history.replaceState(null, "", next);
  }

  // -- the score ----------------------------------------------------------------------------------

  function answers() {
    try {
      const stored = JSON.parse(window.localStorage.getItem(STORE) || "{}");
      return stored && typeof stored.answers === "object" && stored.answers ? stored.answers : {};
    } catch (err) {
      return {};
    }
  }

  function record(key, correct) {
    const all = answers();
    if (key in all) return; // the first readable answer to an exercise counts
    all[key] = correct;
    try { window.localStorage.setItem(STORE, JSON.stringify({ answers: all })); } catch (err) { /* storage off */ }
  }

  function showScore() {
    const all = Object.values(answers());
    const right = all.filter((v) => v === true).length;
    $("learn-score").textContent = all.length ? `${right} of ${all.length} correct` : "No answers yet";
  }

  // -- drawing ------------------------------------------------------------------------------------

  function el(tag, text, cls) {
    const node = document.createElement(tag);
    if (text !== undefined) node.textContent = text;
    if (cls) node.className = cls;
    return node;
  }

  function fillKinds(kinds, selected) {
    const select = $("learn-kind");
    if (select.options.length !== kinds.length) {
      select.replaceChildren(...kinds.map((k) => { const o = el("option", k.label); o.value = k.key; return o; }));
    }
    select.value = selected;
  }

  function drawAnswer(ask) {
    const box = $("learn-answer");
    if (ask.form === "choice") {
      const set = el("fieldset");
      set.append(el("legend", ask.label));
      for (const choice of ask.choices) {
        const label = el("label", "", "choice");
        const input = el("input");
        input.type = "radio";
        input.name = "learn-choice";
        input.value = choice;
        label.append(input, ` ${choice}-bound`);
        set.append(label);
      }
      box.replaceChildren(set);
      $("learn-hint").textContent = "Choose one, then Check (or press Enter).";
      return;
    }
    const label = el("label", ask.label);
    label.htmlFor = "learn-input";
    const input = el("input");
    input.id = "learn-input";
    input.type = "text";
    input.inputMode = "decimal";
    input.placeholder = ask.example;
    input.setAttribute("aria-describedby", "learn-hint");
    box.replaceChildren(label, input);
    $("learn-hint").textContent = `Answer in ${ask.unit}; counted right ${ask.tolerance_text}.`;
  }

  function drawExercise(ex) {
    fillKinds(ex.kinds, ex.kind);
    $("learn-title").textContent = ex.title;
    $("learn-question").textContent = ex.question;
    $("learn-given").replaceChildren(...ex.given.flatMap((g) => [el("dt", g.label), el("dd", g.value)]));
    const table = $("learn-table");
    table.hidden = ex.table.length === 0;
    if (ex.table.length) {
      const [head, ...rows] = ex.table;
      const tr = el("tr");
      tr.append(...head.map((h) => { const th = el("th", h); th.scope = "col"; return th; }));
      table.tHead.replaceChildren(tr);
      table.tBodies[0].replaceChildren(...rows.map((row) => {
        const r = el("tr");
        r.append(...row.map((cell, i) => el("td", cell, i === 0 ? "" : (cell === "memory" || cell === "compute" ? cell : "num"))));
        return r;
      }));
    }
    drawAnswer(ex.ask);
    showVerdict(null);
  }

  function showVerdict(v) {
    const box = $("learn-verdict");
    box.dataset.state = v ? v.status : "";
    $("learn-verdict-mark").textContent = v ? { correct: "✓", incorrect: "✗", unreadable: "?" }[v.status] : "";
    $("learn-verdict-text").textContent = v ? v.message : "";
    const steps = v && v.derivation.length ? v.derivation : [];
    $("learn-steps").replaceChildren(...steps.map((s) => el("li", s)));
    $("learn-derivation").hidden = steps.length === 0;
    $("panel-learn").dataset.checked = v ? v.status : "";
  }

  function showProblem(message) {
    showVerdict({ status: "unreadable", message, derivation: [] });
  }

  // -- requests -------------------------------------------------------------------------------------

  async function load(which) {
    const mine = ++seq;
    const qs = new URLSearchParams({ kind: which.kind, seed: which.seed });
    let resp, body;
    try {
      resp = await fetch(`/api/exercise?${qs}`);
      body = await resp.json();
    } catch (err) {
      if (mine === seq) showProblem(`The server did not answer (${err.message || err}).`);
      return;
    }
    if (mine !== seq) return;
    if (!resp.ok) { // a link with a kind or seed the server does not know: start at the first exercise
      const fallback = { kind: "ridge", seed: "0" };
      if (which.kind !== fallback.kind || which.seed !== fallback.seed) {
        await go(fallback, "replace");
        showProblem(`This link's exercise (kind=${which.kind}, seed=${which.seed}) does not exist; here is the first one.`);
      }
      return;
    }
    current = { kind: body.kind, seed: String(body.seed) };
    exercise = body;
    drawExercise(body);
    document.body.dataset.learn = `${current.kind}:${current.seed}`;
  }

  function answerText() {
    if (exercise && exercise.ask.form === "choice") {
      const picked = document.querySelector('input[name="learn-choice"]:checked');
      return picked ? picked.value : "";
    }
    const input = $("learn-input");
    return input ? input.value : "";
  }

  async function check() {
    if (!current) return;
    const mine = seq;
    const qs = new URLSearchParams({ kind: current.kind, seed: current.seed, answer: answerText() });
    let resp, body;
    try {
      resp = await fetch(`/api/exercise/check?${qs}`);
      body = await resp.json();
    } catch (err) {
      showProblem(`The server did not answer (${err.message || err}).`);
      return;
    }
    if (mine !== seq) return; // another exercise is shown now
    if (!resp.ok) {
      const detail = Array.isArray(body.detail) ? body.detail.map((d) => d.msg).join("; ") : `HTTP ${resp.status}`;
      showProblem(`The answer could not be checked: ${detail}`);
      return;
    }
    if (body.status !== "unreadable") record(`${body.kind}:${body.seed}`, body.correct);
    showVerdict(body);
    showScore();
  }

  async function go(which, mode) {
    writeUrl(which, mode);
    await load(which);
  }

  function bind() {
    $("learn-form").addEventListener("submit", (e) => { e.preventDefault(); check(); });
    $("learn-form").addEventListener("keydown", (e) => { // Enter on a radio button checks too
      if (e.key === "Enter" && e.target.type === "radio") { e.preventDefault(); check(); }
    });
    $("learn-next").addEventListener("click", () => {
      if (exercise) go({ kind: exercise.kind, seed: String(exercise.next_seed) }, "push");
    });
    $("learn-kind").addEventListener("change", () => go({ kind: $("learn-kind").value, seed: "0" }, "push"));
    $("learn-reset").addEventListener("click", () => {
      try { window.localStorage.removeItem(STORE); } catch (err) { /* storage off */ }
      showScore();
    });
  }

  // The view is shown (a tab, a link, Back): the URL's exercise, else the last one shown.
  async function show() {
    if (!bound) { bind(); bound = true; }
    showScore();
    const which = fromUrl() || current || initial || { kind: "ridge", seed: "0" };
    writeUrl(which, "replace");
    if (current && exercise && which.kind === current.kind && which.seed === current.seed) return;
    await load(which);
  }

  window.rooflineLearn = { show };
  // app.js may have drawn this view before this file ran (deferred scripts wait for each other's
  // download, and its first fetches can answer meanwhile): then show it now.
  if (document.body.dataset.view === "learn") show();
})();
