// The report page's one script (its Content-Security-Policy allows this
// script alone, by its hash): search and sort the campaigns, and export the
// members of those shown as CSV. It reads only the page, and requests nothing.
(function () {
  "use strict";
  var table = document.getElementById("campaign-table");
  if (!table) return;
  var body = table.tBodies[0];
  var rows = Array.prototype.slice.call(body.querySelectorAll("tr.campaign"));
  var search = document.getElementById("search");
  var sort = document.getElementById("sort");
  var shown = document.getElementById("shown");
  function apply() {
    var words = search.value.toLowerCase().split(/\s+/).filter(Boolean);
    var key = sort.value;
    rows.sort(function (a, b) {
      var x = Number(a.dataset[key]), y = Number(b.dataset[key]);
      return key === "first" ? x - y : y - x;
    });
    var count = 0;
    rows.forEach(function (row) {
      var text = row.dataset.search;
      var match = words.every(function (word) { return text.indexOf(word) >= 0; });
      row.hidden = !match;
      if (match) count += 1;
      body.appendChild(row);
    });
    shown.textContent = String(count);
  }
  search.addEventListener("input", apply);
  sort.addEventListener("change", apply);
  function cell(value) {
    // a cell a spreadsheet may run as a formula is text, a quote first: one that starts with a
    // tab, CR or null, or with =, +, - or @ (ASCII or full width), spaces before them or not
    if (/^(?:[\t\r\0]|\s*[=+\-@\uff1d\uff0b\uff0d\uff20])/.test(value)) value = "'" + value;
    return /[",\n\r]/.test(value) ? '"' + value.replace(/"/g, '""') + '"' : value;
  }
  document.getElementById("export").addEventListener("click", function () {
    var lines = ["campaign,platform,account,time,post,link"];
    rows.forEach(function (row) {
      if (row.hidden) return;
      row.querySelectorAll("tr.member").forEach(function (member) {
        var d = member.dataset;
        lines.push([row.dataset.rank, d.platform, d.account, d.time, d.post, d.link].map(cell).join(","));
      });
    });
    var link = document.createElement("a");
    link.href = "data:text/csv;charset=utf-8," + encodeURIComponent(lines.join("\n") + "\n");
    link.download = "campaign-members.csv";
    document.body.appendChild(link);
    link.click();
    link.remove();
  });
  apply();
})();
