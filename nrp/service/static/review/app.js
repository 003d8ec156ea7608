/* nrp review: the reviewer's page. Plain JavaScript, no framework, nothing loaded from elsewhere.
 *
 * Screens (by the address's hash): #/ projects, #/p/NAME items and progress,
 * #/p/NAME/i/ITEM one item (rank, grade or verify). Every change is saved at once with a PUT
 * that carries the version it was based on and a save id: a retry after a lost answer is the
 * same save (the server stores it once), and a 409 means someone saved first: the page shows
 * the saved value. The token stays in sessionStorage (this tab) and is sent as a bearer token.
 */
"use strict";

const TOKEN_KEY = "nrp-review-token";
const main = document.getElementById("main");
const statusLine = document.getElementById("status");
let token = sessionStorage.getItem(TOKEN_KEY) || "";
let screen = null; // the current screen's state, for the keyboard handler

function el(tag, attrs, ...children) {
  const node = document.createElement(tag);
  for (const [key, value] of Object.entries(attrs || {})) {
    if (key === "class") node.className = value;
    else if (key.startsWith("on")) node.addEventListener(key.slice(2), value);
    else if (value !== null && value !== undefined && value !== false) node.setAttribute(key, value);
  }
  for (const child of children.flat()) {
    if (child === null || child === undefined) continue;
    node.append(child instanceof Node ? child : document.createTextNode(String(child)));
  }
  return node;
}

function setStatus(text, kind) {
  statusLine.textContent = text;
  statusLine.className = kind || "";
}

async function call(method, path, body) {
  const response = await fetch(path, {
    method,
    headers: { Authorization: "Bearer " + token, "Content-Type": "application/json" },
    body: body === undefined ? undefined : JSON.stringify(body),
    keepalive: method === "PUT", // a save sent as the tab closes still reaches the server
  });
  let data = null;
  try { data = await response.json(); } catch (e) { data = null; }
  if (response.status === 401) { logout("Your token was not accepted."); throw new Error("401"); }
  return { status: response.status, data };
}

function newSaveId() {
  if (window.crypto && crypto.randomUUID) return crypto.randomUUID();
  return Date.now().toString(36) + "-" + Math.random().toString(36).slice(2);
}

/* One save at a time per item; a change made while a save is in flight waits for it and
 * is sent after it with the new version (only the latest value is sent). */
function makeSaver(project, itemId, state, onConflict) {
  let inFlight = false;
  let pending = null;
  async function send(value) {
    inFlight = true;
    const saveId = newSaveId();
    setStatus("saving…", "saving");
    for (let attempt = 0; ; attempt++) {
      try {
        const path = `/v1/review/projects/${encodeURIComponent(project)}/items/${encodeURIComponent(itemId)}`;
        const { status, data } = await call("PUT", path, { value, version: state.version, save_id: saveId });
        if (status === 200) {
          state.version = data.version;
          setStatus(`saved ✓ (version ${data.version})`, "saved");
        } else if (status === 409) {
          state.version = data.current.version;
          pending = null;
          setStatus("saved elsewhere: showing the saved version", "error");
          onConflict(data.current.value, data.detail);
        } else {
          setStatus(`not saved: ${data && data.detail ? JSON.stringify(data.detail) : status}`, "error");
        }
        break;
      } catch (err) {
        if (String(err.message) === "401") break;
        setStatus("offline: retrying…", "error"); // same save id: stored once however often sent
        await new Promise((resolve) => setTimeout(resolve, Math.min(4000, 500 * (attempt + 1))));
      }
    }
    inFlight = false;
    if (pending !== null) { const next = pending; pending = null; send(next); }
  }
  return function save(value) {
    if (inFlight) { pending = value; return; }
    send(value);
  };
}

/* ---------------------------------------------------------------- login, projects, items */

function logout(message) {
  token = "";
  sessionStorage.removeItem(TOKEN_KEY);
  location.hash = "#/";
  showLogin(message);
}

function showLogin(message) {
  screen = null;
  document.getElementById("who").textContent = "";
  const input = el("input", { type: "password", id: "token", autocomplete: "off", placeholder: "reviewer token" });
  const form = el("form", { class: "panel", onsubmit: async (event) => {
    event.preventDefault();
    token = input.value.trim();
    sessionStorage.setItem(TOKEN_KEY, token);
    route();
  } },
    el("h2", {}, "Sign in"),
    message ? el("p", { class: "conflict" }, message) : null,
    el("p", {}, "Paste the token you were given."),
    input, " ", el("button", { class: "primary", type: "submit", id: "login" }, "Sign in"));
  main.replaceChildren(form);
  input.focus();
}

