"""The controller core (sans-IO): the broker conversation, elections, liveness, propagation.

Start at `controller.py` (`Controller`) and `node.py` (`ControllerCore`, the broker conversation in front of it
that the server and the simulator both drive, in the messages of `messages.py`); `metadata/records.py` and
`metadata/image.py` define the state, `election.py` and `replication_control.py` the decisions, `brokers.py`
liveness, `propagation.py` what brokers see and when, `store.py` where records are kept (the ZooKeeper store,
which blocks, is `server/zk_store.py`).
"""
