"""What `hf-longdoc serve` (and `create_app`) takes: the model's reading settings, the server's limits and where it
listens. Nothing heavy is imported here, so `hf-longdoc serve --help` answers at once."""

import logging
import os
import socket
import stat
from dataclasses import dataclass

from ..inference.settings import ReadSettings
from ..utils.parsing import name_list, option
from ..utils.rules import POSITIVE_INTEGER, NumberRule

logger = logging.getLogger(__name__)
PORT = NumberRule(integer=True, low=1, high=65535)
LOOPBACK_NAMES = ("localhost", "127.0.0.1", "::1")
WILDCARD_ADDRESSES = ("0.0.0.0", "::", "")
PAGE_PATH = "/ui"  # the page's path: no route of text embeddings inference uses it (TEI's `GET /` is its health probe)


@dataclass(frozen=True, kw_only=True)
class ServeSettings(ReadSettings):
    """One server: the reading settings are `ReadSettings`, `predict`'s, with the same meaning, defaults and flags, so
    a document gets the labels and scores `predict` gives it; the limits bound what one request and the queue may
    hold. `truncation_side` is the side a request reads when it does not say (`truncation_direction`)."""

    host: str = option("127.0.0.1", "the address to listen on (127.0.0.1: this machine only; 0.0.0.0: every "
                                    "interface, behind your own authentication or --api-key-file)")
    port: int = option(8080, "the port to listen on (1 to 65535)", type=PORT.parse)
    allowed_hosts: tuple | None = option(None, "comma-separated `Host` names the server answers besides the loopback "
                                               "names and --host (a request naming another host is refused, so a web "
                                               "page cannot reach the server by DNS rebinding); '*': any host, for a "
                                               "server behind a proxy that checks hosts itself. `hf-longdoc serve` "
                                               "always checks; `create_app` only when this is given (None: the app "
                                               "it is mounted in decides)", type=name_list, metavar="NAMES")
    served_model_name: str | None = option(None, "the model's name in /info and the log; None: the name on its "
                                                 "model card, else its folder's name (never a path of this disk)",
                                           type=str, metavar="NAME")
    max_batch_tokens: int = option(16384, "input ids read together: the documents of requests that arrive together "
                                          "are batched across clients, by length, up to this many",
                                   type=POSITIVE_INTEGER.parse)
    max_client_batch_size: int = option(32, "documents one request may send (more: 413)", type=POSITIVE_INTEGER.parse)
    max_concurrent_requests: int = option(512, "requests queued or being read at once (more: 429)",
                                          type=POSITIVE_INTEGER.parse)
    max_input_chars: int = option(2_000_000, "characters one document may have (more: 413)",
                                  type=POSITIVE_INTEGER.parse)
    api_key_file: str | None = option(None, "a file holding the API key clients must send (`Authorization: Bearer "
                                            "KEY` or `X-API-Key: KEY`); /health, /metrics and the page stay open",
                                      type=str, metavar="PATH")
    shutdown_timeout: int = option(60, "seconds a SIGTERM waits for the requests in flight to be answered (new "
                                       "connections are refused at once)", type=POSITIVE_INTEGER.parse,
                                   metavar="SECONDS")
    max_explain: int = option(10, "the most passages /classify returns per document (`explain`)",
                              type=POSITIVE_INTEGER.parse)

    def check(self):
        """A ValueError naming the setting (and its flag) for a value no server can use, before the model loads."""
        PORT.check(self.port, "port", "port")
        for name in ("max_batch_tokens", "max_client_batch_size", "max_concurrent_requests", "max_input_chars",
                     "max_explain"):
            POSITIVE_INTEGER.check(getattr(self, name), name, name.replace("_", "-"))
        if isinstance(self.allowed_hosts, (str, list)):
            hosts = name_list(self.allowed_hosts) if isinstance(self.allowed_hosts, str) else tuple(self.allowed_hosts)
            object.__setattr__(self, "allowed_hosts", hosts)
        if self.allowed_hosts is not None and not (isinstance(self.allowed_hosts, tuple) and all(
                isinstance(name, str) and name for name in self.allowed_hosts)):
            raise TypeError(f"`allowed_hosts` (--allowed-hosts) must be host names, got {self.allowed_hosts!r}.")
        if self.host not in WILDCARD_ADDRESSES:
            try:
                socket.getaddrinfo(self.host, None)
            except (OSError, UnicodeError) as error:
                raise ValueError(f"`host` (--host) {self.host!r} is not an address of this machine or a name that "
                                 f"resolves ({getattr(error, 'strerror', None) or error}); pass an IP address such as "
                                 "127.0.0.1 or 0.0.0.0.") from None
        return self

    def host_names(self):
        """The `Host` names the server answers (lower case, without ports), or None for any ('*' in
        `allowed_hosts`): the loopback names, `host` itself, and `allowed_hosts`; on every interface (0.0.0.0) this
        machine's names too (and, `on_every_interface`, any IP address: DNS rebinding needs a name)."""
        if "*" in (self.allowed_hosts or ()):
            return None
        names = {*LOOPBACK_NAMES, self.host.lower(), *(name.lower() for name in self.allowed_hosts or ())}
        if self.on_every_interface:
            names |= {socket.gethostname().lower(), socket.getfqdn().lower()}
        return frozenset(names - {""})

    @property
    def on_every_interface(self):
        return self.host in WILDCARD_ADDRESSES

    def api_key(self):
        """The key in `api_key_file` (stripped), or None when there is none; a ValueError for an unreadable or empty
        file. The key itself is never logged."""
        if self.api_key_file is None:
            return None
        try:
            with open(self.api_key_file, encoding="utf-8") as f:
                key = f.read().strip()
        except OSError as error:
            raise ValueError(f"`api_key_file` (--api-key-file) {self.api_key_file!r} cannot be read: "
                             f"{error.strerror or error}.") from None
        if not key:
            raise ValueError(f"`api_key_file` (--api-key-file) {self.api_key_file!r} is empty; write the key in it.")
        # a key must be sendable in a header as it is: printable ASCII (Starlette reads headers as Latin-1, so a key
        # of other characters would match only a client that sends Latin-1; a line break cannot be sent at all)
        for position, character in enumerate(key):
            if not " " <= character <= "~":
                kind = "a line break" if character in "\r\n" else (
                    "a control character" if character.isascii() else "a non-ASCII character")
                raise ValueError(f"`api_key_file` (--api-key-file) {self.api_key_file!r}: the key holds {kind} "
                                 f"(U+{ord(character):04X}) at character {position + 1}, which a client cannot send "
                                 "in a header; write one line of printable ASCII characters.")
        mode = os.stat(self.api_key_file).st_mode
        if mode & (stat.S_IRGRP | stat.S_IROTH):
            logger.warning("The API key file %s can be read by other users (mode %o); make it private: chmod 600 %s",
                           self.api_key_file, stat.S_IMODE(mode), self.api_key_file)
        return key


__all__ = ["ServeSettings"]