async function showProjects() {
  const { data } = await call("GET", "/v1/review/me");
  document.getElementById("who").textContent = data.reviewer ? `reviewer: ${data.reviewer}` : "admin";
  if (data.projects.length === 1 && data.reviewer) {
    location.replace(`#/p/${encodeURIComponent(data.projects[0].name)}`);
    return;
  }
  screen = null;
  main.replaceChildren(el("div", { class: "panel" }, el("h2", {}, "Projects"),
    el("table", {}, el("tr", {}, el("th", {}, "project"), el("th", {}, "kinds"), el("th", {}, "done")),
      data.projects.map((p) => el("tr", {},
        el("td", {}, el("a", { href: `#/p/${encodeURIComponent(p.name)}` }, p.name)),
        el("td", {}, p.kinds.join(", ")),
        el("td", {}, p.assigned === undefined ? "" : `${p.done} / ${p.assigned}`))))));
}

async function showItems(project) {
  const [{ data: me }, items, progress] = await Promise.all([
    call("GET", "/v1/review/me"),
    call("GET", `/v1/review/projects/${encodeURIComponent(project)}/items`),
    call("GET", `/v1/review/projects/${encodeURIComponent(project)}/progress`),
  ]);
  document.getElementById("who").textContent = me.reviewer ? `reviewer: ${me.reviewer}` : "admin";
  if (items.status !== 200) { main.replaceChildren(el("p", { class: "conflict" }, items.data.detail)); return; }
  const list = items.data.items;
  const rows = list.map((item, i) => el("tr", { "data-index": i },
    el("td", {}, el("a", { href: `#/p/${encodeURIComponent(project)}/i/${encodeURIComponent(item.id)}`, class: "item-link" }, item.kind)),
    el("td", {}, item.qid),
    el("td", {}, item.question),
    el("td", { class: item.done ? "done" : "todo" }, item.done ? "✓ done" : "to do")));
  const bars = progress.data.reviewers.map((r) => el("tr", {},
    el("td", {}, r.reviewer),
    el("td", {}, `${r.done} / ${r.assigned}`),
    el("td", {}, el("div", { class: "bar" }, el("span", { style: `width:${r.assigned ? (100 * r.done) / r.assigned : 0}%` }))),
    el("td", {}, ["rank", "grade", "verify"].filter((k) => r[k]).map((k) => `${k} ${r[k].done}/${r[k].assigned}`).join(" · "))));
  main.replaceChildren(
    el("div", { class: "panel", id: "progress" }, el("h2", {}, `Progress: ${project}`), el("table", {}, bars)),
    el("div", { class: "panel" }, el("h2", {}, "Your items"),
      el("p", { class: "keys" }, el("kbd", {}, "j"), "/", el("kbd", {}, "k"), " move, ", el("kbd", {}, "Enter"), " open"),
      el("table", { id: "items" }, el("tr", {}, el("th", {}, "kind"), el("th", {}, "query"), el("th", {}, "question"), el("th", {}, "status")), rows)));
  const first = list.findIndex((item) => !item.done);
  screen = { kind: "items", rows, focus: Math.max(0, first), project, list };
  focusRow();
}

function focusRow() {
  screen.rows.forEach((row, i) => row.classList.toggle("focus", i === screen.focus));
}

/* ------------------------------------------------------------------------- one item */

