// The few DOM helpers every panel uses (find an element, say a line in a message slot, make a
// button). Kept apart from format.js, which is pure text, and from the panels, so no panel has
// to import another to build its elements.

export const $ = (id) => document.getElementById(id);

/** Say something in a panel's message line; `bad` marks it as an error. */
export function message(id, text, bad = false) {
  const node = $(id);
  node.textContent = text;
  node.classList.toggle("bad", bad);
}

export function button(text, className, title) {
  const node = document.createElement("button");
  node.type = "button";
  node.className = className;
  node.textContent = text;
  node.title = title;
  return node;
}
