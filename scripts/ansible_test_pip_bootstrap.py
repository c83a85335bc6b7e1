"""Stand-in for ansible-test's pip bootstrap download (ci-files.testing.ansible.com is unreachable here).

ansible-test runs `python <this file> [pip options] pip==X` in each fresh sanity venv. The stdlib's
ensurepip provides a pip, which then installs the requested pip release from PyPI.
"""

import ensurepip
import os
import subprocess
import sys

ensurepip.bootstrap(upgrade=True)
cert = ["--cert", "/etc/ssl/certs/ca-certificates.crt"] if os.path.exists("/etc/ssl/certs/ca-certificates.crt") else []
args = cert + [a for a in sys.argv[1:] if a not in ("--no-setuptools", "--no-wheel")]
subprocess.check_call([sys.executable, "-m", "pip", "install", "--disable-pip-version-check", *args])
