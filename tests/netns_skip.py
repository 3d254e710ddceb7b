"""Whether this machine can build a testbed: the reason to skip the tests that need one; and the
fixture every testbed test file uses to leave no namespace of its own behind."""

import os

import pytest

from transitsim.testbed import netns
from transitsim.testbed.netns import Shaping, Testbed, TestbedError, cleanup_leftovers


def testbed_reason() -> str | None:
    """None where a 1-host testbed can be built and torn down here, else why not."""
    try:
        netns.preflight()
        with Testbed(1, Shaping.for_rate(50e6)):
            pass
    except TestbedError as exc:
        return str(exc)
    return None


REASON = testbed_reason()
needs_netns = pytest.mark.skipif(REASON is not None, reason=REASON or "")


@pytest.fixture(autouse=True)
def no_leftovers():
    """Before a test, what killed runs left; after it, none of this process's namespaces
    (autouse in every module that imports it)."""
    if REASON is None:
        cleanup_leftovers()
    yield
    if REASON is None:
        mine = [n for n in netns.list_namespaces() if n.startswith(f"tsb-{os.getpid()}-")]
        assert mine == [], f"namespaces left behind: {mine}"
