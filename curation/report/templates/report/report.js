// Filters of the samples pages: each select keeps the samples of this page whose data attribute matches; the
// samples index (samples-index.js) counts the matches on every page, and the choice travels in the link's #hash.
(function () {
  var selects = Array.prototype.slice.call(document.querySelectorAll("select[data-filter]"));
  if (!selects.length) { return; }
  var samples = Array.prototype.slice.call(document.querySelectorAll(".sample"));
  var shown = document.getElementById("shown");
  var elsewhere = document.getElementById("elsewhere");
  var index = window.SAMPLE_INDEX || { facets: [], rows: [] };
  function chosen() {
    var found = {};
    selects.forEach(function (select) { if (select.value) { found[select.getAttribute("data-filter")] = select.value; } });
    return found;
  }
  function hash(filters) {
    return Object.keys(filters).map(function (name) {
      return encodeURIComponent(name) + "=" + encodeURIComponent(filters[name]);
    }).join("&");
  }
  function apply() {
    var filters = chosen();
    var count = 0;
    samples.forEach(function (sample) {
      var keep = Object.keys(filters).every(function (name) {
        return sample.getAttribute("data-" + name) === filters[name];
      });
      sample.hidden = !keep;
      count += keep ? 1 : 0;
    });
    shown.textContent = count + " shown";
    var names = Object.keys(filters);
    if (!names.length) { elsewhere.textContent = ""; history.replaceState(null, "", "#"); return; }
    var perPage = {};
    var total = 0;
    index.rows.forEach(function (row) {
      var keep = names.every(function (name) { return row[2 + index.facets.indexOf(name)] === filters[name]; });
      if (keep) { perPage[row[1]] = (perPage[row[1]] || 0) + 1; total += 1; }
    });
    elsewhere.textContent = total + " match in all: ";
    Object.keys(perPage).forEach(function (page, position) {
      var link = document.createElement("a");
      link.href = "samples-" + page + ".html#" + hash(filters);
      link.textContent = "page " + page + " (" + perPage[page] + ")";
      if (position) { elsewhere.appendChild(document.createTextNode(", ")); }
      elsewhere.appendChild(link);
    });
    history.replaceState(null, "", "#" + hash(filters));
  }
  selects.forEach(function (select) { select.addEventListener("change", apply); });
  location.hash.replace(/^#/, "").split("&").forEach(function (part) {
    var pair = part.split("=");
    var select = document.querySelector('select[data-filter="' + decodeURIComponent(pair[0]) + '"]');
    if (select && pair.length === 2) { select.value = decodeURIComponent(pair[1]); }
  });
  if (location.hash.length > 1) { apply(); }
})();
