"""One kazoo session against a ZooKeeper-protocol server (argv[1], host:port), as a new
user's first script would run it: authenticate with digest, create nodes (one with a
digest ACL computed by kazoo itself, one ephemeral), read them back, then close the session
and wait for the server's answer. Exits non-zero, naming the step, if anything differs
from what ZooKeeper does: an error, a NoAuth where the credentials should do, no NoAuth
without them, or a connection dropped instead of the close reply."""

import logging
import sys

from kazoo.client import KazooClient
from kazoo.exceptions import NoAuthError
from kazoo.security import make_digest_acl


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
    if anonymous.exists(ephemeral):
        sys.exit("the closed session's ephemeral node outlived the close")
    anonymous.stop()
    anonymous.close()
    if dropped.messages:
        sys.exit("closing the second session dropped the connection: " + "; ".join(dropped.messages))
    print("ok")


if __name__ == "__main__":
    main(sys.argv[1])
