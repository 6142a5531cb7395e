"""The comparison report: a run directory's results in, ``index.md``, ``tables/`` and
``plots/`` out (:mod:`connmgr_evidence.bench.report.compare` runs it).

Its parts, in the order the comparison uses them: loading and checking the results
(:mod:`~connmgr_evidence.bench.report.load`, :mod:`~connmgr_evidence.bench.report.micro`), the
aggregation in
Spark (:mod:`~connmgr_evidence.bench.report.aggregation`, by the rules of
:mod:`~connmgr_evidence.bench.report.metrics`) into typed values
(:mod:`~connmgr_evidence.bench.report.summaries`), the stated costs
(:mod:`~connmgr_evidence.bench.report.stated`), the tables
(:mod:`~connmgr_evidence.bench.report.tables`,
written by :mod:`~connmgr_evidence.bench.report.table`), the plots
(:mod:`~connmgr_evidence.bench.report.plots`) and the page
(:mod:`~connmgr_evidence.bench.report.page`).
"""
