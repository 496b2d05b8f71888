// Report: sections start folded under their one-line finding. A link to anything
// inside a folded section (an evidence link, a shared #anchor) opens it first;
// printing opens them all; "Open every section" does what it says.
(function () {
  "use strict";
  const folds = Array.from(document.querySelectorAll("details.fold"));
  if (!folds.length) return;

  function reveal(hash) {
    if (!hash || hash.length < 2) return;
    const target = document.getElementById(decodeURIComponent(hash.slice(1)));
    if (!target) return;
    for (let d = target.closest("details"); d; d = d.parentElement && d.parentElement.closest("details")) {
      d.open = true;
    }
    target.scrollIntoView();
  }

  document.addEventListener("click", function (event) {
    const link = event.target.closest('a[href^="#"]');
    if (link) reveal(link.getAttribute("href"));
  });
  window.addEventListener("hashchange", function () { reveal(window.location.hash); });
  window.addEventListener("beforeprint", function () { folds.forEach(function (d) { d.open = true; }); });
  const all = document.getElementById("open-all");
  if (all) {
    all.hidden = false;
    all.addEventListener("click", function () { folds.forEach(function (d) { d.open = true; }); });
  }
  reveal(window.location.hash);
})();
