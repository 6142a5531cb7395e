"""The raw results: the results schema (:mod:`~connmgr.bench.results.schema`), its rows
(:mod:`~connmgr.bench.results.rows`), the typed records a report's results are declared by
(:mod:`~connmgr.bench.results.record`) and a stage's JSON file
(:mod:`~connmgr.bench.results.stagefile`)."""
