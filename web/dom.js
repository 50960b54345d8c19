// Small helpers the panels share for finding elements and wording what they show.

export const $ = (id) => document.getElementById(id);

export const plural = (n, word) => `${n} ${word}${n === 1 ? "" : "s"}`;

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

/** A key object ({m: 128, …}) as "m=128, n=128"; text stays as it is. */
export function keyText(key) {
  if (key == null) return "";
  if (typeof key !== "object") return String(key);
  return Object.entries(key).map(([field, value]) => `${field}=${value}`).join(", ");
}
