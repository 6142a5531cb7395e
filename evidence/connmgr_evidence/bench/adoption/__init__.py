"""Adoption on confirmation (KIP-1242) measured on the real 4.4 tier, and its report
(``python -m connmgr_evidence.bench.adoption``; the measurement is
:mod:`connmgr_evidence.realkafka.adoption`).
"""
