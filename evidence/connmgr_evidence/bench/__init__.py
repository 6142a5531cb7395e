"""The main job, ``connmgr bench``: grid, stages, results, Spark sweep and comparison, report."""
