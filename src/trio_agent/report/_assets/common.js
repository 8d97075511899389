"use strict";
// Shared by every report page. User data is read from the JSON data block and put on
// screen with textContent and setAttribute only: never as markup.
const DATA = JSON.parse(document.getElementById("report-data").textContent);
const ROOT = document.getElementById("report");
const SVG_NS = "http://www.w3.org/2000/svg";

function el(tag, attrs, ...children) {
  const node = document.createElement(tag);
  setAll(node, attrs);
  for (const child of children) {
    if (child === null || child === undefined) continue;
    node.append(typeof child === "string" || typeof child === "number" ? String(child) : child);
  }
  return node;
}

function svg(tag, attrs, text) {
  const node = document.createElementNS(SVG_NS, tag);
  setAll(node, attrs);
  if (text !== undefined) node.textContent = String(text);
  return node;
}

function setAll(node, attrs) {
  for (const [key, value] of Object.entries(attrs || {})) {
    if (value === null || value === undefined || value === false) continue;
    if (/^on/i.test(key) || key === "href" || key === "src") throw new Error("unsafe attribute " + key);
    node.setAttribute(key, String(value));
  }
}

// A link to one of the report's own files: a relative path of plain characters only.
function fileLink(path, text) {
  const a = el("a", {}, text);
  if (typeof path === "string" && /^[A-Za-z0-9._\/-]+$/.test(path) && !path.startsWith("/")) {
    a.setAttribute("href", path);
  }
  return a;
}

function seconds(s) {
  if (s === null || s === undefined) return "–";
  if (Math.abs(s) < 1) return (s * 1000).toFixed(1) + " ms";
  return s.toFixed(3) + " s";
}

function num(n) {
  return n === null || n === undefined ? "–" : Number(n).toLocaleString("en-US");
}

function dollars(d) {
  return d === null || d === undefined ? "–" : "$" + Number(d).toFixed(4);
}

function table(head, rows, cls) {
  const t = el("table", { class: cls || "grid" });
  t.append(el("thead", {}, el("tr", {}, ...head.map((h) => el("th", {}, h)))));
  const body = el("tbody");
  for (const row of rows) body.append(el("tr", {}, ...row.map((c) => el("td", {}, c))));
  t.append(body);
  return t;
}

const TIP = document.getElementById("tip");
function showTip(event, lines) {
  TIP.replaceChildren(...lines.map(([k, v]) => el("div", {}, el("b", {}, k + " "), el("pre", {}, v))));
  TIP.hidden = false;
  const x = Math.min(event.clientX + 14, window.innerWidth - TIP.offsetWidth - 8);
  const y = Math.min(event.clientY + 14, window.innerHeight - TIP.offsetHeight - 8);
  TIP.style.left = Math.max(0, x) + "px";
  TIP.style.top = Math.max(0, y) + "px";
}
function hideTip() {
  TIP.hidden = true;
}
