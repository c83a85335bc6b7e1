#!/usr/bin/python3
"""Which of PORTS accept a TCP connection at ADDRESS, from the host this runs on: a JSON list.

Usage: open_ports.py ADDRESS PORT...
"""

import json
import socket
import sys


def accepts(address: str, port: int) -> bool:
    try:
        with socket.create_connection((address, port), timeout=3):
            return True
    except OSError:
        return False


address, ports = sys.argv[1], sorted({int(p) for p in sys.argv[2:]})
print(json.dumps([port for port in ports if accepts(address, port)]))
