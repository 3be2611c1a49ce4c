"""Blame from evidence: what each link cost each step, one module per step of the method
(``../shared/design/measurement.md``; the entry is ``pipeline.attribute``, the numbers are in ``rules``).

Kept free of imports: ``analyzer.physics`` reads its numbers from ``rules``.
"""
