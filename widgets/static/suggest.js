// Attribute names suggested for the word under the cursor of a list filter box.
// A plain script, no imports or exports: the ExecutionList widget's module has it in front
// (widgets/_static.py), and the web UI loads it with a <script> tag (its functions are
// then globals). Names are inserted as text; nothing here parses or rewrites the filter.

// The attribute-name word the caret is in or at the end of: {start, end, prefix}, or
// null inside a quoted value or a backquoted name (there is nothing to suggest there).
function filterWordAt(text, caret) {
  let quote = null;
  for (let i = 0; i < caret; i++) {
    const c = text[i];
    if (quote) {
      if (c === "\\" && quote !== "`") i++;
      else if (c === quote) quote = null;
    } else if (c === "'" || c === '"' || c === "`") {
      quote = c;
    }
  }
  if (quote) return null;
  const word = /[A-Za-z0-9_]/;
  let start = caret;
  while (start > 0 && word.test(text[start - 1])) start--;
  let end = caret;
  while (end < text.length && word.test(text[end])) end++;
  if (start < text.length && /[0-9]/.test(text[start])) return null; // a number
  return { start, end, prefix: text.slice(start, caret) };
}

// The names starting with `prefix` (any case), at most `max`: those starting with it
// as typed first. Nothing for an empty prefix unless `all`.
function matchingNames(attributes, prefix, { all = false, max = 8 } = {}) {
  if (!prefix && !all) return [];
  const low = prefix.toLowerCase();
  const hits = attributes.filter((a) => a.name.toLowerCase().startsWith(low));
  if (hits.length === 1 && hits[0].name === prefix) return []; // typed out already
  const exact = hits.filter((a) => a.name.startsWith(prefix));
  const rest = hits.filter((a) => !a.name.startsWith(prefix));
  return [...exact, ...rest].slice(0, max);
}

let suggestIds = 0;

// Adds a suggestion list under `input` (inside `anchor`, which should be position:
// relative): typing a name's start lists the matching ones of `attributes()` ({name,
// type, custom}) for the word under the caret (again when the caret moves); Down/Up
// highlight one, Enter takes the highlighted one (with none highlighted, Enter is the
// box's own: it applies the filter), Tab takes the highlighted one or the first, Escape
// closes, Ctrl+Space lists every name. `cls` prefixes the class names. Returns {close, list}.
function attachSuggestions(input, anchor, attributes, { cls = "suggest" } = {}) {
  const id = `${cls}-list-${++suggestIds}`;
  const list = document.createElement("ul");
  list.id = id;
  list.className = `${cls}-list`;
  list.setAttribute("role", "listbox");
  list.setAttribute("aria-label", "Search attributes");
  list.hidden = true;
  anchor.append(list);
  input.setAttribute("role", "combobox");
  input.setAttribute("aria-autocomplete", "list");
  input.setAttribute("aria-controls", id);
  input.setAttribute("aria-expanded", "false");
  let shown = [];
  let active = -1; // the item highlighted with the arrow keys; -1: none (Enter applies)
  let word = null;
  let listedAll = false; // Ctrl+Space: every name, even for an empty word

  function close() {
    shown = [];
    active = -1;
    list.hidden = true;
    list.replaceChildren();
    input.setAttribute("aria-expanded", "false");
    input.removeAttribute("aria-activedescendant");
  }

  function paint() {
    list.replaceChildren(...shown.map((a, i) => {
      const item = document.createElement("li");
      item.id = `${id}-${i}`;
      item.className = `${cls}-item${i === active ? ` ${cls}-active` : ""}`;
      item.setAttribute("role", "option");
      item.setAttribute("aria-selected", String(i === active));
      const name = document.createElement("span");
      name.className = `${cls}-name`;
      name.textContent = a.name;
      const kind = document.createElement("span");
      kind.className = `${cls}-type`;
      kind.textContent = a.custom ? `${a.type} · custom` : a.type;
      item.append(name, kind);
      // mousedown, not click: the input keeps the focus (and its caret).
      item.addEventListener("mousedown", (ev) => {
        ev.preventDefault();
        take(i);
      });
      return item;
    }));
    if (active >= 0) input.setAttribute("aria-activedescendant", `${id}-${active}`);
    else input.removeAttribute("aria-activedescendant");
  }

  function wordNow() {
    return filterWordAt(input.value, input.selectionStart ?? input.value.length);
  }

  function update(all = false) {
    word = wordNow();
    listedAll = all;
    shown = word ? matchingNames(attributes() || [], word.prefix, { all }) : [];
    if (!shown.length) {
      close();
      return;
    }
    active = -1; // nothing highlighted until the arrow keys move into the list
    list.hidden = false;
    input.setAttribute("aria-expanded", "true");
    paint();
  }

  function take(i) {
    const a = shown[i];
    if (!a || !word) return;
    const text = input.value;
    input.value = text.slice(0, word.start) + a.name + text.slice(word.end);
    const caret = word.start + a.name.length;
    input.setSelectionRange(caret, caret);
    close();
  }

  // The caret moved (arrow keys, Home/End, a click): the list is of the word now under
  // it (or closes), so that taking a name replaces that word, not the one typed before.
  // The same word keeps its list and its highlighted item.
  function caretMoved() {
    if (list.hidden) return;
    const now = wordNow();
    if (now && word && now.start === word.start && now.end === word.end &&
        now.prefix === word.prefix) return;
    update(listedAll);
  }

  input.addEventListener("input", () => update());
  input.addEventListener("blur", close);
  input.addEventListener("click", caretMoved);
  input.addEventListener("selectionchange", caretMoved);
  input.addEventListener("keyup", (ev) => {
    if (["ArrowLeft", "ArrowRight", "Home", "End"].includes(ev.key)) caretMoved();
  });
  // Registered before the box's own Enter handler: a taken suggestion is not a submit.
  input.addEventListener("keydown", (ev) => {
    if (ev.key === " " && ev.ctrlKey) {
      ev.preventDefault();
      update(true);
      return;
    }
    if (list.hidden) return;
    if (ev.key === "ArrowDown" || ev.key === "ArrowUp") {
      ev.preventDefault();
      const n = shown.length;
      if (active < 0) active = ev.key === "ArrowDown" ? 0 : n - 1;
      else active = (active + (ev.key === "ArrowDown" ? 1 : n - 1)) % n;
      paint();
    } else if (ev.key === "Enter" && active >= 0) {
      // Only a name moved to with the arrow keys: a word that merely starts a name
      // ("IN" of Inventory) is the filter's, and Enter applies it.
      ev.preventDefault();
      ev.stopImmediatePropagation();
      take(active);
    } else if (ev.key === "Enter") {
      close(); // and the box's own Enter applies the filter
    } else if (ev.key === "Tab" && !ev.shiftKey) {
      ev.preventDefault();
      ev.stopImmediatePropagation();
      take(active >= 0 ? active : 0);
    } else if (ev.key === "Escape") {
      ev.preventDefault();
      ev.stopImmediatePropagation();
      close();
    }
  });
  return { close, list };
}
