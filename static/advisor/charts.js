// Report and compare pages: draw each chart from the figure dict the server put in a
// json_script tag. Plotly (the page's largest file by far) is fetched only when the
// first chart comes near the screen, once, so the answer at the top of a report
// loads without it; each chart is drawn as it scrolls into view (a chart in a
// closed section is drawn when the section opens).
(function () {
  "use strict";
  const script = document.currentScript;
  const plotlyUrl = script && script.dataset.plotly;
  const charts = Array.from(document.querySelectorAll("[data-figure]"));
  if (!charts.length || !plotlyUrl) return;
  let loading = null;

  function loadPlotly() {
    if (!loading) {
      loading = new Promise(function (resolve, reject) {
        const tag = document.createElement("script");
        tag.src = plotlyUrl;
        tag.onload = resolve;
        tag.onerror = reject;
        document.head.appendChild(tag);
      });
    }
    return loading;
  }

  function draw(el) {
    loadPlotly().then(function () {
      const figure = JSON.parse(document.getElementById(el.dataset.figure).textContent);
      Plotly.newPlot(el, figure.data, figure.layout, { displaylogo: false, responsive: true });
      el.dataset.drawn = "true";
    });
  }

  if (!("IntersectionObserver" in window)) {
    charts.forEach(draw);
    return;
  }
  const observer = new IntersectionObserver(function (entries) {
    entries.forEach(function (entry) {
      if (entry.isIntersecting) {
        observer.unobserve(entry.target);
        draw(entry.target);
      }
    });
  }, { rootMargin: "400px 0px" });
  charts.forEach(function (el) { observer.observe(el); });
})();
