"""Whether this machine can build a testbed: the reason to skip the tests that need one."""

import pytest

from transitsim.testbed import netns
from transitsim.testbed.netns import Shaping, Testbed, TestbedError


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
