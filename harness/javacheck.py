"""Check that Java 17+ is on the PATH (PySpark 4 needs it); if not, exit 1 naming the fix."""

from __future__ import annotations

import re
import shutil
import subprocess
import sys

INSTALL_HINT = "install it with: apt-get install -y openjdk-17-jre-headless (or set JAVA_HOME)"


def java_major_version() -> int | None:
    """The major version of `java` on the PATH (or under JAVA_HOME), or None if there is none."""
    import os

    java = shutil.which("java")
    home = os.environ.get("JAVA_HOME")
    if home and os.path.exists(os.path.join(home, "bin", "java")):
        java = os.path.join(home, "bin", "java")
    if java is None:
        return None
    try:
        out = subprocess.run([java, "-version"], capture_output=True, text=True, timeout=60)
    except (OSError, subprocess.TimeoutExpired):
        return None
    match = re.search(r'version "(\d+)(?:\.(\d+))?', out.stderr + out.stdout)
    if not match:
        return None
    major = int(match.group(1))
    if major == 1 and match.group(2):  # "1.8" style
        major = int(match.group(2))
    return major


def main() -> int:
    major = java_major_version()
    if major is None:
        print(f"error: Java 17+ is required for PySpark 4 and none was found; {INSTALL_HINT}",
              file=sys.stderr)
        return 1
    if major < 17:
        print(f"error: Java {major} found, PySpark 4 needs Java 17+; {INSTALL_HINT}",
              file=sys.stderr)
        return 1
    print(f"java {major}: ok")
    return 0


if __name__ == "__main__":
    sys.exit(main())
