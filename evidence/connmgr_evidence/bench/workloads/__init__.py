"""Workload classes against the limits operators hit (``python -m
connmgr_evidence.bench.workloads``).

Each class of client (:mod:`.classes`) is drawn, simulated under every client model and
composed into a fleet (:mod:`.compose`), run per cluster size in worker processes
(:mod:`.run`), and reported against the providers' published limits (:mod:`.limits`,
:mod:`.report`): ``reports/workloads/index.md``, whose summary table the RFC's Summary opens
with (:mod:`.rfcblock`).
"""
