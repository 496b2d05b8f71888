// Report: draw each chart from the figure dict the server put in a json_script tag.
(function () {
  "use strict";
  if (typeof Plotly === "undefined") return;
  document.querySelectorAll("[data-figure]").forEach(function (el) {
    const figure = JSON.parse(document.getElementById(el.dataset.figure).textContent);
    Plotly.newPlot(el, figure.data, figure.layout, { displaylogo: false, responsive: true });
  });
})();
