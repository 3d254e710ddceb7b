"""numba's decorators for the fast paths' kernels, and one line on stderr when they compile.

The kernels are cached on disk (`cache=True`: numba writes them beside the sources, or to
NUMBA_CACHE_DIR), so only the first call after an install or an edit compiles them, but then
for long (a minute and more on two cores: the trees' event pass inlines its helpers), with no
word. numba announces each real compilation (not a load from its cache) as a "numba:compile"
event; the first one prints "compiling fast kernels (once) ..." on stderr. numba keys each
cached function on its own file only: a kernel that inlines another file's helpers
(fast/trees/repair.py inlines kernel.py's) keeps stale code until its own file changes.
"""

import sys

import numba
from numba.core import event

jit = numba.njit(cache=True, nogil=True)
inline_jit = numba.njit(cache=True, nogil=True, inline="always")
NOTICE = "transitsim: compiling fast kernels (once; cached for later runs) ..."


class CompileNotice(event.Listener):
    """Prints NOTICE the first time numba compiles anything in this process."""

    said = False

    def on_start(self, ev: event.Event) -> None:
        if not CompileNotice.said:
            CompileNotice.said = True
            print(NOTICE, file=sys.stderr, flush=True)

    def on_end(self, ev: event.Event) -> None:
        pass


event.register("numba:compile", CompileNotice())
