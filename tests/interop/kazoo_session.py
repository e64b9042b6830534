"""One kazoo session against a ZooKeeper-protocol server (argv[1], host:port), as a new
user's first script would run it: authenticate with digest, create nodes (one with a
digest ACL computed by kazoo itself, one ephemeral), read them back, then close the session
and wait for the server's answer. Exits non-zero, naming the step, if anything differs
from what ZooKeeper does: an error, a NoAuth where the credentials should do, no NoAuth
without them, or a connection dropped instead of the close reply."""

import logging
import sys
import time

from kazoo.client import KazooClient
from kazoo.exceptions import NoAuthError
from kazoo.security import make_digest_acl


CLOSES = 10


class Dropped(logging.Handler):
    """Collects kazoo's reports of a connection lost (what a close answered by a drop
    logs: "Connection dropped: socket connection broken")."""

    def __init__(self):
        super().__init__(logging.INFO)
        self.messages = []

    def emit(self, record):
        text = record.getMessage()
        if "dropped" in text.lower() or "broken" in text.lower():
            self.messages.append(text)


def gone(client, path, bound_s=5.0):
    """Whether `path` disappears within `bound_s` seconds."""
    deadline = time.monotonic() + bound_s
    while client.exists(path):
        if time.monotonic() > deadline:
            return False
        time.sleep(0.05)
    return True


def main(hosts):
    dropped = Dropped()
    logging.getLogger("kazoo").addHandler(dropped)
    logging.getLogger("kazoo").setLevel(logging.INFO)

    alice = KazooClient(hosts=hosts, auth_data=[("digest", "alice:secret")], timeout=5)
    alice.start(timeout=10)
    base = "/kazoo-interop"
    alice.ensure_path(base)
    private = base + "/private"
    if alice.exists(private):
        alice.delete(private)
    acl = [make_digest_acl("alice", "secret", all=True)]
    alice.create(private, b"v", acl=acl)
    assert alice.get(private)[0] == b"v", "alice reads her node"
    ephemeral = alice.create(base + "/e-", b"", ephemeral=True, sequence=True)

    anonymous = KazooClient(hosts=hosts, timeout=5)
    anonymous.start(timeout=10)
    try:
        anonymous.get(private)
        sys.exit("a session without credentials read a digest-protected node")
    except NoAuthError:
        pass
    assert anonymous.exists(ephemeral), "the ephemeral node is there while alice lives"

    # Close: kazoo sends closeSession and waits for the answer.
    alice.stop()
    alice.close()
    if dropped.messages:
        sys.exit("closing the session dropped the connection: " + "; ".join(dropped.messages))
    # kazoo's stop() does not wait for the close reply, so the node goes shortly after.
    if not gone(anonymous, ephemeral):
        sys.exit("the closed session's ephemeral node outlived the close")
    # A dropped close is a race on the server (and kazoo reads the reply only when it
    # arrives before its loop ends), so several closes give it more chances to show.
    for i in range(CLOSES):
        client = KazooClient(hosts=hosts, auth_data=[("digest", "alice:secret")], timeout=5)
        client.start(timeout=10)
        node = client.create(base + "/e-", b"", ephemeral=True, sequence=True)
        client.stop()
        client.close()
        if dropped.messages:
            sys.exit(f"close {i + 2} dropped the connection: " + "; ".join(dropped.messages))
        if not gone(anonymous, node):
            sys.exit(f"close {i + 2} left its ephemeral node behind")
    anonymous.stop()
    anonymous.close()
    if dropped.messages:
        sys.exit("closing the last session dropped the connection: " + "; ".join(dropped.messages))
    print("ok")


if __name__ == "__main__":
    main(sys.argv[1])
