// Copy buttons (the share link, launch commands): each `[data-copy-target]` copies its
// target's value (a text field) or text (a <pre>), with the Clipboard API where the page
// is a secure context, else the old select-and-copy; the `[data-copy-done]` beside the
// button says how it went.
(function () {
  "use strict";

  function fallback(target) {
    if ("select" in target) {
      target.focus();
      target.select();
    } else {
      const range = document.createRange();
      range.selectNodeContents(target);
      const selection = window.getSelection();
      selection.removeAllRanges();
      selection.addRange(range);
    }
    return document.execCommand("copy");
  }

  function wire(button) {
    const target = document.getElementById(button.dataset.copyTarget);
    const done = button.parentElement.querySelector("[data-copy-done]");
    if (!target) return;
    button.addEventListener("click", async function () {
      const text = "value" in target ? target.value : target.textContent;
      let ok = false;
      try {
        if (navigator.clipboard && window.isSecureContext) {
          await navigator.clipboard.writeText(text);
          ok = true;
        } else {
          ok = fallback(target);
        }
      } catch (err) {
        ok = fallback(target);
      }
      if (done) done.textContent = ok ? "Copied." : "Select the text and copy it.";
    });
  }

  document.querySelectorAll("[data-copy-target]").forEach(wire);
})();
