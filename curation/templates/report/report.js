// Filters of the samples page: each select keeps the samples whose data attribute matches.
(function () {
  var selects = Array.prototype.slice.call(document.querySelectorAll("select[data-filter]"));
  if (!selects.length) { return; }
  var samples = Array.prototype.slice.call(document.querySelectorAll(".sample"));
  var shown = document.getElementById("shown");
  function apply() {
    var count = 0;
    samples.forEach(function (sample) {
      var keep = selects.every(function (select) {
        return !select.value || sample.getAttribute("data-" + select.getAttribute("data-filter")) === select.value;
      });
      sample.hidden = !keep;
      count += keep ? 1 : 0;
    });
    shown.textContent = count + " shown";
  }
  selects.forEach(function (select) { select.addEventListener("change", apply); });
})();
