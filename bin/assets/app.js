// hcp-workflow operator UI: copy buttons, the run list's expandable blocked-on cells, and
// drag-to-zoom on the timeline. Served from this origin (the CSP allows no inline script).
// Delegated, so elements in htmx-swapped fragments work too. No library.
var openClips = {}; // run id → expanded, kept across the list's live refreshes
var setClip = function (clip, open) {
  clip.classList.toggle("open", open);
  clip.setAttribute("aria-expanded", open ? "true" : "false");
};
document.addEventListener("htmx:afterSettle", function () {
  document.querySelectorAll("tr[data-run] .clip").forEach(function (c) {
    if (openClips[c.closest("tr").getAttribute("data-run")]) setClip(c, true);
  });
});
document.addEventListener("click", function (ev) {
  var clip = ev.target.closest(".clip");
  if (clip) {
    var open = !clip.classList.contains("open"), row = clip.closest("tr[data-run]");
    setClip(clip, open);
    if (row) openClips[row.getAttribute("data-run")] = open;
    return;
  }
  var b = ev.target.closest("button.copy");
  if (!b) return;
  var text = b.getAttribute("data-copy") || "";
  var done = function () { b.textContent = "copied"; b.setAttribute("data-copied", text); };
  if (navigator.clipboard && window.isSecureContext) {
    navigator.clipboard.writeText(text).then(done, done);
  } else {
    var t = document.createElement("textarea");
    t.value = text; document.body.appendChild(t); t.select();
    try { document.execCommand("copy"); } catch (e) { /* the id stays selectable */ }
    document.body.removeChild(t); done();
  }
});
document.addEventListener("keydown", function (ev) {
  if ((ev.key === "Enter" || ev.key === " ") && ev.target.classList && ev.target.classList.contains("clip")) {
    ev.preventDefault(); ev.target.click();
  }
});

// Timeline: drag across the bars to show that range (`?from=&to=`, ms since the first
// attempt; the server lays the zoomed chart out). Mouse only: touch scrolls the chart.
(function () {
  var drag = null;
  var num = function (svg, k) { return parseFloat(svg.getAttribute("data-" + k)); };
  var unitX = function (svg, clientX) {
    var r = svg.getBoundingClientRect();
    return (clientX - r.left) / r.width * num(svg, "w");
  };
  document.addEventListener("pointerdown", function (ev) {
    var svg = ev.target.closest && ev.target.closest("svg.gantt");
    if (!svg || ev.pointerType !== "mouse" || ev.button !== 0) return;
    var x = unitX(svg, ev.clientX);
    if (x < num(svg, "x0") || x > num(svg, "x1")) return;
    var rect = document.createElementNS("http://www.w3.org/2000/svg", "rect");
    rect.setAttribute("class", "brush");
    rect.setAttribute("y", "0");
    rect.setAttribute("height", svg.viewBox.baseVal.height);
    rect.setAttribute("x", x); rect.setAttribute("width", "0");
    svg.appendChild(rect);
    drag = { svg: svg, x: x, rect: rect };
    ev.preventDefault();
  });
  document.addEventListener("pointermove", function (ev) {
    if (!drag) return;
    var s = drag.svg, x = Math.max(num(s, "x0"), Math.min(num(s, "x1"), unitX(s, ev.clientX)));
    drag.rect.setAttribute("x", Math.min(x, drag.x));
    drag.rect.setAttribute("width", Math.abs(x - drag.x));
  });
  document.addEventListener("pointerup", function (ev) {
    if (!drag) return;
    var d = drag; drag = null;
    var s = d.svg, x0 = num(s, "x0"), x1 = num(s, "x1");
    var x = Math.max(x0, Math.min(x1, unitX(s, ev.clientX)));
    d.rect.remove();
    if (Math.abs(x - d.x) < 4) return; // a click, not a drag
    var from = num(s, "from"), span = num(s, "to") - from;
    var t = function (u) { return Math.round(from + (u - x0) / (x1 - x0) * span); };
    window.location.href = s.getAttribute("data-href") + "?from=" + t(Math.min(x, d.x)) +
      "&to=" + t(Math.max(x, d.x)) + "#timeline";
  });
})();
