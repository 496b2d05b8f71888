// New-job form: show the "no live worker" note as soon as the GPU kind changes,
// not only after a round trip. The server checks again on submit.
(function () {
  "use strict";
  const select = document.getElementById("id_gpu_kind");
  const note = document.getElementById("unserved-note");
  const data = document.getElementById("served-gpu-kinds");
  if (!select || !note || !data) return;
  const served = new Set(JSON.parse(data.textContent));
  const where = document.getElementById("run-on-details");
  const update = () => {
    note.hidden = served.has(select.value);
    if (!note.hidden && where) where.open = true;  // "Run on" is where to answer it
  };
  // Only on change: on load the server's rendering (and its field error) stands.
  select.addEventListener("change", update);
})();
