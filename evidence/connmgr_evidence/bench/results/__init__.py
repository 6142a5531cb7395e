"""The raw results: the results schema (:mod:`~connmgr_evidence.bench.results.schema`), its rows
(:mod:`~connmgr_evidence.bench.results.rows`), the typed records a report's results are declared by
(:mod:`~connmgr_evidence.bench.results.record`) and a stage's JSON file
(:mod:`~connmgr_evidence.bench.results.stagefile`)."""
