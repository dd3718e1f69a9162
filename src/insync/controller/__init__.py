"""The controller core (sans-IO): metadata records, the image they replay into, elections, liveness, propagation.

Start at `controller.py` (`Controller`); `metadata/records.py` and `metadata/image.py` define the state,
`election.py` and `replication_control.py` the decisions, `brokers.py` liveness, `propagation.py` what brokers see
and when, `store.py` where records are kept (the ZooKeeper store, which blocks, is `server/zk_store.py`).
"""
