// The dashboard's only script beside htmx: re-arm the live poll after a
// failed request (not before 5 s), send a person to sign in again when
// the session ended, and abort the pending poll before a write so a stale
// answer never lands after it.
(function () {
  document.addEventListener("htmx:afterRequest", function (e) {
    var elt = e.detail.elt;
    if (!elt || elt.id !== "live" || e.detail.successful) return;
    var xhr = e.detail.xhr;
    if (xhr && xhr.status === 401) { window.location.assign("/ui/login"); return; }
    setTimeout(function () { if (document.body.contains(elt)) htmx.trigger(elt, "wg-retry"); }, 5000);
  });
  document.addEventListener("htmx:beforeRequest", function (e) {
    var elt = e.detail.elt;
    if (!elt || elt.id === "live") return;
    var live = document.getElementById("live");
    if (live) htmx.trigger(live, "htmx:abort");
  });
})();