async function showItem(project, itemId) {
  const path = `/v1/review/projects/${encodeURIComponent(project)}/items/${encodeURIComponent(itemId)}`;
  const [{ status, data }, { data: list }] = await Promise.all([
    call("GET", path), call("GET", `/v1/review/projects/${encodeURIComponent(project)}/items`)]);
  if (status !== 200) { main.replaceChildren(el("p", { class: "conflict" }, data.detail)); return; }
  const ids = list.items.map((i) => i.id);
  const position = ids.indexOf(itemId);
  const state = { version: data.version, project, itemId, next: ids[position + 1] || null, prev: ids[position - 1] || null };
  document.getElementById("who").textContent = `item ${position + 1} of ${ids.length}`;
  const item = data.item;
  const nav = el("div", { class: "nav" },
    el("a", { href: `#/p/${encodeURIComponent(project)}` }, "← all items"),
    state.prev ? el("a", { href: itemHash(project, state.prev), id: "prev" }, "‹ previous") : null,
    state.next ? el("a", { href: itemHash(project, state.next), id: "next" }, "next ›") : null);
  const head = el("div", { class: "panel" }, el("div", { class: "label" }, `${item.kind} · query ${item.qid}`),
    el("div", { class: "question", id: "question" }, item.question));
  if (item.kind === "rank") rankScreen(item, data.value, state, nav, head);
  else if (item.kind === "grade") gradeScreen(item, data.value, data.scales, state, nav, head);
  else verifyScreen(item, data.value, state, nav, head);
}

function itemHash(project, id) {
  return `#/p/${encodeURIComponent(project)}/i/${encodeURIComponent(id)}`;
}

function conflictNote(detail) {
  const note = document.getElementById("conflict");
  if (note) note.textContent = detail;
}

/* rank: groups best first; a group of several is a tie. Drag a card onto a gap (between
 * groups) to place it there alone, or onto a group to tie it with that group. */
function rankScreen(item, value, state, nav, head) {
  const texts = Object.fromEntries(item.candidates.map((c) => [c.cid, c.text]));
  let groups = value ? value.ranking.map((g) => g.slice()) : item.candidates.map((c) => [c.cid]);
  let focus = groups[0][0];
  const save = makeSaver(state.project, state.itemId, state, (current) => {
    if (current) groups = current.ranking.map((g) => g.slice());
    conflictNote("Saved elsewhere since you opened it: this is the saved ranking.");
    render();
  });
  const list = el("ol", { id: "ranking" });
  const changed = () => { groups = groups.filter((g) => g.length); render(); save({ ranking: groups }); };
  function take(cid) {
    for (const g of groups) { const i = g.indexOf(cid); if (i >= 0) { g.splice(i, 1); return; } }
  }
  function place(cid, gapIndex) { // as its own group before groups[gapIndex]
    const target = groups[gapIndex] || null;
    take(cid);
    const at = target ? groups.indexOf(target) : groups.length;
    groups.splice(at, 0, [cid]);
    changed();
  }
  function tie(cid, groupIndex) {
    const target = groups[groupIndex];
    if (target.includes(cid)) return;
    take(cid);
    target.push(cid);
    changed();
  }
  function dropZone(node, onDrop) {
    node.addEventListener("dragover", (e) => { e.preventDefault(); node.classList.add("over"); });
    node.addEventListener("dragleave", () => node.classList.remove("over"));
    node.addEventListener("drop", (e) => {
      e.preventDefault();
      node.classList.remove("over");
      const cid = e.dataTransfer.getData("text/plain");
      if (cid && texts[cid] !== undefined) { focus = cid; onDrop(cid); }
    });
  }
  function render() {
    const nodes = [];
    let rank = 1;
    groups.forEach((group, gi) => {
      const gap = el("li", { class: "gap", "data-gap": gi });
      dropZone(gap, (cid) => place(cid, gi));
      nodes.push(gap);
      const cards = group.map((cid) => {
        const card = el("div", { class: "card" + (cid === focus ? " focus" : ""), draggable: "true", "data-cid": cid, tabindex: "-1" },
          el("span", { class: "cid" }, cid), el("span", { class: "text" }, texts[cid]));
        card.addEventListener("dragstart", (e) => { e.dataTransfer.setData("text/plain", cid); e.dataTransfer.effectAllowed = "move"; card.classList.add("dragging"); });
        card.addEventListener("dragend", () => card.classList.remove("dragging"));
        card.addEventListener("click", () => { focus = cid; render(); });
        return card;
      });
      const row = el("li", { class: "group" + (group.length > 1 ? " tied" : ""), "data-group": gi },
        el("span", { class: "rank" }, group.length > 1 ? `${rank}=` : String(rank)), cards);
      dropZone(row, (cid) => tie(cid, gi));
      nodes.push(row);
      rank += group.length;
    });
    const last = el("li", { class: "gap", "data-gap": groups.length });
    dropZone(last, (cid) => place(cid, groups.length));
    nodes.push(last);
    list.replaceChildren(...nodes);
  }
  function where(cid) {
    const gi = groups.findIndex((g) => g.includes(cid));
    return [gi, groups[gi].indexOf(cid)];
  }
  const order = () => groups.flat();
  screen = {
    kind: "rank",
    key(event) {
      const flat = order();
      const at = flat.indexOf(focus);
      const [gi] = where(focus);
      if (event.key === "j") { focus = flat[Math.min(flat.length - 1, at + 1)]; render(); }
      else if (event.key === "k") { focus = flat[Math.max(0, at - 1)]; render(); }
      else if (event.key === "u") {
        if (groups[gi].length > 1) place(focus, gi); // out of its tie, just above it
        else if (gi > 0) { [groups[gi - 1], groups[gi]] = [groups[gi], groups[gi - 1]]; changed(); }
      } else if (event.key === "d") {
        if (groups[gi].length > 1) { take(focus); groups.splice(gi + 1, 0, [focus]); changed(); }
        else if (gi < groups.length - 1) { [groups[gi + 1], groups[gi]] = [groups[gi], groups[gi + 1]]; changed(); }
      } else if (event.key === "=") {
        if (gi > 0) tie(focus, gi - 1); // tie with the group above
      } else if (event.key === "Enter") {
        save({ ranking: groups });
        if (state.next) location.hash = itemHash(state.project, state.next);
      } else return false;
      return true;
    },
  };
  render();
  main.replaceChildren(nav, head,
    el("div", { id: "conflict", class: "keys" }),
    el("p", { class: "keys" }, "Best first. Drag a card between rows to move it, onto a row to tie. Keys: ",
      el("kbd", {}, "j"), "/", el("kbd", {}, "k"), " focus, ", el("kbd", {}, "u"), "/", el("kbd", {}, "d"), " move up/down, ",
      el("kbd", {}, "="), " tie with the row above, ", el("kbd", {}, "Enter"), " save and next."),
    list);
}

