// The transcript report: per transcript, the pairing verdict, the timeline of each run,
// the batches' statistics, usage and cost, then the conversation.
const STATUS_TEXT = { ok: "ok", error: "error", timed_out: "timed out", aborted: "aborted", skipped: "skipped" };

function barClass(bar) {
  if (bar.kind === "request") {
    if (bar.status === "error") return "bar request error";
    if (bar.status === "aborted") return "bar request aborted";
    return "bar request";
  }
  if (bar.status === "timed_out") return "bar call timed_out";
  if (bar.status === "aborted" || bar.status === "skipped") return "bar call " + bar.status;
  return bar.is_error ? "bar call error" : "bar call";
}

function tipLines(bar) {
  const lines = [[bar.kind === "request" ? "request" : "call", bar.label + (bar.id ? " (" + bar.id + ")" : "")]];
  lines.push(["time", seconds(bar.start) + " → " + seconds(bar.end) + "  (" + seconds(bar.end - bar.start) + ")"]);
  if (bar.kind === "request") {
    if (bar.first_token !== null && bar.first_token !== undefined) lines.push(["first token after", seconds(bar.first_token - bar.start)]);
    lines.push(["stop reason", String(bar.status)]);
    if (bar.error) lines.push(["error", bar.error]);
  } else {
    lines.push(["outcome", String(bar.status) + (bar.is_error ? " (error result)" : "")]);
    if (bar.waited) lines.push(["waited for a slot", seconds(bar.waited)]);
    if (bar.args !== null && bar.args !== undefined) lines.push(["arguments", bar.args]);
    if (bar.result !== null && bar.result !== undefined) lines.push(["result", bar.result]);
  }
  return lines;
}

function timeline(run, index) {
  const bars = run.bars.filter((b) => typeof b.start === "number" && typeof b.end === "number");
  const lanes = Math.max(1, ...bars.map((b) => b.lane + 1));
  const tmax = Math.max(1e-6, ...bars.map((b) => b.end));
  const W = 1000, left = 70, right = 60, top = 22, laneH = 22, gap = 6;
  const H = top + lanes * (laneH + gap) + 10;
  const x = (t) => left + (t / tmax) * (W - left - right);
  const root = svg("svg", { class: "timeline", viewBox: `0 0 ${W} ${H}`, role: "img", "data-run": index });
  root.append(svg("title", {}, "timeline of run " + (index + 1)));
  for (let i = 0; i <= 5; i++) {
    const t = (tmax * i) / 5;
    root.append(svg("line", { class: "grid-line", x1: x(t), x2: x(t), y1: top - 4, y2: H - 6 }));
    root.append(svg("text", { class: "tick", x: x(t), y: 14, "text-anchor": i === 0 ? "start" : i === 5 ? "end" : "middle" }, seconds(t)));
  }
  for (let lane = 0; lane < lanes; lane++) {
    const y = top + lane * (laneH + gap) + laneH / 2 + 4;
    root.append(svg("text", { class: "lane-label", x: 4, y }, lane === 0 ? "model" : "call " + lane));
  }
  for (const bar of bars) {
    const y = top + bar.lane * (laneH + gap);
    const x0 = x(bar.start), x1 = x(bar.end);
    const rect = svg("rect", {
      class: barClass(bar), x: x0, y, width: Math.max(0, x1 - x0), height: laneH, rx: 2,
      "data-kind": bar.kind, "data-turn": bar.turn, "data-start": bar.start, "data-end": bar.end,
      "data-status": bar.status, "data-id": bar.id,
    });
    rect.append(svg("title", {}, tipLines(bar).map(([k, v]) => k + ": " + v).join("\n")));
    rect.addEventListener("mousemove", (e) => showTip(e, tipLines(bar)));
    rect.addEventListener("mouseleave", hideTip);
    root.append(rect);
    if (x1 - x0 < 1.5) {
      // Too short to see (a refused call, an instant reply): a tick shows where it is.
      root.append(svg("line", { class: "instant " + barClass(bar).replace("bar ", ""), x1: x0, x2: x0, y1: y, y2: y + laneH }));
    }
    if (bar.kind === "request" && typeof bar.first_token === "number") {
      root.append(svg("line", { class: "first-token", x1: x(bar.first_token), x2: x(bar.first_token), y1: y + 3, y2: y + laneH - 3 }));
    }
    if (bar.status === "aborted" || bar.status === "skipped") {
      // Inside the bar's end when it fits, else just after it.
      const inside = x1 - x0 > 70;
      root.append(svg("text", { class: "mark" + (inside ? " inside" : ""), x: inside ? x1 - 4 : x1 + 2, y: y + laneH - 7,
        "text-anchor": inside ? "end" : "start" }, "✕ " + bar.status));
    }
  }
  return root;
}

function legend() {
  const item = (color, text) => el("span", {}, el("i", { style: "background:" + color }), text);
  return el("p", { class: "legend muted" },
    item("var(--req)", "model request (white tick: first token)"), item("var(--ok)", "tool call"),
    item("var(--err)", "error"), item("var(--timeout)", "timed out"), item("var(--stop)", "aborted / skipped ✕"));
}

