// hcp-workflow operator UI: copy buttons for run ids. Served from this origin (the CSP
// allows no inline script). Delegated, so buttons in htmx-swapped fragments work too.
document.addEventListener("click", function (ev) {
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
