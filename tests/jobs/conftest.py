"""Fixtures of the jobs tests.

``standalone``: one standalone Spark master and worker on 127.0.0.1 (tests/jobs/standalone_spark.py)
for every module that submits jobs to a cluster, started when the first test that needs it
runs and stopped once the last one has ended, instead of a cluster per module.  Its daemons
start without any ``AWS_`` setting, so a job on an ``s3://`` root has to bring the credentials
itself (what tests/jobs/test_objstore_cluster.py checks).
"""

from __future__ import annotations

import contextlib

import pytest

from standalone_spark import cluster_environment, standalone_cluster

_STOP_AFTER: dict[str, contextlib.ExitStack] = {}
"""Node id of the last test that uses a shared daemon: what stops the daemon after it."""


@pytest.fixture(scope="session")
def standalone(request, tmp_path_factory):
    """(master URL, the daemons' environment, their folder: logs and work dirs)."""
    base = tmp_path_factory.mktemp("standalone")
    env = {k: v for k, v in cluster_environment(base).items() if not k.startswith("AWS_")}
    with contextlib.ExitStack() as stack:
        url = stack.enter_context(standalone_cluster(base, env))
        users = [item for item in request.session.items if "standalone" in item.fixturenames]
        if users:  # not when a test asked for it in another way (request.getfixturevalue)
            _STOP_AFTER[users[-1].nodeid] = stack
        yield url, env, base


@pytest.hookimpl(trylast=True)
def pytest_runtest_teardown(item, nextitem):
    """Stop a shared daemon after the last test that uses it (the rest of the run has no use for
    two idle JVMs); the fixture's own teardown at the end of the session then has nothing to do."""
    stack = _STOP_AFTER.pop(item.nodeid, None)
    if stack is not None:
        stack.close()
