"""Adoption on confirmation (KIP-1242) measured on the real 4.4 tier, and its report
(``python -m connmgr.bench.adoption``; the measurement is :mod:`connmgr.realkafka.adoption`).
"""