function batchTable(batches) {
  return table(
    ["turn", "calls", "wall", "critical path", "sum of calls", "overhead (wall − critical path)", "peak concurrency", "waited for slots", "speed-up"],
    batches.map((b) => [String(b.turn), String(b.calls), seconds(b.wall_time), seconds(b.critical_path), seconds(b.total_call_time),
      seconds(b.overhead), String(b.peak_concurrency), seconds(b.waited_on_limit), b.speedup === null ? "–" : b.speedup.toFixed(2) + "×"]));
}

function usageTable(t) {
  const head = ["request", "model", "stop reason", "input", "output", "cache read", "cache write", "total"];
  if (t.priced) head.push("cost");
  const row = (u) => [num(u.input_tokens), num(u.output_tokens), num(u.cache_read_tokens), num(u.cache_write_tokens), num(u.total)].concat(t.priced ? [dollars(u.cost)] : []);
  const rows = t.requests.map((r, i) => [String(i), r.model || "–", String(r.stop_reason), ...row(r.usage)]);
  const tbl = table(head, rows);
  const total = el("tr", { class: "total" }, ...["total", "", ""].concat(row(t.total)).map((c) => el("td", {}, c)));
  tbl.querySelector("tbody").append(total);
  return tbl;
}

function blockView(block) {
  if (block.type === "text") return el("pre", {}, block.text);
  if (block.type === "thinking") return el("details", { class: "thinking" }, el("summary", {}, block.redacted ? "thinking (redacted)" : "thinking"), el("pre", {}, block.thinking));
  if (block.type === "tool_call") return el("div", { class: "call" }, el("b", {}, "→ " + block.name), el("span", { class: "muted" }, " " + block.id), el("pre", {}, JSON.stringify(block.arguments, null, 1)));
  if (block.type === "image") return el("pre", { class: "muted" }, "[image " + (block.mime_type || "") + "]");
  return el("pre", {}, JSON.stringify(block));
}

function messageView(m, index) {
  const head = el("div", { class: "head" }, el("b", {}, "#" + index + " " + m.role));
  const box = el("div", { class: "msg " + m.role, id: "m" + index, "data-index": index });
  if (m.role === "assistant") {
    head.append(" · " + [m.model, m.stop_reason, "in " + num(m.usage.input_tokens), "out " + num(m.usage.output_tokens)].filter(Boolean).join(" · "));
    if (m.stop_reason === "error" || m.stop_reason === "aborted") box.classList.add("error");
  }
  box.append(head);
  if (m.role === "tool_result") {
    const summary = el("summary", {}, "result of " + m.tool_name + " (" + m.tool_call_id + ")" + (m.is_error ? " — error" : ""));
    box.append(el("details", {}, summary, ...m.content.map(blockView)));
    if (m.is_error) box.classList.add("error");
  } else if (m.role === "custom") {
    head.append(" · " + m.kind);
    box.append(el("pre", {}, JSON.stringify(m.content, null, 1)));
  } else {
    for (const block of m.content) box.append(blockView(block));
  }
  if (m.error_message) box.append(el("pre", { class: "muted" }, "error: " + m.error_message));
  return box;
}

function transcriptView(t, i) {
  const section = el("section", { class: "transcript", "data-index": i });
  section.append(el("h1", {}, t.path));
  const v = t.verdict;
  section.append(el("div", { class: "verdict " + (v.paired ? "ok" : "bad"), "data-paired": v.paired },
    v.paired ? "✓ paired: every tool call has exactly one result, in order" : "✗ not paired: " + v.violations.length + " breach(es)"));
  if (!v.paired) section.append(el("ul", {}, ...v.violations.map((x) => el("li", {}, x))));
  if (t.torn_line !== null) section.append(el("p", { class: "muted" }, "a torn last line (" + t.torn_line + ") was left out"));
  section.append(el("h2", {}, "Timeline"));
  if (t.runs.length === 0) {
    section.append(el("p", { class: "muted no-timings" }, "No timings recorded: this transcript was written without them (JsonlTranscript(..., timings=True) records them)."));
  } else {
    section.append(legend());
    t.runs.forEach((run, r) => {
      section.append(el("h3", {}, "run " + (r + 1) + " · started " + run.started));
      section.append(timeline(run, r));
      if (run.batches.length) section.append(batchTable(run.batches));
    });
  }
  section.append(el("h2", {}, "Usage" + (t.priced ? " and cost" : "")));
  section.append(usageTable(t));
  section.append(el("h2", {}, "Conversation (" + t.messages.length + " messages)"));
  t.messages.forEach((m, k) => section.append(messageView(m, k)));
  return section;
}

ROOT.append(el("p", { class: "muted" }, "trio-agent report · " + DATA.generated));
DATA.transcripts.forEach((t, i) => ROOT.append(transcriptView(t, i)));
document.body.setAttribute("data-rendered", "true");
