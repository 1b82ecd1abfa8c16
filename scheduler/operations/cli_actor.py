"""Who ran a repair from a shell: the login name and host, as the audit trail records it."""

import getpass
import socket


def command_actor() -> str:
    try:
        user = getpass.getuser()
    except (KeyError, OSError):  # no name for this uid (a container's arbitrary user)
        user = "unknown"
    return f"command:{user}@{socket.gethostname()}"
