import { loadWgtune } from "/wgtune.js";

const status = document.getElementById("status");
let resolveReady, rejectReady;
const ready = new Promise((resolve, reject) => { resolveReady = resolve; rejectReady = reject; });
window.wgtune = { ready };
loadWgtune({ onStatus: (text) => (status.textContent = text) }).then(
  (api) => { Object.assign(window.wgtune, api); status.textContent = "Ready"; resolveReady(api); },
  (error) => { status.textContent = `${error.message} ${error.advice ?? ""}`; rejectReady(error); },
);
