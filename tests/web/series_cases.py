"""Cases for the dashboard's chart rule ``mergeHistory`` (src/gpuhealth/web/static/series.js): run under
Node by test_web_series.py and inside Chromium by test_web_browser.py. Each case: the arguments
(history t, history v, chart t, chart v, the answer's `until`) and the merged (t, v)."""

from __future__ import annotations

MERGE_CASES = [
    # the sample streamed at 4, after the server answered as of 3, stays on the chart (replacing lost it)
    ("streamed-after-answer", ([1, 2, 3], [10, 20, 30], [1, 2, 3, 4], [10, 20, 30, 40], 3),
     ([1, 2, 3, 4], [10, 20, 30, 40])),
    # the answer holds a point after `until` that the stream also drew: one point, the answer's value
    ("same-timestamp-once", ([1, 2, 4], [10, 20, 41], [3, 4, 5], [30, 40, 50], 3.5),
     ([1, 2, 4, 5], [10, 20, 41, 50])),
    # the chart's points up to `until` are the answer's business: an older range's points go
    ("old-range-dropped", ([10, 11], [1, 1], [1, 2, 12], [5, 5, 2], 11), ([10, 11, 12], [1, 1, 2])),
    # nothing in history yet (a fresh GPU): the streamed points after the answer stay
    ("empty-history", ([], [], [5, 6], [50, 60], 4), ([5, 6], [50, 60])),
    # nothing streamed yet: the answer as it is
    ("empty-chart", ([1, 2], [10, 20], [], [], 2), ([1, 2], [10, 20])),
    # time order whatever the order of arrival
    ("ordered", ([3, 1, 2], [30, 10, 20], [6, 5], [60, 50], 3), ([1, 2, 3, 5, 6], [10, 20, 30, 50, 60])),
]
