"""The post-run vendor-comparison report (issue 6): data computed apart from its rendering.

data.build_report  analysis dir + config + claims -> model.ReportData   (every number; tested without HTML)
markdown.render    ReportData -> report.md      (golden-tested)
html.render        ReportData -> report.html    (one self-contained file; charts.py draws inline SVG)
model.to_json      ReportData -> report.json    (schema.json)
command            ``spanwatch report DIR`` and the writer ``spanwatch analyze --claims`` and the demo use
"""
