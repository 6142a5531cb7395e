"""The comparison report: a run directory's results in, ``index.md``, ``tables/`` and
``plots/`` out (:mod:`connmgr.bench.report.compare` runs it).

Its parts, in the order the comparison uses them: loading and checking the results
(:mod:`~connmgr.bench.report.load`, :mod:`~connmgr.bench.report.micro`), the aggregation in
Spark (:mod:`~connmgr.bench.report.aggregation`, by the rules of
:mod:`~connmgr.bench.report.metrics`) into typed values
(:mod:`~connmgr.bench.report.summaries`), the stated costs
(:mod:`~connmgr.bench.report.stated`), the tables (:mod:`~connmgr.bench.report.tables`,
written by :mod:`~connmgr.bench.report.table`), the plots
(:mod:`~connmgr.bench.report.plots`) and the page (:mod:`~connmgr.bench.report.page`).
"""
