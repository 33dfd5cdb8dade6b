// Plotly (4.8 MB) runs the first time a figure is drawn, not while the page opens: evaluating
// it held the main thread for 0.2-1.6 s on a 2-core machine, during which the page answered no
// click, and most sessions never need it (the pause heatmap is folded away by default, the
// live one below the fold). The template names the file in <link id="plotly-js"
// rel="prefetch">, so the browser fetches it while idle and it runs from the cache.
let loading = null;

export function loadPlotly() {
  if (window.Plotly) return Promise.resolve(window.Plotly);
  if (loading === null) {
    loading = new Promise((resolve, reject) => {
      const script = document.createElement("script");
      script.src = document.getElementById("plotly-js").href;
      script.onload = () => resolve(window.Plotly);
      script.onerror = () => {
        loading = null; // the next figure tries again
        script.remove();
        reject(new Error("Plotly could not be loaded"));
      };
      document.head.append(script);
    });
  }
  return loading;
}

// Load it when the page has nothing else to do: a finished or paused session's page then
// draws (and prints) its figures at once.
export function loadPlotlyWhenIdle() {
  const idle = window.requestIdleCallback || ((work) => setTimeout(work, 1000));
  idle(() => loadPlotly().catch(() => {}));
}