/* grade: one choice per dimension on its declared scale, with what each label means. */
function gradeScreen(item, value, scales, state, nav, head) {
  let labels = value ? { ...value.labels } : {};
  let focus = 0;
  const save = makeSaver(state.project, state.itemId, state, (current) => {
    labels = current ? { ...current.labels } : {};
    conflictNote("Saved elsewhere since you opened it: these are the saved grades.");
    render();
  });
  const dims = item.dimensions;
  const box = el("div", { id: "grades" });
  function choose(dimension, label) {
    labels[dimension] = label;
    render();
    save({ labels });
  }
  function render() {
    box.replaceChildren(...dims.map((d, di) => {
      const scale = scales[d];
      return el("fieldset", { class: di === focus ? "focus" : "", "data-dimension": d },
        el("legend", {}, d),
        scale.description ? el("div", { class: "meaning" }, scale.description) : null,
        scale.grades.map((g) => el("label", { class: "choice" },
          el("input", { type: "radio", name: d, value: g.label, checked: labels[d] === g.label ? "checked" : null,
            onchange: () => choose(d, g.label) }),
          el("b", {}, g.label), el("span", { class: "meaning" }, g.meaning))));
    }));
  }
  screen = {
    kind: "grade",
    key(event) {
      const scale = scales[dims[focus]];
      const byText = scale.grades.find((g) => g.label === event.key);
      if (event.key === "j") { focus = Math.min(dims.length - 1, focus + 1); render(); }
      else if (event.key === "k") { focus = Math.max(0, focus - 1); render(); }
      else if (byText) { choose(dims[focus], byText.label); if (focus < dims.length - 1) { focus++; render(); } }
      else if (event.key === "Enter") { if (state.next) location.hash = itemHash(state.project, state.next); }
      else return false;
      return true;
    },
  };
  render();
  main.replaceChildren(nav, head,
    el("div", { class: "panel" }, el("div", { class: "label" }, "answer"), el("div", { class: "text", id: "answer" }, item.answer)),
    el("div", { id: "conflict", class: "keys" }),
    el("p", { class: "keys" }, "Keys: ", el("kbd", {}, "j"), "/", el("kbd", {}, "k"), " dimension, the label's key to choose it, ",
      el("kbd", {}, "Enter"), " next item."),
    box);
}

