"""The controller core (sans-IO): metadata records, the image they replay into, elections, liveness, propagation.

Start at `controller.py` (`Controller`); `records.py` and `image.py` define the state, `election.py` and
`replication_control.py` the decisions, `brokers.py` liveness, `propagation.py` what brokers see and when,
`store.py` where records are kept.
"""
