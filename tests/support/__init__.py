"""Test helpers shared by several test folders: real peers on loopback and a fast clock.

Importable as ``support`` once ``tests/`` is on ``sys.path`` (each user puts it there; there is no
top-level conftest). Nothing here listens beyond 127.0.0.1, and every server a fixture starts is stopped.

* ``connector_server`` — a real ``pyflyte serve connector`` (flytekit) on 127.0.0.1 through
  ``examples/connector/serve_loopback.py``, with the test connectors of ``scripted_connectors.py``;
* ``redis_server`` — a real ``redis-server`` on 127.0.0.1, nothing persisted;
* ``FastClock`` — real time run faster, for the executor's and the status cache's periods.
"""
