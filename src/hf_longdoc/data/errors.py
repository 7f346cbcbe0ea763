"""The error every dataset reader raises for data it cannot use as given.

It lives on its own so that each reader (files, folders, the Hub) can raise it without importing another reader.
"""


class DatasetError(ValueError):
    """A dataset that cannot be used as given; the message says what to change."""


__all__ = ["DatasetError"]
