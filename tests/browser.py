"""Headless Debian Chromium for the report tests: one flag list and one runner for every test."""

import subprocess
from pathlib import Path

CHROMIUM = Path("/usr/bin/chromium")
# Networking flags off: this machine's closed network refuses Chromium's background connections.
CHROME_FLAGS = [
    "--headless",
    "--no-sandbox",
    "--disable-gpu",
    "--disable-quic",
    "--no-first-run",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
    "--hide-scrollbars",
]


def chromium(profile: Path, *args: str) -> subprocess.CompletedProcess:
    """Run Chromium once with a fresh profile folder; the caller reads stdout or the files."""
    return subprocess.run(
        [str(CHROMIUM), *CHROME_FLAGS, f"--user-data-dir={profile}", *args],
        capture_output=True,
        text=True,
        timeout=180,
        check=False,
    )