/* verify: the judge's label with its confidence, confirmed or corrected. */
function verifyScreen(item, value, state, nav, head) {
  let label = value ? value.label : null;
  const save = makeSaver(state.project, state.itemId, state, (current) => {
    label = current ? current.label : null;
    conflictNote("Saved elsewhere since you opened it: this is the saved verdict.");
    render();
  });
  const buttons = el("div", { class: "verdicts", id: "verdicts" });
  const confirmable = item.judge_label !== null && item.choices.includes(item.judge_label);
  function choose(choice) { label = choice; render(); save({ label }); }
  function render() {
    buttons.replaceChildren(
      el("button", { id: "confirm", class: confirmable && label === item.judge_label ? "chosen" : "primary",
        disabled: confirmable ? null : "disabled", onclick: () => choose(item.judge_label) },
        `Confirm ${item.judge_label || "(no label)"} (c)`),
      ...item.choices.map((choice, i) => el("button", {
        class: label === choice ? "chosen" : "", "data-choice": choice, onclick: () => choose(choice) },
        `${choice} (${shortcut(choice, i)})`)));
  }
  function shortcut(choice, i) {
    const words = { TRUE: "t", FALSE: "f", "NOT GIVEN": "n" };
    return words[choice] || String(i + 1);
  }
  screen = {
    kind: "verify",
    key(event) {
      if (event.key === "c" && confirmable) choose(item.judge_label);
      else if (event.key === "Enter") { if (state.next) location.hash = itemHash(state.project, state.next); }
      else {
        const i = item.choices.findIndex((choice, j) => shortcut(choice, j) === event.key);
        if (i < 0) return false;
        choose(item.choices[i]);
      }
      return true;
    },
  };
  render();
  const confidence = item.confidence === null ? "no confidence" : `confidence ${item.confidence.toFixed(2)}`;
  main.replaceChildren(nav, head,
    el("div", { class: "panel" }, el("div", { class: "label" }, "reference"), el("div", { class: "text", id: "reference" }, item.reference || "(none)")),
    el("div", { class: "panel" }, el("div", { class: "label" }, "answer"), el("div", { class: "text", id: "answer" }, item.answer)),
    el("div", { class: "panel judge", id: "judge" }, "The judge said ", el("b", {}, item.judge_label || "(no label)"),
      " with ", el("span", { class: "conf" }, confidence), ". Is it right?", buttons),
    el("div", { id: "conflict", class: "keys" }),
    el("p", { class: "keys" }, "Keys: ", el("kbd", {}, "c"), " confirm, ", el("kbd", {}, "t"), "/", el("kbd", {}, "f"), "/",
      el("kbd", {}, "n"), " TRUE / FALSE / NOT GIVEN, ", el("kbd", {}, "Enter"), " next item."));
}

/* ------------------------------------------------------------------------- routing */

document.addEventListener("keydown", (event) => {
  if (!screen || event.ctrlKey || event.metaKey || event.altKey) return;
  if (event.target instanceof HTMLInputElement && event.target.type !== "radio") return;
  let handled = false;
  if (screen.kind === "items") {
    if (event.key === "j") { screen.focus = Math.min(screen.rows.length - 1, screen.focus + 1); focusRow(); handled = true; }
    else if (event.key === "k") { screen.focus = Math.max(0, screen.focus - 1); focusRow(); handled = true; }
    else if (event.key === "Enter" && screen.list.length) {
      location.hash = itemHash(screen.project, screen.list[screen.focus].id); handled = true;
    }
  } else handled = screen.key(event);
  if (handled) event.preventDefault();
});

async function route() {
  const fromLink = /^#token=(.+)$/.exec(location.hash);
  if (fromLink) {
    token = decodeURIComponent(fromLink[1]);
    sessionStorage.setItem(TOKEN_KEY, token);
    history.replaceState(null, "", location.pathname + "#/");
  }
  if (!token) { showLogin(); return; }
  const parts = location.hash.replace(/^#\/?/, "").split("/").map(decodeURIComponent);
  try {
    if (parts[0] === "p" && parts.length >= 4 && parts[2] === "i") await showItem(parts[1], parts.slice(3).join("/"));
    else if (parts[0] === "p" && parts[1]) await showItems(parts[1]);
    else await showProjects();
  } catch (err) {
    if (String(err.message) !== "401") setStatus(`error: ${err.message}`, "error");
  }
}

window.addEventListener("hashchange", route);
route();
