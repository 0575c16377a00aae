/* threshold-bot's HTML report: draws each chart of the JSON spec embedded in the page
   (script#threshold-bot-charts, written by bot/core/render/report_charts.py) with Chart.js,
   on canvas#chart-N (N: the chart's index in the spec).  The spec is data, never code.
   window.thresholdBotCharts maps each chart's key (its canvas's data-chart) to its Chart. */
(function () {
  "use strict";
  var charts = Object.create(null);
  window.thresholdBotCharts = charts;
  var source = document.getElementById("threshold-bot-charts");
  if (!source || typeof Chart === "undefined") {
    return;
  }
  var spec = JSON.parse(source.textContent);
  // how each role is drawn: spec.styles, from bot/core/render/report_charts.py STYLES, the
  // constants the page's caption is written from (order: the lower is drawn on top)
  var STYLE = spec.styles;

  function day(ms) {
    return new Date(ms).toISOString().slice(0, 10);
  }

  function moment(ms) {
    return new Date(ms).toISOString().slice(0, 19).replace("T", " ") + " UTC";
  }

  function dataset(d) {
    var s = STYLE[d.role] || STYLE.metric;
    return {
      label: d.label,
      role: d.role,
      edge: d.edge,
      data: d.points,
      borderColor: s.color,
      backgroundColor: s.color,
      borderWidth: s.width,
      borderDash: s.dash,
      pointRadius: s.radius,
      pointHoverRadius: s.radius ? s.radius + 2 : 0,
      pointHitRadius: s.radius ? 4 : 0,
      order: s.order,
      stepped: d.stepped ? "before" : false, // Chart.js: hold each value until the next point
      tension: 0,
      fill: false
    };
  }

  function label(item) {
    var raw = item.raw;
    if (item.dataset.role === "metric") {
      return [moment(raw.x), "value " + raw.y, "commit " + (raw.commit || "—")];
    }
    return item.dataset.label + ": " + raw.y;
  }

  function config(c) {
    return {
      type: "line",
      data: { datasets: c.datasets.map(dataset) },
      options: {
        animation: false,
        responsive: true,
        maintainAspectRatio: false,
        interaction: { mode: "nearest", axis: "x", intersect: false },
        scales: {
          x: {
            type: "linear",
            min: c.x.min,
            max: c.x.max,
            ticks: { callback: day, maxTicksLimit: 8, maxRotation: 0 }
          },
          y: { type: "linear", min: c.y.min, max: c.y.max }
        },
        plugins: {
          legend: { position: "bottom" },
          tooltip: {
            filter: function (item) {
              return item.dataset.role === "metric" || item.dataset.role === "regime";
            },
            callbacks: {
              title: function (items) {
                var runs = items.filter(function (i) { return i.dataset.role === "metric"; });
                return runs.length ? runs[0].raw.run : "";
              },
              label: label
            }
          }
        }
      }
    };
  }

  spec.charts.forEach(function (c, i) {
    var canvas = document.getElementById("chart-" + i);
    if (canvas) {
      charts[c.key] = new Chart(canvas, config(c));
    }
  });
})();
