"""The long run: stock and patched Java clients side by side for an hour on the real
3-broker KRaft tier over SASL_SSL, through a rolling restart and a broker moved to a new port,
and a report of what their connections cost (``python -m connmgr_evidence.bench.longrun``).
"""
