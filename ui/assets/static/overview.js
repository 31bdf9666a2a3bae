// Refreshes the overview's counts in place from the handler's JSON
// endpoint. Values are written with textContent only.
(function () {
  "use strict";
  var root = document.getElementById("overview");
  if (!root) { return; }
  var url = root.getAttribute("data-counts-url");
  var every = parseInt(root.getAttribute("data-refresh-ms"), 10) || 5000;
  var stamp = document.getElementById("refreshed");
  function apply(data) {
    (data.machines || []).forEach(function (m) {
      var sections = root.querySelectorAll("section.machine");
      for (var i = 0; i < sections.length; i++) {
        if (sections[i].getAttribute("data-machine") !== m.machine) { continue; }
        var total = sections[i].querySelector("[data-total]");
        if (total) { total.textContent = String(m.total); }
        var cells = sections[i].querySelectorAll("td[data-state]");
        (m.states || []).forEach(function (s) {
          for (var j = 0; j < cells.length; j++) {
            if (cells[j].getAttribute("data-state") === s.state) { cells[j].textContent = String(s.count); }
          }
        });
      }
    });
    if (stamp) { stamp.textContent = "Counts refreshed at " + new Date().toISOString() + "."; }
  }
  function poll() {
    fetch(url, { credentials: "same-origin", headers: { "Accept": "application/json" } })
      .then(function (r) { if (!r.ok) { throw new Error(String(r.status)); } return r.json(); })
      .then(apply)
      .catch(function (e) { if (stamp) { stamp.textContent = "Counts could not be refreshed (" + e.message + ")."; } })
      .then(function () { setTimeout(poll, every); });
  }
  setTimeout(poll, every);
})();
