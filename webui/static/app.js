// pgbackoff web UI: the little the pages do in the browser. Served from
// this origin only (the Content-Security-Policy forbids inline script).
// Every value from the server is inserted as server-rendered, escaped
// HTML or as text, never built from strings here.
"use strict";

document.addEventListener("DOMContentLoaded", function () {
  var banner = document.getElementById("banner");
  function showBanner(text) {
    if (!banner) return;
    if (text) { banner.textContent = text; banner.hidden = false; } else { banner.hidden = true; }
  }

  // Overview: fetch the table again every few seconds and swap it in.
  var queues = document.getElementById("queues");
  if (queues && queues.dataset.refresh) {
    var every = parseInt(queues.dataset.every, 10) || 5000;
    var refresh = function () {
      fetch(queues.dataset.refresh, { credentials: "same-origin", cache: "no-store" })
        .then(function (r) {
          return r.text().then(function (html) {
            var doc = new DOMParser().parseFromString(html, "text/html");
            var b = doc.querySelector("[data-banner]");
            showBanner(b ? b.dataset.banner : "");
            if (r.ok) { queues.replaceChildren.apply(queues, Array.from(doc.body.childNodes)); }
          });
        })
        .catch(function () { showBanner("The UI server cannot be reached; retrying."); })
        .finally(function () { setTimeout(refresh, every); });
    };
    setTimeout(refresh, every);
  }

  // Forms that ask first.
  document.querySelectorAll("form[data-confirm]").forEach(function (f) {
    f.addEventListener("submit", function (e) {
      if (!window.confirm(f.dataset.confirm)) e.preventDefault();
    });
  });

  // Enqueue: check the payload is JSON before sending (the server checks too).
  document.querySelectorAll("textarea[data-json]").forEach(function (t) {
    var problem = document.getElementById("json-problem");
    t.form.addEventListener("submit", function (e) {
      try { JSON.parse(t.value); if (problem) problem.hidden = true; }
      catch (err) {
        e.preventDefault();
        if (problem) { problem.textContent = "payload: not valid JSON: " + err.message; problem.hidden = false; }
      }
    });
  });
});
