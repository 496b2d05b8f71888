// "Copy link": the Clipboard API where the page is a secure context, else the
// old select-and-copy on the visible text field.
(function () {
  "use strict";
  const button = document.querySelector("[data-copy-target]");
  if (!button) return;
  const input = document.getElementById(button.dataset.copyTarget);
  const done = document.querySelector("[data-copy-done]");

  function fallback() {
    input.focus();
    input.select();
    return document.execCommand("copy");
  }

  button.addEventListener("click", async function () {
    let ok = false;
    try {
      if (navigator.clipboard && window.isSecureContext) {
        await navigator.clipboard.writeText(input.value);
        ok = true;
      } else {
        ok = fallback();
      }
    } catch (err) {
      ok = fallback();
    }
    done.textContent = ok ? "Copied." : "Select the link and copy it.";
  });
})();
