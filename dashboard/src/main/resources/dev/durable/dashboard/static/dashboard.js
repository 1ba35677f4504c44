// Live updates for the Durable dashboard: counts, chart and event feed over Server-Sent Events, and a
// dialog for confirmations. The pages work without this file; it only keeps them current.
// Every value from the server is written with textContent or setAttribute, never as markup.
(function () {
  "use strict";
  var body = document.body;
  var base = body.getAttribute("data-base") || "";
  var page = body.getAttribute("data-page");
  var FEED_MAX = 50;
  var rendered = Number(body.getAttribute("data-rendered") || "0");

  function el(tag, cls, text) {
    var node = document.createElement(tag);
    if (cls) { node.className = cls; }
    if (text !== undefined && text !== null) { node.textContent = String(text); }
    return node;
  }

  function feedItem(e) {
    var li = el("li");
    li.setAttribute("data-id", String(e.id));
    li.setAttribute("data-kind", e.kind);
    li.appendChild(el("span", "at", e.at));
    li.appendChild(document.createTextNode(" "));
    li.appendChild(el("span", "kind k-" + String(e.kind).toLowerCase(), e.kind));
    li.appendChild(document.createTextNode(" "));
    var a = el("a", null, "#" + e.id);
    a.setAttribute("href", base + "/instances/" + encodeURIComponent(e.id));
    li.appendChild(a);
    li.appendChild(document.createTextNode(" " + e.type + " "));
    li.appendChild(el("span", "queue", e.queue));
    if (e.step) { li.appendChild(document.createTextNode(" ")); li.appendChild(el("span", "step", e.step)); }
    if (e.error) { li.appendChild(document.createTextNode(" ")); li.appendChild(el("span", "error", e.error)); }
    return li;
  }

  var seen = {};
  function onJob(e) {
    var key = e.id + ":" + e.kind + ":" + e.at + ":" + e.attempt;
    if (seen[key]) { return; } // replayed events the page already shows
    seen[key] = true;
    var feed = document.getElementById("feed");
    if (feed) {
      var empty = feed.querySelector("li.empty");
      if (empty) { feed.removeChild(empty); }
      if (!feed.querySelector("li[data-id='" + e.id + "'][data-kind='" + e.kind + "']") || e.kind === "RETRIED") {
        feed.insertBefore(feedItem(e), feed.firstChild);
      }
      while (feed.children.length > FEED_MAX) { feed.removeChild(feed.lastChild); }
    }
    if (page === "instance" && e.ts > rendered && location.pathname === base + "/instances/" + e.id && !document.getElementById("changed")) {
      var main = document.querySelector("main");
      var note = el("p", "notice changed", "This instance changed (" + e.kind + "). ");
      note.id = "changed";
      var reload = el("a", null, "Reload");
      reload.setAttribute("href", location.pathname);
      note.appendChild(reload);
      main.insertBefore(note, main.firstChild);
    }
  }

  function onCounts(c) {
    var rows = document.querySelectorAll("#queues tbody tr[data-queue]");
    for (var i = 0; i < rows.length; i++) {
      var row = rows[i];
      var q = row.getAttribute("data-queue");
      var counts = c.counts[q] || {};
      var cells = row.querySelectorAll("td[data-status]");
      for (var j = 0; j < cells.length; j++) {
        var status = cells[j].getAttribute("data-status");
        var n = counts[status] || 0;
        var link = cells[j].querySelector("a");
        if (link) { link.textContent = String(n); }
        else if (cells[j].textContent !== String(n)) { cells[j].textContent = String(n); }
      }
      var now = c.now[q] || {};
      var fields = { running: now.running, committing: now.committing, buffered: now.buffered, due: now.due || 0,
        wait: now.wait || "–" };
      for (var name in fields) {
        var cell = row.querySelector("td[data-now='" + name + "']");
        if (cell && fields[name] !== undefined) { cell.textContent = String(fields[name]); }
      }
    }
    chart(c);
  }

  // Only the default view (the last hour of every queue) is redrawn live; another range stays as served.
  function chart(c) {
    var svg = document.getElementById("chart");
    if (!svg || svg.getAttribute("data-live") !== "1" || !c.completed) { return; }
    var completed = c.completed, failed = c.failed, retried = c.retried;
    var max = 1, tc = 0, tf = 0, tr = 0, i;
    for (i = 0; i < completed.length; i++) {
      max = Math.max(max, completed[i], failed[i], retried[i]);
      tc += completed[i];
      tf += failed[i];
      tr += retried[i];
    }
    function set(kind, values) {
      for (var k = 0; k < values.length; k++) {
        var rect = svg.querySelector("rect." + kind + "[data-i='" + k + "']");
        if (!rect) { continue; }
        var h = 100 * values[k] / max;
        rect.setAttribute("y", (110 - h).toFixed(1));
        rect.setAttribute("height", h.toFixed(1));
        var title = rect.querySelector("title");
        if (title) { title.textContent = String(values[k]); }
      }
    }
    set("ok", completed);
    set("bad", failed);
    set("retry", retried);
    var label = document.getElementById("chart-max");
    if (label) { label.textContent = "max " + max + " per " + c.bucket; }
    var totals = { "chart-completed": tc, "chart-failed": tf, "chart-retried": tr };
    for (var id in totals) {
      var node = document.getElementById(id);
      if (node) { node.textContent = String(totals[id]); }
    }
  }

  var status = document.getElementById("connection");
  if (window.EventSource && status) {
    var source = new EventSource(base + "/events");
    source.onopen = function () { status.textContent = "live"; status.className = "conn live"; };
    source.onerror = function () { status.textContent = "reconnecting"; status.className = "conn down"; };
    source.addEventListener("job", function (m) { onJob(JSON.parse(m.data)); });
    source.addEventListener("counts", function (m) { onCounts(JSON.parse(m.data)); });
    window.addEventListener("pagehide", function () { source.close(); });
  }

  // Confirmations: a dialog instead of the confirmation page the server answers without JavaScript.
  document.addEventListener("submit", function (event) {
    var form = event.target;
    var question = form.getAttribute("data-confirm");
    if (!question || form.querySelector("input[name='confirm']") || !window.HTMLDialogElement) { return; }
    event.preventDefault();
    var dialog = el("dialog", "confirm");
    dialog.id = "confirm-dialog";
    dialog.appendChild(el("p", null, question));
    var ok = el("button", "danger", "Yes, go ahead");
    ok.id = "confirm-ok";
    ok.type = "button";
    var no = el("button", null, "No");
    no.id = "confirm-no";
    no.type = "button";
    dialog.appendChild(ok);
    dialog.appendChild(document.createTextNode(" "));
    dialog.appendChild(no);
    document.body.appendChild(dialog);
    no.addEventListener("click", function () { dialog.close(); dialog.remove(); });
    ok.addEventListener("click", function () {
      var yes = el("input");
      yes.type = "hidden";
      yes.name = "confirm";
      yes.value = "yes";
      form.appendChild(yes);
      dialog.close();
      form.submit();
    });
    dialog.showModal();
  });
})();
