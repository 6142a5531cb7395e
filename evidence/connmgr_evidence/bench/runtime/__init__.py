"""What the job runs on: the Spark session and its jobs (:mod:`~connmgr.bench.runtime.spark`,
:mod:`~connmgr.bench.runtime.sparkjob`) and the worker pools
(:mod:`~connmgr.bench.runtime.pool`)."""
