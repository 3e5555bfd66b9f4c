// gpuhealth serve: the dashboard's chart data rules, as pure functions (no DOM), so that they can be tested
// on their own: in the browser (tests/web/test_web_browser.py) and under Node where it is installed
// (tests/web/test_web_series.py). app.js reads them from window.gpuhealthSeries.
"use strict";
(function (root) {
  // A history answer merged into a chart that live samples may already have extended. The server answered
  // as of `until`; a sample streamed after that time can reach the page before the answer does, and the
  // answer does not hold it. So: the answer's points up to `until`, then the chart's own points after
  // `until`; one point per timestamp (the answer's where both have one), in time order.
  function mergeHistory(histT, histV, liveT, liveV, until) {
    const byT = new Map();
    for (let i = 0; i < liveT.length; i++) if (liveT[i] > until) byT.set(liveT[i], liveV[i]);
    // the answer can hold points a little after `until` (sampled while it was read): they are the same
    // samples the stream sends, and win over the chart's copy
    for (let i = 0; i < histT.length; i++) byT.set(histT[i], histV[i]);
    const t = [...byT.keys()].sort((a, b) => a - b);
    return { t, v: t.map((x) => byT.get(x)) };
  }

  const api = { mergeHistory };
  if (typeof module === "object" && module.exports) module.exports = api;
  else root.gpuhealthSeries = api;
})(typeof window === "undefined" ? globalThis : window);
