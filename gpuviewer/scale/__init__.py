"""Many ranks: the analysis as one map per file on Dask workers and one reduce here, and the
session summary (.gvsum) a laptop opens instead of the traces.

work.py   the map a worker runs: read one file (its columns cached as a side effect), map its
          ranks (analysis.rankmap), return small tables; and the session's rank numbering
dask_run.py  the client: a LocalCluster or a running scheduler, progress, failures
many.py   the whole run: files -> maps -> ranks numbered -> hosts aligned -> reduce
summary.py   the .gvsum folder: Parquet tables and a JSON manifest, written atomically
"""
