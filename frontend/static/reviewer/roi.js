// Pause ROI dashboard: draws the series the page embeds (json_script "roi-series") with Plotly.
(function () {
  const series = JSON.parse(document.getElementById("roi-series").textContent);
  const x = series.map((s) => s.period);
  const layout = (extra) => Object.assign({ margin: { t: 10, r: 10, b: 40, l: 50 }, legend: { orientation: "h" } }, extra || {});
  const line = (name, key, axis) => ({ x, y: series.map((s) => s[key]), name, mode: "lines+markers", yaxis: axis || "y" });
  const triggers = [...new Set(series.flatMap((s) => Object.keys(s.pauses_per_session_by_trigger)))];
  Plotly.newPlot("chart-pauses", triggers.map((t) => ({ x, y: series.map((s) => s.pauses_per_session_by_trigger[t] || 0), name: t, type: "bar" })), layout({ barmode: "stack" }), { displaylogo: false, responsive: true });
  Plotly.newPlot("chart-latency", [line("p50", "manual_latency_ms_p50"), line("p95", "manual_latency_ms_p95")], layout(), { displaylogo: false, responsive: true });
  Plotly.newPlot("chart-rates", [line("edits per pause", "edits_per_pause"), line("accepted alternatives", "accepted_alternative_rate"), line("interception", "interception_rate")], layout(), { displaylogo: false, responsive: true });
  Plotly.newPlot("chart-roi", [{ x, y: series.map((s) => s.value), name: "value", type: "bar" }, line("ROI", "roi", "y2")], layout({ yaxis2: { overlaying: "y", side: "right", tickformat: ".0%" } }), { displaylogo: false, responsive: true });
})();
