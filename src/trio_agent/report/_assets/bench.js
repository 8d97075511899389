// Benchmark results as charts: per workload and case, the ratio of each contender's
// median time to the bare-trio floor's, per size (1× is the floor; lower is better).
function ratioChart(title, entries) {
  const W = 900, left = 230, right = 70, barH = 16, gap = 6, top = 24;
  const H = top + entries.length * (barH + gap) + 24;
  const most = Math.max(1, ...entries.map((e) => e.ratio));
  const x = (r) => left + (r / most) * (W - left - right);
  const root = svg("svg", { class: "timeline bars-chart", viewBox: `0 0 ${W} ${H}`, role: "img", "data-title": title });
  root.append(svg("title", {}, title));
  entries.forEach((e, i) => {
    const y = top + i * (barH + gap);
    root.append(svg("text", { class: "lane-label", x: left - 6, y: y + barH - 4, "text-anchor": "end" }, e.label));
    const rect = svg("rect", { class: "bar " + e.who, x: left, y, width: Math.max(1, x(e.ratio) - left), height: barH, "data-ratio": e.ratio });
    rect.append(svg("title", {}, e.label + ": " + e.ratio.toFixed(2) + "× the floor (" + seconds(e.seconds) + " vs " + seconds(e.floor) + ")"));
    root.append(rect);
    root.append(svg("text", { class: "tick", x: x(e.ratio) + 4, y: y + barH - 4 }, e.ratio.toFixed(2) + "×"));
  });
  root.append(svg("line", { class: "grid-line", x1: x(1), x2: x(1), y1: top - 6, y2: H - 18, style: "stroke:#000;stroke-dasharray:4 3" }));
  root.append(svg("text", { class: "tick", x: x(1), y: H - 6, "text-anchor": "middle" }, "floor (1×)"));
  root.append(svg("text", { class: "tick", x: 4, y: 14 }, title));
  return root;
}

const meta = DATA.meta;
ROOT.append(el("h1", {}, "trio-agent benchmarks"));
ROOT.append(el("p", { class: "muted" }, [meta.date, meta.commit ? "commit " + meta.commit : null, meta.python ? "Python " + meta.python : null,
  meta.trio ? "trio " + meta.trio : null, meta.machine, meta.repeats ? "medians of " + meta.repeats + " repeats" : null].filter(Boolean).join(" · ")));
ROOT.append(el("p", { class: "legend muted" }, el("span", {}, el("i", { style: "background:var(--req)" }), "ours"),
  el("span", {}, el("i", { style: "background:var(--stop)" }), "peers"), "ratio of median times to the bare trio floor: lower is better"));
const groups = new Map();
for (const row of DATA.rows) {
  const key = row.workload + (row.case ? " · " + row.case : "");
  if (!groups.has(key)) groups.set(key, []);
  groups.get(key).push(row);
}
for (const [key, rows] of groups) {
  const entries = [], plain = [];
  for (const row of rows) {
    const size = row.size || "";
    if (typeof row.floor_s === "number" && row.floor_s > 0 && typeof row.ours_s === "number") {
      entries.push({ label: "ours " + size, who: "ours", ratio: row.ours_s / row.floor_s, seconds: row.ours_s, floor: row.floor_s });
      for (const [peer, s] of Object.entries(row.peers_s || {})) {
        if (typeof s === "number") entries.push({ label: peer + " " + size, who: "peer", ratio: s / row.floor_s, seconds: s, floor: row.floor_s });
      }
    } else {
      plain.push([size, seconds(row.ours_s), row.note || ""]);
    }
  }
  ROOT.append(el("h2", {}, key));
  if (entries.length) ROOT.append(ratioChart(key, entries));
  if (plain.length) ROOT.append(table(["size", "ours", "note"], plain));
}
if (DATA.skipped.length) {
  ROOT.append(el("h2", {}, "Skipped"));
  ROOT.append(el("ul", {}, ...DATA.skipped.map((s) => el("li", {}, s))));
}
document.body.setAttribute("data-rendered", "true");
