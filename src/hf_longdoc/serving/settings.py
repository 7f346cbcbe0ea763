"""What `hf-longdoc serve` (and `create_app`) takes: the model's reading settings, the server's limits and where it
listens. Nothing heavy is imported here, so `hf-longdoc serve --help` answers at once."""

from dataclasses import dataclass

from ..numbers import NON_NEGATIVE_INTEGER, POSITIVE_INTEGER
from ..run_settings import option

LONG = ("truncate", "chunks")


@dataclass(kw_only=True)
class ServeSettings:
    """One server: the reading settings (`long`, `stride`, `aggregation`, `batch_size`, `device`, `dtype`) are
    `predict`'s, with the same meaning and defaults, so a document gets the labels and scores `predict` gives it; the
    limits bound what one request and the queue may hold."""

    host: str = option("127.0.0.1", "the address to listen on (127.0.0.1: this machine only; 0.0.0.0: every "
                                    "interface, behind your own authentication or --api-key-file)")
    port: int = option(8080, "the port to listen on", type=POSITIVE_INTEGER.parse)
    device: str | None = option(None, "where the model runs (cpu, cuda, cuda:1); None: a GPU when there is one",
                                type=str)
    dtype: str | None = option(None, "the weights' precision (float32, bfloat16, float16 on a GPU); None: as saved, "
                                     "in float32", type=str)
    long: str = option("truncate", "a document longer than the model reads: 'truncate' reads its start, as "
                                   "`predict` does; 'chunks' reads all of it in chunks whose logits are aggregated",
                       choices=LONG)
    stride: int = option(0, "with --long chunks: ids consecutive chunks share", type=NON_NEGATIVE_INTEGER.parse)
    aggregation: str = option("mean", "with --long chunks: how the chunks' logits become the document's",
                              choices=("mean", "max"))
    batch_size: int = option(8, "documents (chunks) per forward pass, as `predict --batch-size`",
                             type=POSITIVE_INTEGER.parse)
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
        for name in ("port", "batch_size", "max_batch_tokens", "max_client_batch_size", "max_concurrent_requests",
                     "max_input_chars", "max_explain"):
            POSITIVE_INTEGER.check(getattr(self, name), name, name.replace("_", "-"))
        NON_NEGATIVE_INTEGER.check(self.stride, "stride", "stride")
        if self.long not in LONG:
            raise ValueError(f"`long` (--long) must be one of {', '.join(LONG)}, got {self.long!r}.")
        if self.aggregation not in ("mean", "max"):
            raise ValueError(f"`aggregation` (--aggregation) must be mean or max, got {self.aggregation!r}.")
        return self

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
        return key


__all__ = ["LONG", "ServeSettings"]
