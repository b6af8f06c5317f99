// Shared by every widget's ES module (widgets/_static.py puts it in front of each one:
// anywidget loads a module on its own, with nothing to import from).

// An element with attributes (``text`` sets its text) and children.
function h(tag, attrs = {}, ...children) {
  const node = document.createElement(tag);
  for (const [k, v] of Object.entries(attrs)) {
    if (v === null || v === undefined || v === false) continue;
    if (k === "text") node.textContent = v;
    else node.setAttribute(k, v === true ? "" : String(v));
  }
  for (const c of children) if (c !== null && c !== undefined) node.append(c);
  return node;
}

// Say whether this view is on screen (the kernel pauses a live refresh when none is).
function tell(model, open) {
  try {
    model.send({ type: "view", open });
  } catch (err) {
    // the kernel or the widget is already gone: nothing to tell
  }
}

