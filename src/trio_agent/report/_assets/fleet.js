// A fleet folder's summary: how the tasks ended, histograms of wall times and steps,
// the slowest and the failed tasks with links to their own reports.
function histogram(values, title, unit, format, integer) {
  const W = 480, H = 170, left = 36, bottom = 30, top = 18;
  const root = svg("svg", { class: "timeline histogram", viewBox: `0 0 ${W} ${H}`, role: "img", "data-title": title });
  root.append(svg("title", {}, title));
  root.append(svg("text", { class: "tick", x: 4, y: 12 }, title));
  if (values.length === 0) return root;
  const lo = Math.min(...values), hi = Math.max(...values);
  // Whole numbers (steps) get a bin each while there are few; times get about √n bins.
  const bins = integer && hi - lo < 20 ? hi - lo + 1 : Math.max(1, Math.min(20, Math.ceil(Math.sqrt(values.length))));
  const width = integer && hi - lo < 20 ? 1 : hi > lo ? (hi - lo) / bins : 1;
  const counts = new Array(bins).fill(0);
  for (const v of values) counts[Math.min(bins - 1, Math.floor((v - lo) / width))]++;
  const most = Math.max(...counts);
  const bw = (W - left - 8) / bins;
  counts.forEach((c, i) => {
    const h = (c / most) * (H - top - bottom);
    const rect = svg("rect", { class: "bar request", x: left + i * bw + 1, y: H - bottom - h, width: Math.max(1, bw - 2), height: h, "data-count": c });
    rect.append(svg("title", {}, format(lo + i * width) + " – " + format(lo + (i + 1) * width) + " " + unit + ": " + c + " task(s)"));
    root.append(rect);
  });
  root.append(svg("text", { class: "tick", x: left, y: H - 12 }, format(lo)));
  root.append(svg("text", { class: "tick", x: W - 8, y: H - 12, "text-anchor": "end" }, format(hi) + " " + unit));
  root.append(svg("text", { class: "tick", x: 4, y: top + 10 }, String(most)));
  return root;
}

function taskTable(rows) {
  return table(["task", "end reason", "steps", "wall time", "error"],
    rows.map((r) => [r.link ? fileLink(r.link, r.id) : r.id, String(r.reason), String(r.steps), seconds(r.wall_time), r.error || ""]));
}

ROOT.append(el("h1", {}, "Fleet " + DATA.folder));
ROOT.append(el("p", { class: "muted" }, "trio-agent report · " + DATA.generated + " · " + num(DATA.tasks) + " tasks"));
ROOT.append(el("h2", {}, "End reasons"));
ROOT.append(table(["end reason", "tasks"], Object.entries(DATA.reasons).map(([k, v]) => [k, num(v)])));
ROOT.append(el("h2", {}, "Wall times and steps"));
ROOT.append(el("div", { class: "hists" },
  histogram(DATA.wall_times, "wall time per task", "s", (v) => v.toFixed(2)),
  histogram(DATA.steps, "model requests (steps) per task", "steps", (v) => v.toFixed(0), true)));
ROOT.append(el("h2", {}, "Tokens"));
ROOT.append(table(["input", "output", "cache read", "cache write"], [[num(DATA.tokens.input_tokens), num(DATA.tokens.output_tokens), num(DATA.tokens.cache_read_tokens), num(DATA.tokens.cache_write_tokens)]]));
ROOT.append(el("h2", {}, "Slowest tasks"));
ROOT.append(taskTable(DATA.slowest));
ROOT.append(el("h2", {}, "Failed tasks (" + DATA.failed_total + ")"));
if (DATA.failed.length) ROOT.append(taskTable(DATA.failed));
else ROOT.append(el("p", { class: "muted" }, "none"));
document.body.setAttribute("data-rendered", "true");
