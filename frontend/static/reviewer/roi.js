// Pause ROI dashboard: draws the series the page embeds (json_script "roi-series") with Plotly.
// Periods are categories labelled in the page's language (a date axis over one day would tick
// in fractions of a second), and a series of a few periods is drawn as bars, not lone dots.
// Every value axis is titled with its unit (json_script "roi-names", in the page's language),
// and a count ratio never shares an axis with percentages.
(function () {
  const series = JSON.parse(document.getElementById("roi-series").textContent);
  const charts = document.getElementById("roi-charts");
  const bucket = charts.dataset.bucket || "day";
  const FEW = 4;
  const lang = document.documentElement.lang || undefined;
  const formats = {
    day: { day: "numeric", month: "short" },
    week: { day: "numeric", month: "short" },
    month: { month: "short", year: "numeric" },
  };
  const format = new Intl.DateTimeFormat(lang, { ...(formats[bucket] || formats.day), timeZone: "UTC" });
  const label = (period) => {
    const shown = format.format(new Date(`${period}T00:00:00Z`));
    return bucket === "week" ? (charts.dataset.weekOf || "%s").replace("%s", shown) : shown;
  };
  const x = series.map((s) => label(s.period));
  const few = series.length < FEW;
  const config = { displaylogo: false, responsive: true, displayModeBar: false };
  const names = JSON.parse(document.getElementById("roi-names").textContent);
  const axis = (title, extra) => ({ title: { text: title }, automargin: true, rangemode: "tozero", ...(extra || {}) });
  const layout = (yTitle, extra) =>
    Object.assign(
      {
        margin: { t: 10, r: 16, b: 40, l: 56 },
        legend: { orientation: "h" },
        xaxis: { type: "category", automargin: true },
        yaxis: axis(yTitle),
        barmode: "group",
      },
      extra || {}
    );
  const trace = (name, key, yaxis) => ({
    x,
    y: series.map((s) => s[key]),
    name,
    yaxis: yaxis || "y",
    ...(few ? { type: "bar" } : { mode: "lines+markers" }),
  });
  const triggers = [...new Set(series.flatMap((s) => Object.keys(s.pauses_per_session_by_trigger)))];
  Plotly.newPlot(
    "chart-pauses",
    triggers.map((t) => ({
      x,
      y: series.map((s) => s.pauses_per_session_by_trigger[t] || 0),
      name: names.triggers[t] || t,
      type: "bar",
    })),
    layout(names.pausesAxis, { barmode: "stack" }),
    config
  );
  Plotly.newPlot(
    "chart-latency",
    [trace("p50", "manual_latency_ms_p50"), trace("p95", "manual_latency_ms_p95")],
    layout(names.latencyAxis),
    config
  );
  Plotly.newPlot("chart-edits", [trace(names.edits, "edits_per_pause")], layout(names.editsAxis, { showlegend: false }), config);
  Plotly.newPlot(
    "chart-rates",
    [trace(names.accepted, "accepted_alternative_rate"), trace(names.interception, "interception_rate")],
    layout(names.ratesAxis, { yaxis: axis(names.ratesAxis, { tickformat: ".0%" }) }),
    config
  );
  // ROI needs an annual system cost: without one there is no right axis to draw.
  const hasRoi = series.some((s) => typeof s.roi === "number");
  const value = { x, y: series.map((s) => s.value), name: names.value, type: "bar" };
  const roi = { ...trace("ROI", "roi", "y2"), type: "scatter", mode: "lines+markers" };
  Plotly.newPlot(
    "chart-roi",
    hasRoi ? [value, roi] : [value],
    layout(
      names.valueAxis,
      hasRoi ? { margin: { t: 10, r: 64, b: 40, l: 56 }, yaxis2: axis(names.roiAxis, { overlaying: "y", side: "right", tickformat: ".0%" }) } : {}
    ),
    config
  );
})();
